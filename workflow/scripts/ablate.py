# rule ablate: causal group ablation of one cell (all conditions batched in one job).
import torch

from headtrace import ablation, hub, logs, probe, screen, tables

with logs.to_file(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)  # the rule's threads, not every core per job
    p, wc = snakemake.params, snakemake.wildcards
    batch = probe.batch_from_table(tables.read(snakemake.input.probe))
    model, family, device, batch_size = hub.load_for_cell(p.load, wc.model, wc.revision, p.device, p.batch_size,
                                                          seq_len=batch.seq_len)
    conditions = ablation.build_conditions(
        tables.read(snakemake.input.screen),
        final_circuit=screen.circuit_heads(tables.read(snakemake.input.final_screen)),
        n_random=p.n_random,
        seed=p.seed,
        final_controls=p.final_controls,
        exact_max=p.exact_max,
        class_matched=p.class_matched,
        class_threshold=p.class_threshold,
        induction_threshold=p.induction_threshold,
        previous_token_threshold=p.previous_token_threshold,
    )
    results = ablation.run(model, family, batch, conditions, batch_size=batch_size, device=device)
    table = ablation.ablation_table(results, wc.model, wc.revision, p.tokens, n_boot=p.n_bootstrap, seed=p.seed,
                                    level=p.ci_level)
    tables.write(table, snakemake.output.ablation, schema="ablation")
    tables.write(ablation.verdict(table, metric=p.metric, alpha=p.alpha), snakemake.output.verdict, schema="verdict")
