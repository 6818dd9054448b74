# Paper A's method experiments (headtrace.experiments): seed specificity, data shift,
# composition, specialized fraction / noise floor. Outputs under results/experiments/.
# The seed and data-shift models are ordinary toy models added to config["models"] by
# experiments.expand_models(config) (called in common.smk before MODELS is computed).
from headtrace import experiments  # noqa: E402
from headtrace.causal import verdict as verdict_stats  # noqa: E402

EXP = experiments.settings(config)
SEED_MODELS = experiments.seed_models(config)
SHIFT_PAIR = experiments.shift_pair(config)
SHIFT_MODELS = experiments.shift_models(config)
EXP_RUN_MODELS = models_by_source("toy", "hub", "local")
NF_MODELS = experiments.noise_floor_models(config, EXP_RUN_MODELS)
COMPOSITION_ON = experiments.composition_on(config, ablation_enabled(), EXP_RUN_MODELS)
# What all_targets() adds (common.smk): every experiment output the config asks for.
EXPERIMENT_TARGETS = experiments.targets(config, ablation_enabled(), EXP_RUN_MODELS, PATHS)


# Light tables over finished cells: run on the submit host.
localrules:
    cross_seed_table,
    data_shift,
    composition,
    noise_floor,
    experiments_summary,


rule train_shift:
    """Data shift: continue a toy model's final checkpoint on a second corpus (train.shift_from)."""
    conda:
        CONDA_ENV
    input:
        base=lambda wc: PATHS["checkpoints"].format(model=panel.model_spec(config, wc.model)["train"]["shift_from"]),
    output:
        directory(PATHS["checkpoints"]),
    wildcard_constraints:
        model=_alternation(SHIFT_MODELS),
    params:
        family=lambda wc: panel.model_spec(config, wc.model)["family"],
        train=lambda wc: panel.model_spec(config, wc.model)["train"],
        revisions=lambda wc: panel.revisions_of(config, wc.model),
        base_final=lambda wc: panel.final_revision(config, panel.model_spec(config, wc.model)["train"]["shift_from"]),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    log:
        f"{LOGS}/train_shift/{{model}}.log",
    script:
        f"{SCRIPTS}/exp_train_shift.py"


ruleorder: train_shift > train_toy


rule cross_seed_ablation:
    """In the final model of one seed: ablate every seed's final induction circuit + matched random."""
    conda:
        CONDA_ENV
    input:
        checkpoint=lambda wc: PATHS["checkpoints"].format(model=wc.model),
        probe=PATHS["probe"],
        screens=[PATHS["screen"].format(model=m, revision=panel.final_revision(config, m)) for m in SEED_MODELS],
    output:
        PATHS["exp_cross_seed_model"],
    wildcard_constraints:
        model=_alternation(SEED_MODELS),
    params:
        load=final_load_params,
        revision=lambda wc: panel.final_revision(config, wc.model),
        models=SEED_MODELS,
        seeds={m: experiments.model_seed(config, m) for m in SEED_MODELS},
        n_random=EXP["n_random"],
        # the sequences ablated, chosen as by the ablate rule (ablation.probe: held_out or the screen's batch)
        ablation={k: config["ablation"][k] for k in ("probe", "probe_seed", "n_sequences")},
        probe=lambda wc: panel.probe_settings(config, wc.model),
        exact_max=config["ablation"]["exact_max"],  # the cell verdicts' exact/sampled rule
        seed=EXP["seed"],
    threads: 1
    resources:
        mem_mb=32000,
        runtime=180,
    benchmark:
        f"{RESULTS}/benchmarks/cross_seed_ablation/{{model}}.tsv"
    log:
        f"{LOGS}/cross_seed_ablation/{{model}}.log",
    script:
        f"{SCRIPTS}/exp_cross_seed.py"


rule cross_seed_table:
    """The seed x seed matrix (Parquet) and its heatmap."""
    input:
        expand(PATHS["exp_cross_seed_model"], model=SEED_MODELS),
    output:
        table=PATHS["exp_cross_seed"],
        figure=report(
            PATHS["exp_figure"].format(name="cross_seed"),
            caption="../report/exp_cross_seed.rst",
            category="Method experiments",
        ),
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/experiments/cross_seed.log",
    script:
        f"{SCRIPTS}/exp_cross_seed_table.py"


rule data_shift:
    """Induction circuit, selectivity and PR before vs after the data shift."""
    input:
        base=PATHS["trajectory"].format(model=SHIFT_PAIR[0]) if SHIFT_PAIR else [],
        shifted=PATHS["trajectory"].format(model=SHIFT_PAIR[1]) if SHIFT_PAIR else [],
        # the behaviour beside the heads: each revision's probe top-1 and ablations (none without ablation)
        verdicts=[p for m in SHIFT_PAIR for p in cell_paths("verdict", m)] if SHIFT_PAIR and ablation_enabled() else [],
    output:
        table=PATHS["exp_data_shift"],
        heads=PATHS["exp_data_shift_heads"],
        figure=report(
            PATHS["exp_figure"].format(name="data_shift"),
            caption="../report/exp_data_shift.rst",
            category="Method experiments",
        ),
    params:
        induction_threshold=config["screen"]["induction_threshold"],  # what the selectivity survival is decided at
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/experiments/data_shift.log",
    script:
        f"{SCRIPTS}/exp_data_shift.py"


rule composition:
    """When ablating the previous-token circuit starts to destroy induction, per model."""
    input:
        verdicts=[p for m in EXP_RUN_MODELS for p in cell_paths("verdict", m)] if COMPOSITION_ON else [],
    output:
        table=PATHS["exp_composition"],
        figure=report(
            PATHS["exp_figure"].format(name="composition"),
            caption="../report/exp_composition.rst",
            category="Method experiments",
        ),
    params:
        min_baseline_ratio=EXP["composition"]["min_baseline_ratio"],
        chance={m: verdict_stats.chance_top1(panel.probe_settings(config, m)["token_range"]) for m in EXP_RUN_MODELS},
        alpha=config["ablation"]["alpha"],  # the sign test of the copying null, at the verdicts' level
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/experiments/composition.log",
    script:
        f"{SCRIPTS}/exp_composition.py"


rule shuffled_capture:
    """Capture on the position-shuffled probe (noise-floor null for the content classes)."""
    conda:
        CONDA_ENV
    input:
        checkpoint=checkpoint_input,
        probe=PATHS["probe"],
    output:
        PATHS["exp_shuffled"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        load=load_params,
        tokens=tokens_param,
        shuffle_seed=EXP["noise_floor"]["shuffle_seed"],
        keep_first=lambda wc: bool(panel.probe_settings(config, wc.model)["prepend_bos"]),
    threads: 1
    resources:
        mem_mb=32000,
        runtime=120,
    benchmark:
        benchmark_path("shuffled_capture")
    log:
        f"{LOGS}/shuffled_capture/{{model}}/{{revision}}.log",
    script:
        f"{SCRIPTS}/exp_shuffled_capture.py"


rule noise_floor:
    """Null selectivities (init heads, shuffled probe) -> floors -> heads above the floor per revision."""
    input:
        trajectories=expand(PATHS["trajectory"], model=NF_MODELS),
        shuffled=[
            PATHS["exp_shuffled"].format(model=m, revision=r)
            for m, r in experiments.shuffled_cells(config, EXP_RUN_MODELS)
        ],
    output:
        table=PATHS["exp_noise_floor"],
        floors=PATHS["exp_noise_floor_null"],
        figure=report(
            PATHS["exp_figure"].format(name="noise_floor"),
            caption="../report/exp_noise_floor.rst",
            category="Method experiments",
        ),
    params:
        init_revision=EXP["noise_floor"]["init_revision"],
        quantile=EXP["noise_floor"]["quantile"],
        baseline=config["screen"]["baseline"],
        class_threshold=config["screen"]["class_threshold"],
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/experiments/noise_floor.log",
    script:
        f"{SCRIPTS}/exp_noise_floor.py"


rule experiments_summary:
    """One paragraph per experiment (results/experiments/summary.md; appended to the findings summary)."""
    input:
        cross_seed=PATHS["exp_cross_seed"] if SEED_MODELS else [],
        data_shift=PATHS["exp_data_shift"] if SHIFT_PAIR else [],
        composition=PATHS["exp_composition"] if COMPOSITION_ON else [],
        noise_floor=PATHS["exp_noise_floor"] if NF_MODELS else [],  # its quantile and narrowness recorded in it
    output:
        PATHS["exp_summary"],
    conda:
        CONDA_ENV
    log:
        f"{LOGS}/experiments/summary.log",
    script:
        f"{SCRIPTS}/exp_summary.py"
