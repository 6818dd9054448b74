# rule cross_seed_table: the seed x seed ablation matrix and its heatmap.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace import experiments
from headtrace.core import tables
from headtrace.report import experiment_figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    # every model seed's rows together, the whole table's seed-specificity call on each (experiments.seeds)
    df = experiments.seed_specificity(tables.read_many(snakemake.input).sort("circuit_seed", "model_seed"))
    tables.write(df, snakemake.output.table, schema="cross_seed_ablation")
    experiment_figures.plot_cross_seed(df, snakemake.output.figure)
