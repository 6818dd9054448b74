# rule data_shift: the induction circuit, selectivity and PR before vs after the data shift.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace import experiments
from headtrace.core import tables
from headtrace.report import experiment_figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    base, shifted = tables.read(snakemake.input.base), tables.read(snakemake.input.shifted)
    verdicts = tables.read_many(snakemake.input.verdicts) if snakemake.input.verdicts else None
    table = experiments.data_shift_table(base, shifted, verdicts=verdicts,
                                         induction_threshold=snakemake.params.induction_threshold)
    heads = experiments.data_shift_heads(base, shifted)
    tables.write(table, snakemake.output.table, schema="data_shift")
    tables.write(heads, snakemake.output.heads)
    experiment_figures.plot_data_shift(heads, table, snakemake.output.figure)
