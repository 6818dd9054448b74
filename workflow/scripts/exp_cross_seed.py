# rule cross_seed_ablation: every seed's final induction circuit ablated in this seed's final model.
from headtrace.runtime import warm

warm.delegate()  # under `headtrace warm` (make demo): this job runs in a fork with its imports done

import torch

from headtrace import experiments
from headtrace.causal import ablation, recipe
from headtrace.core import tables
from headtrace.models import families, hub
from headtrace.panel import identity
from headtrace.probe import synthetic
from headtrace.runtime import logs

# Where and how large: read here, not as rule params, so moving from CPU to GPU reruns nothing.
RUN_ON = (snakemake.config["capture"]["device"], snakemake.config["ablation"]["batch_size"])

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    load = identity.located(snakemake.config, wc.model, p.revision, p.load)  # the weights it was scheduled for
    # the circuits were chosen on the probe batch: ablate where the ablate rule does (ablation.probe)
    batch, _ = recipe.ablation_probe(synthetic.batch_from_table(tables.read(snakemake.input.probe)), p.probe, p.ablation)
    model, family, device, batch_size = hub.load_for_cell(load, wc.model, p.revision, *RUN_ON,
                                                          seq_len=batch.seq_len,
                                                          token_range=batch.token_span)
    circuits = {m: experiments.circuit_of(tables.read(s)) for m, s in zip(p.models, snakemake.input.screens)}
    n_heads = families.dims(model)[1]
    conds = experiments.cross_seed_conditions(circuits, n_heads, p.n_random, p.seed, exact_max=p.exact_max)
    results = ablation.run(model, family, batch, conds, batch_size=batch_size, device=device, copy_null=False)
    table = experiments.cross_seed_table(results, circuits, wc.model, p.seeds, n_heads_per_layer=n_heads)
    tables.write(table, snakemake.output[0], schema="cross_seed_model")  # the table job decides across seeds
