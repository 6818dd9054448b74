# The per-cell jobs: probe batch, capture pass, participation ratio, screen.


# The probe batch (numpy) and the published-panel import read no model: run on the submit host.
localrules:
    probe,
    import_reference,


rule probe:
    """Build the synthetic induction batch of one model (the same for all its revisions)."""
    conda:
        CONDA_ENV
    output:
        PATHS["probe"],
    params:
        probe=lambda wc: panel.probe_kwargs(panel.probe_settings(config, wc.model)),
    priority: cell_priority
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/probe/{model}.log",
    script:
        f"{SCRIPTS}/probe.py"


rule capture:
    """One forward pass over the probe: per-head outputs at the query and class attention masses."""
    conda:
        CONDA_ENV
    input:
        checkpoint=checkpoint_input,
        probe=PATHS["probe"],
        text_probe=text_probe_input,
    output:
        attention=PATHS["attention"],
        provenance=PATHS["provenance"],  # resolved commit + weight sha256 of the checkpoint it ran
        fingerprint=PATHS["fingerprint"],  # per weight file and per stored tensor (models.fingerprint)
        head_outputs=PATHS["head_outputs"]
        if config["capture"]["keep_head_outputs"]
        else temp(PATHS["head_outputs"]),
        class_masses=PATHS["class_masses"],
        # the field's own measures (repeated-random and text probes), same job: one model load per cell
        **({"measures": PATHS["measures"]} if MEASURES else {}),
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        load=load_params,
        tokens=tokens_param,
        measures=measures_params,
    threads: 1
    priority: cell_priority
    resources:
        mem_mb=32000,
        runtime=120,
    benchmark:
        benchmark_path("capture")
    log:
        log_path("capture"),
    script:
        f"{SCRIPTS}/capture.py"


rule pr:
    """Participation ratio of every head's query outputs across the probe sequences."""
    conda:
        CONDA_ENV
    input:
        head_outputs=PATHS["head_outputs"],
    output:
        pr=PATHS["pr"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        tokens=tokens_param,
        center=config["capture"]["pr_center"],
        n_sequences=config["capture"]["pr_n_sequences"],
    resources:
        mem_mb=4000,
        runtime=20,
    log:
        log_path("pr"),
    script:
        f"{SCRIPTS}/pr.py"


rule screen:
    """Six-class selectivity, classification and induction-circuit membership per head."""
    conda:
        CONDA_ENV
    input:
        attention=PATHS["attention"],
    output:
        screen=PATHS["screen"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        baseline=config["screen"]["baseline"],
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
    priority: cell_priority
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        log_path("screen"),
    script:
        f"{SCRIPTS}/screen.py"


rule bootstrap:
    """Bootstrap over the probe sequences: selectivity CIs and pass probabilities per head, and the
    per-resample counts behind the F3 milestones (headtrace.cell.bootstrap)."""
    conda:
        CONDA_ENV
    input:
        class_masses=PATHS["class_masses"],
    output:
        bootstrap=PATHS["bootstrap"],
        milestones=PATHS["bootstrap_milestones"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        tokens=tokens_param,
        **config["bootstrap"],
        baseline=config["screen"]["baseline"],
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
        previous_token_threshold=config["screen"]["previous_token_threshold"],
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        log_path("bootstrap"),
    script:
        f"{SCRIPTS}/bootstrap.py"


rule positional:
    """Per head, the share of its induction (duplicate-token) mass carried by the probe sequences of
    one A position: a head fixed on one offset passes the screen as an induction head when the
    sampled baseline misses its offset (headtrace.cell.positional)."""
    conda:
        CONDA_ENV
    input:
        class_masses=PATHS["class_masses"],
        probe=PATHS["probe"],
    output:
        PATHS["positional"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        tokens=tokens_param,
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        log_path("positional"),
    script:
        f"{SCRIPTS}/positional.py"


rule import_reference:
    """Published per-revision screen and PR of the paper's panel, in the per-cell schemas."""
    conda:
        CONDA_ENV
    input:
        reference=REFERENCE_DIR,
    output:
        screen=PATHS["screen"],
        pr=PATHS["pr"],
    wildcard_constraints:
        model=REFERENCE_MODELS,
    params:
        published=lambda wc: panel.model_spec(config, wc.model)["published"],
        tokens=tokens_param,
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
    resources:
        mem_mb=1000,
        runtime=10,
    log:
        log_path("import_reference"),
    script:
        f"{SCRIPTS}/import_reference.py"
