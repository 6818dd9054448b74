# rule probe: build the synthetic induction batch of one model.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import probe, probe_text, tables
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    print(f"probe ({snakemake.wildcards.model}): {probe_text.describe_kwargs(snakemake.params.probe)}")
    batch = probe.make_batch(**snakemake.params.probe)
    tables.write(probe.batch_table(batch), snakemake.output[0], schema="probe")
