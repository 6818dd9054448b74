# rule composition: when ablating the previous-token circuit starts to destroy induction.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace import experiments
from headtrace.core import tables
from headtrace.report import experiment_figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    table = experiments.composition_table(tables.read_many(snakemake.input.verdicts), dict(snakemake.params.chance),
                                          min_baseline_ratio=snakemake.params.min_baseline_ratio,
                                          alpha=snakemake.params.alpha)
    tables.write(table, snakemake.output.table, schema="composition")
    experiment_figures.plot_composition(table, snakemake.output.figure)
