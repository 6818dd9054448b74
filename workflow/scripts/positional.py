# rule positional: per head, the share of its induction mass from one A position (positional heads).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.cell import positional
from headtrace.core import tables
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    wc = snakemake.wildcards
    table = positional.run_cell(snakemake.input.class_masses, snakemake.input.probe, wc.model, wc.revision,
                                snakemake.params.tokens)
    tables.write(table, snakemake.output[0], schema="positional")
