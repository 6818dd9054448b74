# rule capture: one forward pass per cell -> attention masses (+ per-head outputs for PR, per-sequence masses).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import torch

from headtrace.cell import capture, patterns
from headtrace.core import tables
from headtrace.models import fingerprint, hub, provenance, tokenize
from headtrace.panel import identity
from headtrace.probe import repeated, synthetic
from headtrace.runtime import logs

# Where and how large: read here, not as rule params, so moving from CPU to GPU reruns nothing.
RUN_ON = (snakemake.config["capture"]["device"], snakemake.config["capture"]["batch_size"])

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    load = identity.located(snakemake.config, wc.model, wc.revision, p.load)  # the weights it was scheduled for
    batch = synthetic.batch_from_table(tables.read(snakemake.input.probe))
    model, family, device, batch_size = hub.load_for_cell(load, wc.model, wc.revision, *RUN_ON,
                                                          seq_len=batch.seq_len,
                                                          token_range=batch.token_span)
    result = capture.run(model, family, batch, batch_size=batch_size, device=device)
    capture.save_head_outputs(result, snakemake.output.head_outputs)
    capture.save_class_masses(result, snakemake.output.class_masses)  # per sequence, for the bootstrap
    tables.write(capture.attention_table(result, wc.model, wc.revision, p.tokens),
                 snakemake.output.attention, schema="attention")
    if hasattr(snakemake.output, "measures"):  # the field's own measures (docs/measures.md)
        text = None
        if snakemake.input.text_probe:
            probe_table = tables.read(str(snakemake.input.text_probe))
            tokenize.check_revision(probe_table, p.measures["tokenizer"], hub.cell_checkpoint(
                load, wc.model, wc.revision)[1], f"model '{wc.model}' revision '{wc.revision}'")
            text = tokenize.tokens_of(probe_table)
        tables.write(patterns.cell_measures(model, family, repeated=repeated.repeated_random(**p.measures["repeated"]),
                                            text=text, batch_size=batch_size, device=device, name=wc.model,
                                            revision=wc.revision, tokens=p.tokens),
                     snakemake.output.measures, schema="measures")
    # each weight file hashed once, for both tables; the tensors are read again as stored (mmap,
    # the pages the load just read), one at a time
    hashes = provenance.file_hashes(hub.cell_checkpoint(load, wc.model, wc.revision)[1])
    tables.write(provenance.cell_table(load, wc.model, wc.revision, p.tokens, hashes=hashes),
                 snakemake.output.provenance, schema="provenance")
    fmt, files, per_file = hashes
    tables.write(fingerprint.fingerprint_rows(files, wc.model, wc.revision, fmt, per_file),
                 snakemake.output.fingerprint, schema="fingerprint")
