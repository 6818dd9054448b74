# rule positional: per head, the share of its induction mass from one A position (positional heads).
from headtrace import logs, positional, tables

with logs.to_file(snakemake.log[0]):
    wc = snakemake.wildcards
    table = positional.run_cell(snakemake.input.class_masses, snakemake.input.probe, wc.model, wc.revision,
                                snakemake.params.tokens)
    tables.write(table, snakemake.output[0], schema="positional")
