# Causal verification: group ablation of the cell's circuits against matched-random controls.


rule ablate:
    """Ablate the circuit, the final revision's circuit and the previous-token circuit, each against
    its matched controls (exact when the matched space is small) and upper bound; one model load,
    all conditions batched; bootstrap intervals and the three-way verdict."""
    conda:
        CONDA_ENV
    input:
        checkpoint=checkpoint_input,
        probe=PATHS["probe"],
        screen=PATHS["screen"],
        final_screen=final_screen,
    output:
        ablation=PATHS["ablation"],
        verdict=PATHS["verdict"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        load=load_params,
        tokens=tokens_param,
        device=config["capture"]["device"],
        batch_size=config["ablation"]["batch_size"],
        n_random=config["ablation"]["n_random"],
        ablation=config["ablation"],
        screen=config["screen"],
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        log_path("ablate"),
    script:
        f"{SCRIPTS}/ablate.py"


rule import_reference_ablation:
    """The published final-checkpoint ablation of a reference model, in the ablation schema, and
    its verdict (one matched draw: underpowered, the effect shown)."""
    conda:
        CONDA_ENV
    input:
        reference=REFERENCE_DIR,
    output:
        ablation=PATHS["ablation"],
        verdict=PATHS["verdict"],
    wildcard_constraints:
        model=REFERENCE_MODELS,
    params:
        published=lambda wc: panel.model_spec(config, wc.model)["published"],
        final=lambda wc: panel.final_revision(config, wc.model),
        tokens=tokens_param,
        metric=config["ablation"]["metric"],
        alpha=config["ablation"]["alpha"],
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        log_path("import_reference_ablation"),
    script:
        f"{SCRIPTS}/import_reference_ablation.py"
