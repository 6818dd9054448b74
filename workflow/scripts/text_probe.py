# rule text_probe: the text file(s) tokenised once per model with its tokenizer.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

from headtrace.core import tables
from headtrace.models import tokenize
from headtrace.panel import identity
from headtrace.runtime import logs

with logs.to_file(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    load = identity.located(snakemake.config, wc.model, p.revision, p.load)  # the weights it was scheduled for
    folder = None
    if p.tokenizer is None:  # the checkpoint's own tokenizer: find its folder (hub pulls in torch: only here)
        from headtrace.models import hub

        folder = hub.cell_checkpoint(load, wc.model, p.revision)[1]
    table = tokenize.build(p.text, p.tokenizer, folder, f"model '{wc.model}' revision '{p.revision}'", wc.model)
    tables.write(table, snakemake.output[0], schema="text_probe")
