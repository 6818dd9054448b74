# Cross-revision aggregation: per-model trajectories, panel findings, figures.


# Light aggregates over finished cells: on a cluster they run on the submit host, not as jobs.
localrules:
    trajectory,
    findings,
    onset_bootstrap,
    figures,
    ablation_figure,
    summary_html,


rule trajectory:
    """All revisions x heads of one model: screen joined with PR, ordered by tokens."""
    conda:
        CONDA_ENV
    input:
        # configured + refined revisions (refine.smk's checkpoint rounds)
        screens=lambda wc: screened_paths("screen", wc.model),
        prs=lambda wc: screened_paths("pr", wc.model),
        # the checkpoints the cells ran (capture's provenance.parquet; reference models have none)
        provenance=lambda wc: screened_paths("provenance", wc.model)
        if panel.model_spec(config, wc.model)["source"] in ("toy", "hub", "local")
        else [],
        lineage=lineage_input_if_drop,  # provenance.on_suspect: drop leaves flagged revisions out
    output:
        PATHS["trajectory"],
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/trajectory/{{model}}.log",
    script:
        f"{SCRIPTS}/trajectory.py"


rule findings:
    """Findings F1-F5 and the PR integral over every model of the panel, the seed groups' tables
    over their members' findings, and summary.md."""
    input:
        trajectories=expand(PATHS["trajectory"], model=MODELS),
        onset_bootstrap=PATHS["onset_bootstrap"],
        onsets=PATHS["onsets"],  # f3_onsets (refine.smk): the refinement section of summary.md
        positional=positional_tables,  # the screen check section of summary.md
        experiments=lambda wc: [PATHS["exp_summary"]] if EXPERIMENT_TARGETS else [],
        verdicts=run_model_verdicts,  # the headline section at the top of summary.md
        lineage=lineage_paths,  # checkpoint lineage: the banner, the marks and the section
        cross_seed=list(group_cross_seed_paths().values()),  # the groups' sentences
        measures=measures_tables,  # the text sink rate of the headline (measures.smk)
    output:
        tables=expand(f"{PATHS['findings']}/{{name}}.parquet", name=FINDINGS_TABLES),
        summary=PATHS["summary"],
        lineage_panel=PATHS["lineage_panel"],  # the lineage flags across models, decided once (findings.lineage_panel)
        # the seed groups' tables (headtrace.findings.groups), from the findings above: none without groups
        groups=group_table_paths(),
    params:
        **findings_params(),
        families=model_families(),
        on_suspect=config["provenance"]["on_suspect"],
        groups=GROUPS,
        cross_seed_of=group_cross_seed_paths(),  # group -> its cross-seed table (an input above)
        probes=PROBES_SHOWN,  # model -> its probe in words: stated on the first screen
        notes=MODEL_NOTES,  # model -> the config's note on it: stated on the first screen
    conda:
        CONDA_ENV
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"{LOGS}/findings/findings.log",
    script:
        f"{SCRIPTS}/findings.py"


rule onset_bootstrap:
    """F3: the bootstrap spread of every milestone's onset revision (null for models without
    per-sequence masses, e.g. the published reference panel)."""
    conda:
        CONDA_ENV
    input:
        counts=bootstrap_counts,
        lineage=lambda wc: lineage_paths() if config["provenance"]["on_suspect"] == "drop" else [],
    output:
        PATHS["onset_bootstrap"],
    params:
        models=MODELS,
        interval=config["bootstrap"]["interval"],
        induction_counts=config["findings"]["induction_counts"],
        first_token_fractions=config["findings"]["first_token_fractions"],
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{LOGS}/onset_bootstrap/onset_bootstrap.log",
    script:
        f"{SCRIPTS}/onset_bootstrap.py"


rule figures:
    """The findings figures (and the ablation figure when the panel ran ablations), drawn from the
    findings job's tables."""
    input:
        trajectories=expand(PATHS["trajectory"], model=MODELS),
        onset_bootstrap=PATHS["onset_bootstrap"],
        findings=expand(f"{PATHS['findings']}/{{name}}.parquet", name=FINDINGS_TABLES),
    output:
        **{
            name: report(
                f"{PATHS['figures']}/{name}.png",
                caption=f"../report/{name}.rst",
                category="Findings",
            )
            for name in FIGURES
        },
    params:
        induction_threshold=config["screen"]["induction_threshold"],
    conda:
        CONDA_ENV
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{LOGS}/figures/figures.log",
    script:
        f"{SCRIPTS}/figures.py"


rule ablation_figure:
    """Circuit ablation against the matched-random distribution, per revision."""
    input:
        ablations=run_model_ablations,
        verdicts=run_model_verdicts,
    output:
        report(
            f"{PATHS['figures']}/ablation.png",
            caption="../report/ablation.rst",
            category="Causal verification",
        ),
    conda:
        CONDA_ENV
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{LOGS}/figures/ablation.log",
    script:
        f"{SCRIPTS}/ablation_figure.py"


rule summary_html:
    """results/findings/summary.html: the headline (sentences + one row per model), the figures
    and a section per model, from the findings and verdict tables; and the headline alone, the
    report's first result category ("Answers")."""
    input:
        findings=expand(f"{PATHS['findings']}/{{name}}.parquet", name=FINDINGS_TABLES),
        onsets=PATHS["onsets"],
        verdicts=run_model_verdicts,
        lineage=PATHS["lineage_panel"],  # checkpoint lineage (the findings job's): the banner, the marks, the section
        figures=lambda wc: [p for p in findings_outputs() if p.endswith(".png")],
        groups=group_table_paths(),  # a row per seed group before its members' rows, and its section
        cross_seed=list(group_cross_seed_paths().values()),
        measures=measures_tables,  # the text sink rate of the headline (measures.smk)
        trajectories=expand(PATHS["trajectory"], model=MODELS),  # the first screen's models and baseline lines
    output:
        page=PATHS["summary_html"],
        headline=report(
            f"{PATHS['findings']}/headline.html",
            caption="../report/headline.rst",
            category="Answers",
        ),
        brief=f"{PATHS['findings']}/headline_brief.html",  # the report's front page embeds it (workflow.rst)
    params:
        captions=str(Path(workflow.basedir) / "workflow" / "report"),
        families=model_families(),
        on_suspect=config["provenance"]["on_suspect"],
        cross_seed_of=group_cross_seed_paths(),  # group -> its cross-seed table (an input above)
        probes=PROBES_SHOWN,  # model -> its probe in words: stated on the first screen
        notes=MODEL_NOTES,  # model -> the config's note on it: stated on the first screen
        thresholds={k: findings_params()[k] for k in ("class_threshold", "induction_threshold")},
    conda:
        CONDA_ENV
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{LOGS}/summary_html/summary_html.log",
    script:
        f"{SCRIPTS}/summary_html.py"


localrules:
    panel,


rule panel:
    """RESULTS/panel.json: the models (with their configured revisions) and seed groups of this config,
    which headtrace summary and headtrace compare read, so that no cell of another panel left in the
    same results folder enters this panel's answers (headtrace.core.manifest)."""
    conda:
        CONDA_ENV
    output:
        PATHS["manifest"],
    params:
        **panel_record(),
    resources:
        mem_mb=500,
        runtime=5,
    log:
        f"{LOGS}/panel/panel.log",
    script:
        f"{SCRIPTS}/panel_manifest.py"


onstart:
    # A run that does any job states its panel even where the rule above would not rerun it (a results
    # folder copied or written by another config, whose panel.json Snakemake has no record of); a missing
    # one is the rule's to write.
    if Path(PATHS["manifest"]).exists():
        manifest.write(PATHS["manifest"], **panel_record())
