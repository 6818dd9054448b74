"""headtrace: when do attention circuits form during pretraining?

Pure functions over arrays and tables, one module per concept: probe (the synthetic induction
batch), capture (one forward pass per cell), spectral (participation ratio), screen (six-class
selectivity), ablation (the causal group-ablation engine), conditions (the circuits and their
matched controls), verdict (verdict statistics), trajectories (cross-revision findings),
revisions (checkpoint names and tokens), tables (Parquet schemas). The model is touched only by
capture and ablation, through the family adapters in ``families``. ``headtrace.analyze(model)``
(module ``api``) runs the whole per-cell recipe on a model already loaded in a notebook.
"""
__version__ = "0.1.0"

__all__ = ["analyze", "CellTables"]


def __getattr__(name):
    # ``headtrace.analyze`` without importing torch for every ``import headtrace`` (the Snakefile
    # imports the package to read the config).
    if name in ("analyze", "CellTables"):
        from headtrace import api

        return getattr(api, name)
    raise AttributeError(f"module 'headtrace' has no attribute '{name}'")
