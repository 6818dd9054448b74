# Where checkpoints come from: trained here (toy) or fetched from the hub.


rule train_toy:
    """Train one toy model from random init; save a checkpoint at each revision and pool step."""
    conda:
        CONDA_ENV
    output:
        directory(PATHS["checkpoints"]),
    wildcard_constraints:
        model=TOY_MODELS,
    params:
        family=lambda wc: panel.model_spec(config, wc.model)["family"],
        train=lambda wc: panel.model_spec(config, wc.model).get("train", {}),
        # Training is one job per model, so it (alone) takes the model's revision list.
        revisions=lambda wc: panel.revisions_of(config, wc.model),
        # ... and saves a denser pool (toy.pool_steps) in the same directory, for refinement.
        pool=lambda wc: panel.model_spec(config, wc.model).get("pool", 30),
    threads: 1
    # Trainings are the long jobs every cell of their model waits on: start them first (after the
    # jobs of models no job trains, which can start at once: cell_priority), the largest (most
    # training tokens) first, so the cells of models already trained fill the other cores instead
    # of leaving a long training last.
    priority: lambda wc: train_priority(wc.model)
    resources:
        mem_mb=4000,
        runtime=60,
    benchmark:
        "results/benchmarks/train_toy/{model}.tsv"
    log:
        "logs/train_toy/{model}.log",
    script:
        f"{SCRIPTS}/train_toy.py"


localrules:
    fetch,


rule fetch:
    """Download one revision's safetensors, config and tokenizer into the HF cache (login node):
    the branch of that name in hf_id, or the revision's own repository (models.{model}.repos)."""
    conda:
        CONDA_ENV
    output:
        touch(PATHS["fetched"]),
    params:
        # (repository, revision in it) of this cell only: adding a revision changes no other fetch job.
        hf_id=lambda wc: panel.hub_source(config, wc.model, wc.revision)[0],
        hub_revision=lambda wc: panel.hub_source(config, wc.model, wc.revision)[1],
    resources:
        mem_mb=1000,
        runtime=60,
    log:
        log_path("fetch"),
    script:
        f"{SCRIPTS}/fetch.py"
