# rule probe: build the synthetic induction batch of one model.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.probe import synthetic
from headtrace.probe import words as probe_words
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    print(f"probe ({snakemake.wildcards.model}): {probe_words.describe(snakemake.params.probe)}")
    batch = synthetic.make_batch(**snakemake.params.probe)
    tables.write(synthetic.batch_table(batch), snakemake.output[0], schema="probe")
