"""The batched ablation engine's test setting: tiny random models with boosted weights, a small probe batch,
and the head sets every family is ablated on (tests/causal/test_ablation.py; benchmarks/gpu_check.py runs the
same on a GPU)."""
from __future__ import annotations

import polars as pl
import torch
from tiny import tiny_model

from headtrace.causal import ablation
from headtrace.causal.ablation import Condition
from headtrace.core import tables
from headtrace.probe import synthetic


def small_batch(n=6, seq_len=40, vocab=128):
    return synthetic.make_batch(n_sequences=n, seq_len=seq_len, token_range=(2, vocab), ab_range=(5, 30))


def boosted(family, n_layers=3, seed=0):
    """A tiny random model with larger weights, so ablations move the metrics visibly."""
    model = tiny_model(family, seed=seed, n_layers=n_layers)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(8.0)
    return model


def engine_conditions() -> list[Condition]:
    """Head sets in one layer, several, the first, all of them and none, on the 3 x 4 tiny models
    (benchmarks/gpu_check.py runs the same on CUDA)."""
    return [
        Condition("baseline"),
        Condition("last", 0, ((2, 1),)),
        Condition("mid", 0, ((1, 0), (1, 3))),
        Condition("two_layers", 0, ((0, 2), (2, 0), (2, 3))),
        Condition("first", 1, ((0, 0),)),
        Condition("first", 2, ((0, 1), (1, 1))),
        Condition("all", 0, tuple((l, h) for l in range(3) for h in range(4))),
        Condition("empty", 0, ()),
    ]


def hand_table(rows, n_sequences=128):
    """An ablation table (``tables.SCHEMAS["ablation"]``) from hand-built condition rows, for the verdict's
    tests: each row gives its ``condition`` and the values it sets (``top1``, ``ce``, ``heads``, ``draw``,
    ``method``, ``n_matched_sets``, ``reference_exact``, ``{metric}_effect_lo`` ...); every other value is that
    of one cell, toy-neox at step1000 (tokens 1000), with its metrics at 0 and its intervals, reference-set
    records, method and probe record null. ``n_heads`` follows ``heads``."""
    ci = {c: None for c in tables.SCHEMAS["ablation"] if c.endswith(("_lo", "_hi"))}
    full = [{"model": "toy-neox", "revision": "step1000", "tokens": 1000, "draw": 0, "top1": 0.0, "top5": 0.0,
             "ce": 0.0, "logit_b": 0.0, "top1_control": 0.0, "top1_context": 0.0, "n_sequences": n_sequences,
             "n_matched_sets": None, "reference_exact": None, "method": None, **ci,
             **{c: None for c in ablation.PROBE_RECORD}, **r, "n_heads": len(r.get("heads", [])),
             "heads": r.get("heads", [])} for r in rows]
    return tables.conform(pl.DataFrame(full, schema_overrides={c: pl.Float64 for c in ci} | {
        "n_matched_sets": pl.Int64, "reference_exact": pl.Boolean, "method": pl.String}), "ablation")
