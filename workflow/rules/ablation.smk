# Causal verification: group ablation of the cell's circuits against matched-random controls.


rule ablate:
    """Ablate the circuit, matched-random draws, the upper bound, the final revision's circuit and
    the previous-token circuit; one model load, all conditions batched."""
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
        seed=config["ablation"]["seed"],
        final_controls=config["ablation"]["final_controls"],
        induction_threshold=config["screen"]["induction_threshold"],
        previous_token_threshold=config["screen"]["previous_token_threshold"],
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        log_path("ablate"),
    script:
        f"{SCRIPTS}/ablate.py"
