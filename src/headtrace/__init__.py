"""headtrace: when do attention circuits form during pretraining?

The package is laid out by concept, top to bottom (each layer imports only from those below it;
an import-linter contract in pyproject.toml keeps it so):

* ``cli`` and ``api`` (``headtrace.analyze(model)``: the per-cell recipe on a model in memory);
* ``report`` (figures, summary, console) and ``panel`` (the workflow config, refinement, the
  published-panel importer);
* ``experiments`` (paper A's method experiments);
* ``findings`` (cross-revision findings F1-F5 over the per-head trajectory);
* ``causal`` (ablation conditions and controls, the batched ablation engine, verdicts);
* ``cell`` (one model x revision: capture pass, participation ratio, screen, bootstrap);
* ``models`` (family adapters, loading, the toy panel);
* ``probe`` (the synthetic, repeated-random and text probes under the config's names; a probe
  against a model; a probe in words);
* ``core`` (tables and schemas, atomic writes, heads, revision names, the screen's classes) and ``runtime``.

The model is touched only by ``cell.capture`` and ``causal.ablation``, through the family adapters
in ``models.families``.
"""
__version__ = "0.1.0"

__all__ = ["analyze", "load", "CellTables"]


def __getattr__(name):
    if name in ("analyze", "load", "CellTables"):
        # imports torch: only on first use of headtrace.analyze, so that `import headtrace` (the
        # Snakefile reads the config through the package) stays light
        from headtrace import api

        return getattr(api, name)
    raise AttributeError(f"module 'headtrace' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(__all__))
