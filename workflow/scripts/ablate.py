# rule ablate: causal group ablation of one cell (all conditions batched in one job).
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import torch

from headtrace.causal import recipe
from headtrace.cell import screen
from headtrace.core import tables
from headtrace.models import hub
from headtrace.panel import identity
from headtrace.probe import synthetic
from headtrace.runtime import logs

# Where and how large: read here, not as rule params, so moving from CPU to GPU reruns nothing.
RUN_ON = (snakemake.config["capture"]["device"], snakemake.config["ablation"]["batch_size"])

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    load = identity.located(snakemake.config, wc.model, wc.revision, p.load)  # the weights it was scheduled for
    batch = synthetic.batch_from_table(tables.read(snakemake.input.probe))
    model, family, device, batch_size = hub.load_for_cell(load, wc.model, wc.revision, *RUN_ON,
                                                          seq_len=batch.seq_len,
                                                          token_range=batch.token_span)
    table, verdict = recipe.ablate_cell(
        model, family, batch, tables.read(snakemake.input.screen),
        screen.circuit_heads(tables.read(snakemake.input.final_screen)),
        n_random=p.n_random, batch_size=batch_size, device=device, name=wc.model, revision=wc.revision,
        tokens=p.tokens, ablation=p.ablation, screen_opts=p.screen, probe_settings=p.probe)
    tables.write(table, snakemake.output.ablation, schema="ablation")
    tables.write(verdict, snakemake.output.verdict, schema="verdict")
