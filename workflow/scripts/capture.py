# rule capture: one forward pass per cell -> attention masses (+ per-head outputs for PR, per-sequence masses).
import torch

from headtrace.cell import capture
from headtrace.core import probe, tables
from headtrace.models import hub, provenance
from headtrace.runtime import logs

# Where and how large: read here, not as rule params, so moving from CPU to GPU reruns nothing.
RUN_ON = (snakemake.config["capture"]["device"], snakemake.config["capture"]["batch_size"])

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    batch = probe.batch_from_table(tables.read(snakemake.input.probe))
    model, family, device, batch_size = hub.load_for_cell(p.load, wc.model, wc.revision, *RUN_ON,
                                                          seq_len=batch.seq_len,
                                                          token_range=batch.token_span)
    result = capture.run(model, family, batch, batch_size=batch_size, device=device)
    capture.save_head_outputs(result, snakemake.output.head_outputs)
    capture.save_class_masses(result, snakemake.output.class_masses)  # per sequence, for the bootstrap
    tables.write(capture.attention_table(result, wc.model, wc.revision, p.tokens),
                 snakemake.output.attention, schema="attention")
    tables.write(provenance.cell_table(p.load, wc.model, wc.revision, p.tokens),
                 snakemake.output.provenance, schema="provenance")
