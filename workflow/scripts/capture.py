# rule capture: one forward pass per cell -> attention masses (+ per-head outputs for PR).
from headtrace import capture, hub, logs, probe, tables

with logs.to_file(snakemake.log[0]):
    p = snakemake.params
    model, family, device, batch_size = hub.load_for_cell(p.load, snakemake.wildcards.model,
                                                          snakemake.wildcards.revision, p.device, p.batch_size)
    batch = probe.batch_from_table(tables.read(snakemake.input.probe))
    result = capture.run(model, family, batch, batch_size=batch_size, device=device)
    capture.save_head_outputs(result, snakemake.output.head_outputs)
    tables.write(capture.attention_table(result, snakemake.wildcards.model, snakemake.wildcards.revision, p.tokens),
                 snakemake.output.attention, schema="attention")
