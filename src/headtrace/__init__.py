"""headtrace: when do attention circuits form during pretraining?

Pure functions over arrays and tables, one module per concept: probe (the synthetic induction
batch), capture (one forward pass per cell), spectral (participation ratio), screen (six-class
selectivity), ablation (causal group ablation), trajectories (cross-revision findings),
revisions (checkpoint names and tokens), tables (Parquet schemas). The model is touched only by
capture and ablation, through the family adapters in ``families``.
"""
__version__ = "0.1.0"
