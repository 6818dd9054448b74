# Checkpoint lineage (docs/integrity.md): per model, whether each revision is the checkpoint its name
# says, from the capture jobs' fingerprint tables.


localrules:
    lineage,


def lineage_paths(wildcards=None):
    """Every run model's lineage table (reference models have no fingerprints, so no table)."""
    return [PATHS["lineage"].format(model=m) for m in models_by_source("toy", "hub", "local")]


def lineage_input_if_drop(wildcards):
    """provenance.on_suspect: drop: the model's lineage table, which the trajectory job reads to
    leave the flagged revisions out; nothing otherwise (warn and fail add no edge to the DAG)."""
    if config["provenance"]["on_suspect"] != "drop":
        return []
    if panel.model_spec(config, wildcards.model)["source"] not in ("toy", "hub", "local"):
        return []
    return [PATHS["lineage"].format(model=wildcards.model)]


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
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/lineage/{model}.log",
    script:
        f"{SCRIPTS}/lineage.py"
