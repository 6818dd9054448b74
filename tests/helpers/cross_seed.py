"""Two seeds' cross-seed ablation, one table per model as each cross_seed_ablation job writes it: seed a's
circuit L1H0, seed b's L1H1; ablating a model's own circuit drops top-1 from 0.5 to 0.1, anything else to 0.45
(so the own excess over the reference draws is 0.35 and the foreign one 0)."""
from __future__ import annotations

import polars as pl

from headtrace import experiments as E

CIRCUITS = {"a": [(1, 0)], "b": [(1, 1)]}
SEEDS = {"a": 0, "b": 1}


def per_model() -> dict[str, pl.DataFrame]:
    """model -> its rows (no seed_specificity call yet: that is the cross_seed_table job's, over both)."""
    out = {}
    for m in CIRCUITS:
        conds = E.cross_seed_conditions(CIRCUITS, 2, 2, 0)
        res = [{"name": c.name, "top1": 0.5 if c.name == "baseline" else (0.1 if c.name == f"circuit:{m}" else 0.45)}
               for c in conds]
        out[m] = E.cross_seed_table(res, CIRCUITS, m, SEEDS)
    return out
