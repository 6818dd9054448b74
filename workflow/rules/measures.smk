# The field's own measures beside the paper's (docs/measures.md): the text probe per model, and the
# measures over training. The per-cell measures.parquet is written by the capture job (cells.smk).

MEASURES_TABLES = ["measures_over_training", "measures_onsets", "measures_comparison", "measures_circuit_copying"]
MEASURES_FIGURES = ["measures_sink", "measures_prefix"]


# The text probe reads a file and a tokenizer, no model: run on the submit host.
localrules:
    text_probe,


rule text_probe:
    """The text probe of one model: the text file(s) tokenised once with its tokenizer."""
    conda:
        CONDA_ENV
    input:
        checkpoint=text_probe_checkpoint,
    output:
        PATHS["text_probe"],
    params:
        text=TEXT_PROBE,
        load=lambda wc: load_params(wc, panel.revisions_of(config, wc.model)[0]),
        revision=lambda wc: panel.revisions_of(config, wc.model)[0],
        tokenizer=lambda wc: panel.text_tokenizer(config, wc.model),
    priority: cell_priority
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/text_probe/{model}.log",
    script:
        f"{SCRIPTS}/text_probe.py"


rule measures_findings:
    """Per model over training: text sink rate, prefix-matching heads, their onsets; the comparison
    with the synthetic first-token fraction and the induction circuit."""
    conda:
        CONDA_ENV
    input:
        measures=lambda wc: [p for m in models_by_source("toy", "hub", "local") for p in screened_paths("measures", m)],
        trajectories=lambda wc: [PATHS["trajectory"].format(model=m) for m in models_by_source("toy", "hub", "local")],
        text_probes=lambda wc: ([PATHS["text_probe"].format(model=m) for m in models_by_source("toy", "hub", "local")]
                                if TEXT_PROBE else []),
    output:
        tables=expand(f"{PATHS['measures_findings']}/{{name}}.parquet", name=MEASURES_TABLES),
    params:
        **panel.measures_settings(config),
        synthetic=models_by_source("toy"),  # trained on a synthetic token stream: never saw text
        class_threshold=config["screen"]["class_threshold"],
        induction_threshold=config["screen"]["induction_threshold"],
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/measures_findings/measures_findings.log",
    script:
        f"{SCRIPTS}/measures_findings.py"


rule measures_figures:
    """The synthetic first-token fraction beside the text sink rate, and the induction circuit beside
    the prefix-matching heads, over training (a panel per model)."""
    conda:
        CONDA_ENV
    input:
        over=f"{PATHS['measures_findings']}/measures_over_training.parquet",
    output:
        sink=report(f"{PATHS['figures']}/measures_sink.png", caption="../report/measures_sink.rst", category="Findings"),
        prefix=report(f"{PATHS['figures']}/measures_prefix.png", caption="../report/measures_prefix.rst",
                      category="Findings"),
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/measures_figures/measures_figures.log",
    script:
        f"{SCRIPTS}/measures_figures.py"
