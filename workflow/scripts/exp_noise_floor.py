# rule noise_floor: null selectivities -> per-class floors -> heads above the floor per revision.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import polars as pl

from headtrace import experiments
from headtrace.cell import screen
from headtrace.core import tables
from headtrace.report import experiment_figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p = snakemake.params
    traj = tables.read_many(snakemake.input.trajectories)
    init = traj.filter(pl.col("revision") == p.init_revision)
    shuffled = (screen.selectivity_table(tables.read_many(snakemake.input.shuffled), baseline=p.baseline)
                if snakemake.input.shuffled else None)
    floors = experiments.floors(experiments.null_samples(init, shuffled), p.quantile)
    # the floors' quantile and class threshold recorded, the init null's narrowness decided (experiments.noise_floor)
    table = experiments.noise_floor_table(traj, floors, class_threshold=p.class_threshold, quantile=p.quantile)
    tables.write(floors, snakemake.output.floors, schema="noise_floor_null")
    tables.write(table, snakemake.output.table, schema="noise_floor")
    experiment_figures.plot_noise_floor(table, snakemake.output.figure)
