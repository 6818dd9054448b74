"""Synthetic fingerprint tables for the lineage tests (tests/test_lineage_units.py, tests/test_lineage.py).

The sketch of each matrix is the 64-long vector itself and its norm the vector's norm: a self-consistent
table whose distances and cosines have closed forms, built in microseconds (no model, no file).
"""
from __future__ import annotations

import math

import polars as pl

from headtrace.core import tables


def synthetic(chain: list[list], model: str = "syn") -> pl.DataFrame:
    """Fingerprint rows of revisions step0..stepN: per revision a list of 64-long vectors, one per
    matrix, used as both the sketch and (through its norm) the exact norm (a self-consistent table)."""
    import numpy as np

    rows = []
    for k, mats in enumerate(chain):
        rev = f"step{k}"
        rows.append(dict(model=model, revision=rev, kind="file", name=f"f{k}", file=f"f{k}", format="safetensors",
                         sha256=f"{model}-file{k}", dtype=None, shape=None, numel=None, norm=None, sketch=None))
        for t, v in enumerate(mats):
            rows.append(dict(model=model, revision=rev, kind="tensor", name=f"m{t}", file=f"f{k}", format="safetensors",
                             sha256=f"{model}-{k}-{t}", dtype="F32", shape=[8, 8], numel=64,
                             norm=float(np.linalg.norm(v)),
                             sketch=[float(x) for x in v]))
    return tables.conform(pl.DataFrame(rows), "fingerprint")


def drift(n_steps: int, keep: float, seed: int, start=None) -> list[list]:
    """A chain of 40 matrices, each step keeping ``keep`` of the previous direction plus fresh noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cur = [rng.normal(size=64) for _ in range(40)] if start is None else start
    out = [cur]
    for _ in range(n_steps):
        cur = [keep * v + math.sqrt(1 - keep ** 2) * rng.normal(size=64) for v in cur]
        out.append(cur)
    return out

