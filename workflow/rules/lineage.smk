# Checkpoint lineage (docs/integrity.md): per model, whether each revision is the checkpoint its name
# says, from the capture jobs' fingerprint tables.


localrules:
    lineage,


rule lineage:
    """One model's lineage: shared files, shards and matrices between its revisions, distances from
    its earliest and previous revision, and the flags duplicate_of, shares_shard_with,
    not_descended_from_init, discontinuous (headtrace.findings.lineage)."""
    conda:
        CONDA_ENV
    input:
        # every screened revision's (configured + refined): input functions resolve the rounds
        fingerprints=lambda wc: screened_paths("fingerprint", wc.model),
        provenance=lambda wc: screened_paths("provenance", wc.model),  # tokens of each cell
    output:
        PATHS["lineage"],
    wildcard_constraints:
        model=RUN_MODELS,
    params:
        on_suspect=config["provenance"]["on_suspect"],
        # the model whose last checkpoint this run declares it starts from (a data-shift run), or ""
        # a data-shift run continues its base's final checkpoint (train.shift_from): the first screen counts it once
        continues=lambda wc: (panel.model_spec(config, wc.model).get("train") or {}).get("shift_from") or "",
        # whether the run has a step 0 to add (toy: yes; a single checkpoint: no; else not known): the
        # reference warning advises adding step 0 only to a run that has one
        init_published=lambda wc: panel.init_published(config, wc.model),
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{LOGS}/lineage/{{model}}.log",
    script:
        f"{SCRIPTS}/lineage.py"
