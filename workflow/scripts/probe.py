# rule probe: build the synthetic induction batch of one model.
from headtrace import logs, probe, tables

with logs.to_file(snakemake.log[0]):
    batch = probe.make_batch(**snakemake.params.probe)
    tables.write(probe.batch_table(batch), snakemake.output[0], schema="probe")
