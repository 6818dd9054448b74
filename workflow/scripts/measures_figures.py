# rule measures_figures: the field's measures beside the paper's, a panel per model.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.report import measure_figures
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    over = tables.read(snakemake.input.over)
    measure_figures.plot_sink(over, snakemake.output.sink)
    measure_figures.plot_prefix(over, snakemake.output.prefix)
