# Seed groups (config `groups:`): one recipe trained with different seeds, answered as one.
# The group tables are written by the findings job (aggregate.smk: headtrace.findings.groups over
# the members' own findings; nothing is re-run); here, the group cross-seed ablation, which runs
# the seed experiment's scripts (experiments.smk) over the group's members.
# Outputs under results/groups/{group}/.


# A light table over finished ablations: run on the submit host.
localrules:
    group_cross_seed_table,


rule group_cross_seed_ablation:
    """In the final model of one member: ablate every member's final induction circuit + matched
    random (the seed experiment's script, over the group's members)."""
    conda:
        CONDA_ENV
    input:
        checkpoint=lambda wc: checkpoint_input_final(wc.model),
        probe=PATHS["probe"],
        screens=lambda wc: [PATHS["screen"].format(model=m, revision=panel.final_revision(config, m))
                            for m in GROUPS[wc.group]],
    output:
        PATHS["group_cross_seed_model"],
    wildcard_constraints:
        group=_alternation(CROSS_SEED_GROUPS),
    params:
        load=final_load_params,
        revision=lambda wc: panel.final_revision(config, wc.model),
        models=lambda wc: list(GROUPS[wc.group]),
        seeds=lambda wc: GROUPS[wc.group],
        n_random=EXP["n_random"],
        ablation={k: config["ablation"][k] for k in ("probe", "probe_seed", "n_sequences")},
        probe=lambda wc: panel.probe_settings(config, wc.model),
        exact_max=config["ablation"]["exact_max"],
        seed=EXP["seed"],
    threads: 1
    resources:
        mem_mb=32000,
        runtime=180,
    benchmark:
        "results/benchmarks/group_cross_seed_ablation/{group}/{model}.tsv"
    log:
        "logs/group_cross_seed_ablation/{group}/{model}.log",
    script:
        f"{SCRIPTS}/exp_cross_seed.py"


rule group_cross_seed_table:
    """A group's member x member ablation matrix (Parquet) and its heatmap (the seed experiment's script)."""
    input:
        lambda wc: [PATHS["group_cross_seed_model"].format(group=wc.group, model=m) for m in GROUPS[wc.group]],
    output:
        table=PATHS["group_cross_seed"],
        figure=report(
            PATHS["group_figure"].format(group="{group}", name="cross_seed"),
            caption="../report/exp_cross_seed.rst",
            category="Seed groups",
            subcategory="{group}",
        ),
    wildcard_constraints:
        group=_alternation(CROSS_SEED_GROUPS),
    conda:
        CONDA_ENV
    log:
        "logs/groups/{group}/cross_seed.log",
    script:
        f"{SCRIPTS}/exp_cross_seed_table.py"
