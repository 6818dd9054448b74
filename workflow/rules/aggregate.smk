# Cross-revision aggregation: per-model trajectories, panel findings, figures.


rule trajectory:
    """All revisions x heads of one model: screen joined with PR, ordered by tokens."""
    conda:
        CONDA_ENV
    input:
        screens=lambda wc: cell_paths("screen", wc.model),
        prs=lambda wc: cell_paths("pr", wc.model),
    output:
        PATHS["trajectory"],
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        "logs/trajectory/{model}.log",
    script:
        f"{SCRIPTS}/trajectory.py"
