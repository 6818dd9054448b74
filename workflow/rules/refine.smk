# Adaptive refinement: after a model's revisions are screened, checkpoint rounds add revisions from
# the model's candidate pool where F3 milestones are first reached (headtrace.panel.refine); the added
# cells run the same per-cell jobs and join every aggregate (screened_paths in common.smk);
# the input functions are in common.smk.


localrules:
    hub_branches,
    refine,
    onsets,


rule hub_branches:
    """Cache a hub repository's branch list (the refinement pool) once, on the login node, so
    compute nodes stay offline; a model's branch_list (a recorded listing) is used instead if given."""
    conda:
        CONDA_ENV
    input:
        recorded=lambda wc: _refine_spec(wc.model).get("branch_list", []),
    output:
        PATHS["branches"],
    params:
        hf_id=lambda wc: _refine_spec(wc.model)["hf_id"],
    resources:
        mem_mb=500,
        runtime=10,
    log:
        f"{LOGS}/hub_branches/{{model}}.log",
    script:
        f"{SCRIPTS}/hub_branches.py"


checkpoint refine:
    """Refinement round {round}: per milestone the bracket where it is first reached, and the pool
    revisions added inside it (none once the bracket meets target_ratio or the pool is used up)."""
    conda:
        CONDA_ENV
    input:
        screens=refine_round_screens,
        pool=refine_pool_input,
    output:
        PATHS["refine_round"],
    wildcard_constraints:
        model=_alternation(REFINE_MODELS),
        round=r"[1-9][0-9]*",
    params:
        source=lambda wc: _refine_spec(wc.model)["source"],
        local_pool=refine_local_pool,
        token_spec=lambda wc: refine_token_spec(wc.model),
        settings=lambda wc: refine.settings(config, wc.model),
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        f"{LOGS}/refine/{{model}}/round{{round}}.log",
    script:
        f"{SCRIPTS}/refine_round.py"


rule onsets:
    """f3_onsets: each milestone's bracket over all screened revisions, and how refinement ended."""
    conda:
        CONDA_ENV
    input:
        trajectories=expand(PATHS["trajectory"], model=MODELS),
        rounds=[PATHS["refine_round"].format(model=m, round=k) for m in REFINE_MODELS for k in range(1, refine_rounds(m) + 1)],
        onset_bootstrap=PATHS["onset_bootstrap"],
    output:
        PATHS["onsets"],
    params:
        info={
            m: {
                "milestones": refine.settings(config, m)["milestones"],
                "target_ratio": refine.settings(config, m)["target_ratio"],
                "refine": m in REFINE_MODELS,
                "source": panel.model_spec(config, m)["source"],
            }
            for m in MODELS
        },
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        f"{LOGS}/onsets/onsets.log",
    script:
        f"{SCRIPTS}/onsets.py"
