"""Bootstrap intervals over probe sequences for the ablation table (``headtrace.causal.ablation``) and the
verdict (``headtrace.causal.verdict``).

The probe sequences are resampled with replacement ``n_boot`` times (1000) from
``numpy.random.default_rng([seed, crc32("bootstrap")])``; every condition of a cell uses the *same*
resamples, so effects, the boost and the shares left are paired. Percentile intervals at ``level``
(0.95), widened to contain the point estimate. Which metrics get which interval is each metric's record
(``headtrace.core.metrics``): ``interval`` (its mean and its effect) and ``fraction`` (the share of the
behaviour left: over the baseline for a metric with a floor, over the in-context boost for a continuous one).
"""
from __future__ import annotations

import math
import zlib
from typing import Mapping, Sequence

import numpy as np

from headtrace.cell.bootstrap import resample_counts
from headtrace.core import metrics as _registry  # (the name `metrics` is a parameter below)
from headtrace.core.metrics import damage, share_left

__all__ = ["bootstrap_intervals", "bootstrap_counts", "percentile_interval", "fraction_interval",
           "boost_share_interval"]


def bootstrap_intervals(per_sequence: Sequence[Mapping[str, np.ndarray]], baseline_index: int = 0, *,
                        n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                        metrics: Sequence[str] | None = None, null_index: int | None = None) -> list[dict[str, float]]:
    """Per condition: ``{m}_lo``/``{m}_hi`` (its mean) and ``{m}_effect_lo``/``{m}_effect_hi``
    (its paired effect against the baseline condition ``baseline_index``) for every metric, and for
    the metrics with a ``fraction`` ``{m}_fraction_lo``/``{m}_fraction_hi``, the share of the behaviour left
    (:func:`share_left`, paired): over the baseline for a metric with a floor (top-1), over the in-context
    boost against the copy-null condition ``null_index`` for the continuous metrics (NaN without it, or
    where no resample has a baseline / a boost). ``metrics``: those with an ``interval`` (the registry's)."""
    if metrics is None:
        metrics = _registry.interval_metrics()
    n = len(per_sequence[baseline_index][metrics[0]])
    w = bootstrap_counts(n, n_boot, seed)
    out = []
    base = {m: np.asarray(per_sequence[baseline_index][m], float) for m in metrics}
    base_boot = {m: (w @ base[m]) / n for m in metrics}
    null = ({m: np.asarray(per_sequence[null_index][m], float) for m in metrics} if null_index is not None else None)
    null_boot = {m: (w @ null[m]) / n for m in metrics} if null is not None else None
    for ps in per_sequence:
        row = {}
        for m in metrics:
            v = np.asarray(ps[m], float)
            if v.shape != (n,):
                raise ValueError(f"per-sequence {m} has shape {v.shape}, expected ({n},)")
            boot = (w @ v) / n
            row[f"{m}_lo"], row[f"{m}_hi"] = percentile_interval(boot, float(v.mean()), level)
            eff = damage(m, base_boot[m], boot)
            row[f"{m}_effect_lo"], row[f"{m}_effect_hi"] = percentile_interval(
                eff, float(damage(m, base[m].mean(), v.mean())), level)
            if _registry.has_floor(m):
                row[f"{m}_fraction_lo"], row[f"{m}_fraction_hi"] = fraction_interval(boot, base_boot[m], v, base[m],
                                                                                     level)
            elif _registry.get(m).fraction:
                row[f"{m}_fraction_lo"], row[f"{m}_fraction_hi"] = (
                    boost_share_interval(m, boot, base_boot[m], null_boot[m], v, base[m], null[m], level)
                    if null is not None else (math.nan, math.nan))
        out.append(row)
    return out


def bootstrap_counts(n: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """``(n_boot, n)`` resampling counts: ``counts @ v / n`` = the mean of per-sequence ``v`` on each resample
    (``bootstrap.resample_counts``, seeded apart from the screen's resamples)."""
    return resample_counts(n, n_boot, [int(seed) & 0xFFFFFFFF, zlib.crc32(b"bootstrap")])


def percentile_interval(samples: np.ndarray, estimate: float, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap ``samples``, widened to contain ``estimate``."""
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(min(lo, estimate)), float(max(hi, estimate))


def fraction_interval(boot: np.ndarray, base_boot: np.ndarray, values: np.ndarray, base_values: np.ndarray,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``boot / base_boot`` (a condition's resampled means over the baseline's, the
    same resamples) over the resamples whose baseline is not 0, widened to contain the point estimate
    ``mean(values) / mean(base_values)``; (NaN, NaN) when no resample has a baseline."""
    ok = base_boot > 0
    if not ok.any():
        return math.nan, math.nan
    ratio = boot[ok] / base_boot[ok]
    estimate = float(values.mean() / base_values.mean()) if base_values.mean() > 0 else float(np.median(ratio))
    return percentile_interval(ratio, estimate, level)


def boost_share_interval(metric: str, boot: np.ndarray, base_boot: np.ndarray, null_boot: np.ndarray,
                         values: np.ndarray, base_values: np.ndarray, null_values: np.ndarray,
                         level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the share of the in-context boost an ablation leaves, ``1 - effect / boost``
    on each resample (the same resamples for the condition, the baseline and the copy-null), over the
    resamples with a positive boost, widened to contain the point estimate; (NaN, NaN) with none or
    without a point estimate (no boost on the whole batch)."""
    boost = damage(metric, base_boot, null_boot)
    ok = boost > 0
    estimate = share_left(metric, float(base_values.mean()), float(values.mean()), float(null_values.mean()))
    if not ok.any() or math.isnan(estimate):
        return math.nan, math.nan
    share = 1.0 - damage(metric, base_boot[ok], boot[ok]) / boost[ok]
    return percentile_interval(share, estimate, level)
