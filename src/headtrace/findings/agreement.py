"""How much two head sets agree beyond what their layers force: the Jaccard index beside an exact
within-layer permutation null (docs/statistics.md, circuit agreement).

Two circuits that each fill most of a small layer must share heads whatever they are: an 11-head and a
10-head circuit in one 12-head layer share at least 9, so their Jaccard is 9/12 = 0.75 or 10/11 = 0.909,
and 0.75 is below what random placement gives on average. The null keeps each set's number of heads in
every layer and places them at random among that layer's heads, independently per layer and per set.
The overlap in layer l is then hypergeometric (a_l of n_l heads marked, b_l drawn), the total overlap
K the sum of the layers' (their exact distribution: a convolution), and the Jaccard K / (|A| + |B| - K)
is increasing in K, so

* ``null_mean`` = E[J] under the null, exactly;
* ``p_value`` = P(J_null >= J_observed) = P(K >= k_observed): one-sided, the chance of agreeing at least
  this much by placement alone;
* ``beyond_chance`` = ``p_value <= ALPHA``; otherwise the agreement is no more than chance, which
  includes a Jaccard the layer sizes force (the null has one value, or the observed one is its least).

Pure functions, no draws. Heads are ``(layer, head)`` pairs or ``LxHy`` names.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl

from headtrace.causal.verdict import ALPHA  # the package's one significance level, fixed before any result
from headtrace.core.heads import as_heads
from headtrace.core.rounding import fmt_p

__all__ = ["ALPHA", "hypergeom_pmf", "overlap_pmf", "jaccard_null", "heads_per_layer", "verdict"]

def hypergeom_pmf(n: int, a: int, b: int) -> np.ndarray:
    """P(overlap = k), k = 0..min(a, b), of a random ``b``-subset of ``n`` items with a fixed ``a``-subset."""
    if not (0 <= a <= n and 0 <= b <= n):
        raise ValueError(f"subsets of {a} and {b} do not fit {n} items")
    total = math.comb(n, b)
    return np.array([math.comb(a, k) * math.comb(n - a, b - k) / total for k in range(min(a, b) + 1)])


def overlap_pmf(sizes: Iterable[tuple[int, int, int]]) -> np.ndarray:
    """P(K = k) of the total overlap K = sum over layers of independent hypergeometric overlaps, one
    ``(n_l, a_l, b_l)`` per layer."""
    pmf = np.ones(1)
    for n, a, b in sizes:
        pmf = np.convolve(pmf, hypergeom_pmf(n, a, b))
    return pmf


def heads_per_layer(traj: pl.DataFrame, model: str | None = None) -> dict[int, int]:
    """``layer -> number of heads`` of a trajectory (one model's, or ``model``'s), at any one revision."""
    t = traj if model is None else traj.filter(pl.col("model") == model)
    if not t.height:
        return {}
    first = t.filter(pl.col("revision") == t["revision"][0])
    return {int(k): int(v) for k, v in Counter(first["layer"].to_list()).items()}


def jaccard_null(a: Iterable, b: Iterable, n_heads: Mapping[int, int] | int) -> dict:
    """The Jaccard of head sets ``a`` and ``b`` beside the within-layer null (module docstring).
    ``n_heads``: heads per layer (one number for every layer, or ``layer -> n``). Returns ``jaccard``,
    ``null_mean``, ``null_min``, ``null_max``, ``p_value`` and ``beyond_chance``; all None when both
    sets are empty (no Jaccard)."""
    sa, sb = set(as_heads(a)), set(as_heads(b))
    out = {"jaccard": None, "null_mean": None, "null_min": None, "null_max": None, "p_value": None,
           "beyond_chance": None}
    if not sa | sb:
        return out
    ca, cb = Counter(l for l, _ in sa), Counter(l for l, _ in sb)
    sizes = []
    for layer in sorted(set(ca) | set(cb)):
        n = n_heads if isinstance(n_heads, int) else n_heads.get(layer)
        if n is None:
            raise ValueError(f"jaccard_null: no head count for layer {layer}")
        sizes.append((int(n), ca[layer], cb[layer]))
    pmf = overlap_pmf(sizes)
    k = np.arange(pmf.size)
    na, nb = len(sa), len(sb)
    j_of_k = k / (na + nb - k)  # the union is never empty here
    possible = pmf > 1e-15
    k_obs = len(sa & sb)
    p = float(pmf[k_obs:].sum())
    out.update(jaccard=k_obs / len(sa | sb), null_mean=float((pmf * j_of_k).sum()),
               null_min=float(j_of_k[possible].min()), null_max=float(j_of_k[possible].max()),
               p_value=min(1.0, p), beyond_chance=bool(p <= ALPHA))
    return out


def verdict(row: Mapping) -> str:
    """'0.75 (chance 0.78; no more than chance, P = 1)' / '0.60 (chance 0.11; beyond chance, P = 0.002)'."""
    if row.get("jaccard") is None:
        return "—"
    if row.get("null_mean") is None:
        return f"{row['jaccard']:.2f}"
    said = "beyond chance" if row["beyond_chance"] else "no more than chance"
    return f"{row['jaccard']:.2f} (chance {row['null_mean']:.2f}; {said}, P = {fmt_p(row['p_value'])})"
