# Causal verification: group ablation of the cell's circuits against matched-random controls.


# Reads the published files only: run on the submit host.
localrules:
    import_reference_ablation,


rule ablate:
    """Ablate the circuit, the final revision's circuit and the previous-token circuit, each against
    its reference set (every set of its shape in its layers, or uniform draws from it) and upper bound,
    and the copy-null (the behaviour's boost), on a held-out draw of the probe (ablation.probe) or the
    screen's batch; one model load, all conditions batched, zero and/or mean ablation; bootstrap
    intervals and the verdict."""
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
        n_random=lambda wc: ablation_params(wc)["n_random"],
        ablation=ablation_params,
        screen=config["screen"],
        # ablation.probe: held_out redraws from the model's probe settings (per model: a new revision reruns nothing)
        probe=lambda wc: panel.probe_settings(config, wc.model),
    threads: 1
    priority: cell_priority
    resources:
        mem_mb=32000,
        runtime=180,
    benchmark:
        benchmark_path("ablate")
    log:
        log_path("ablate"),
    script:
        f"{SCRIPTS}/ablate.py"


rule import_reference_ablation:
    """The published final-checkpoint ablation of a reference model, in the ablation schema, and
    its verdict (one matched draw: underpowered; none for the induction circuit: untested; the effect shown)."""
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
        ablation=ablation_params,
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        log_path("import_reference_ablation"),
    script:
        f"{SCRIPTS}/import_reference_ablation.py"
