# rule experiments_summary: one paragraph per method experiment (markdown).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.report import experiment_summary
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    i = snakemake.input

    def get(name):
        return tables.read(i[name]) if i.get(name) else None

    text = experiment_summary.summary_markdown(get("cross_seed"), get("data_shift"), get("composition"),
                                               get("noise_floor"))
    tables.write_text(text, snakemake.output[0])  # atomic + fsync, like every output
