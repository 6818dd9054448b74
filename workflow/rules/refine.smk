# Adaptive refinement: after a model's revisions are screened, checkpoint rounds add revisions from
# the model's candidate pool where F3 milestones are first reached (headtrace.refine); the added
# cells run the same per-cell jobs and join every aggregate (screened_paths in common.smk).


localrules:
    hub_branches,
    refine,


def _refine_spec(model):
    return panel.model_spec(config, model)


def refine_pool_input(wildcards):
    """What a round needs to know the model's candidate pool (rule inputs, so the pool is ready)."""
    source = _refine_spec(wildcards.model)["source"]
    if source == "toy":
        return PATHS["checkpoints"].format(model=wildcards.model)  # the folders train_toy saved
    if source == "hub":
        return PATHS["branches"].format(model=wildcards.model)  # the cached branch list
    return []


def refine_local_pool(wildcards):
    """local: the checkpoint folders under path, listed when the DAG is built (a param, so a new
    folder reruns the rounds and nothing else); None for other sources."""
    spec = _refine_spec(wildcards.model)
    if spec["source"] != "local" or spec.get("single_checkpoint") or "{revision}" in str(spec["path"]):
        return None
    return revisions.list_checkpoints(spec["path"], spec.get("revisions_glob", "*"))


def refine_round_screens(wildcards):
    """Round k reads the screens of the configured revisions and of those rounds 1..k-1 added."""
    revs = screened_revisions(wildcards.model, upto=int(wildcards.round) - 1)
    return [PATHS["screen"].format(model=wildcards.model, revision=r) for r in revs]


def refine_token_spec(model):
    spec = _refine_spec(model)
    return {k: spec[k] for k in ("tokens", "tokens_from_name", "tokens_per_step") if k in spec}


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
        "logs/hub_branches/{model}.log",
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
        "logs/refine/{model}/round{round}.log",
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
        "logs/onsets/onsets.log",
    script:
        f"{SCRIPTS}/onsets.py"
