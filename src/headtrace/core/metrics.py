"""The metrics of the ablation, one record each: the one place a metric is defined.

Every layer reads :data:`METRICS`: the ablation engine measures each metric with its ``measure``
(``headtrace.causal.ablation``), the cell schemas give it its columns (``headtrace.core.cell_schemas``),
the verdict decides on it and says it in words (``headtrace.causal.verdict``), its bootstrap intervals
follow its interval rule (``headtrace.causal.intervals``) and the pages print it in its unit
(``headtrace.report.verdicts``). Adding a metric is one :class:`Metric` entry here and, where it can
decide, its name in the ``ablation.metric`` (and ``ablation.fallback_metric``) enum of
``config/schema.yaml``; ``tests/test_metrics.py`` checks the two agree.

It lives in ``core`` because the table schemas do, and every layer above may read it. It imports no
torch: a ``measure`` only calls methods of the tensors it is given.

**Effect** (:func:`damage`): how much an ablation hurts, positive = hurts, ``direction x (baseline -
ablated)``: +1 where more is the behaviour (``top1``, ``top5``, ``logit_b``), -1 where less is
(``ce``, the cross-entropy of B, i.e. minus its log-probability).

**The share of the behaviour left** (:func:`share_left`): for a metric with a ``floor`` at 0 (a share of
sequences: top-1, top-5) ``ablated / baseline``; for a continuous metric the share of the in-context
boost left, ``1 - effect / boost``, against the copy-null (the probe with the earlier B replaced).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import numpy as np

__all__ = ["Metric", "Query", "METRICS", "get", "names", "decision_metrics", "fallback_metrics",
           "interval_metrics", "fraction_metrics", "has_floor", "words", "bare_words", "FieldView", "damage",
           "share_left"]


class Query(NamedTuple):
    """What a ``measure`` reads at the query position (the last one, target B), one row per sequence and
    condition: ``logits`` (rows, vocab) fp32, ``target`` B (rows,), ``control`` the shuffled-B control
    token (rows,; -1: none), ``context`` the row's token ids (rows, T), ``top`` the arg-max token (rows,)
    and ``target_logit`` the logit of B (rows,)."""
    logits: Any
    target: Any
    control: Any
    context: Any
    top: Any
    target_logit: Any


@dataclass(frozen=True)
class Metric:
    """One metric of the ablation: how it is measured, how an ablation's effect on it is signed, whether
    it can decide a verdict, how its intervals are taken and how it is said."""
    name: str  # the ablation table's column
    measure: Callable[[Query], Any]  # per-row value of a Query (a tensor; the engine keeps it as float64)
    words: str  # in a sentence: 'the cross-entropy of B' (bare_words: without its article)
    direction: float | None = None  # effect = direction x (baseline - ablated); None: measured, no effect
    floor: bool = False  # a share of sequences with a floor at 0: the floor rule (min_baseline_hits) applies,
    #                      the share left is ablated / baseline, the upper bound can saturate, printed as a %
    hit: str = ""  # the floor rule's words for one sequence's hit: 'the unablated model predicts B {hit}'
    unit: str = ""  # after a printed value of a metric without a floor: ' nats'
    decides: bool = False  # may be the verdict's decision metric (ablation.metric)
    fallback: bool = False  # may decide where top-1 is at its floor (ablation.fallback_metric)
    interval: bool = False  # paired bootstrap intervals of its mean and effect ({m}_lo/_hi, {m}_effect_lo/_hi)
    fraction: bool = False  # the halving rule's share left, with its paired interval ({m}_fraction_lo/_hi)


def _top5(q: Query):
    k = min(5, q.logits.shape[1])
    return (q.logits.topk(k, dim=1).indices == q.target[:, None]).any(dim=1)


# The registry, in the ablation table's column order (the decision metrics in the order the config lists them).
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("top1", lambda q: q.top == q.target, "top-1", direction=1.0, floor=True, hit="first",
           decides=True, interval=True, fraction=True),
    Metric("top5", _top5, "top-5", direction=1.0, floor=True, hit="in its top 5"),
    Metric("logit_b", lambda q: q.target_logit, "the logit of B", direction=1.0,
           decides=True, fallback=True, interval=True, fraction=True),
    Metric("ce", lambda q: q.logits.logsumexp(dim=1) - q.target_logit, "the cross-entropy of B", direction=-1.0,
           unit=" nats", decides=True, fallback=True, interval=True, fraction=True),
    # what the top-1 is when it is not B (the composition experiment's copying null): measured, never decides
    Metric("top1_control", lambda q: q.top == q.control, "the share whose top-1 is the control token"),
    Metric("top1_context", lambda q: (q.context == q.top[:, None]).any(dim=1) & (q.top != q.target),
           "the share whose top-1 is another token of its context"),
)}


def get(name: str) -> Metric:
    """The record of ``name``; a ValueError naming the known metrics otherwise."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; one of {sorted(METRICS)}")
    return METRICS[name]


def names(**fields) -> tuple[str, ...]:
    """The metrics whose record has these field values, in registry order: ``names(decides=True)``."""
    return tuple(m.name for m in METRICS.values() if all(getattr(m, k) == v for k, v in fields.items()))


def decision_metrics() -> tuple[str, ...]:
    return names(decides=True)


def fallback_metrics() -> tuple[str, ...]:
    return names(fallback=True)


def interval_metrics() -> tuple[str, ...]:
    return names(interval=True)


def fraction_metrics() -> tuple[str, ...]:
    return names(fraction=True)


def has_floor(name: str) -> bool:
    """A share of sequences with a floor at 0 (top-1, top-5); False for a continuous or unknown metric."""
    return name in METRICS and METRICS[name].floor


def words(name: str) -> str:
    """The metric in a sentence ('the cross-entropy of B'); an unknown name as it is."""
    return METRICS[name].words if name in METRICS else name


def bare_words(name: str) -> str:
    """The metric's words without their article, before a noun ('the upper bound's cross-entropy of B effect')."""
    return words(name).removeprefix("the ")


class FieldView(Mapping):
    """A live ``{name: value}`` view of one field (or function of a record) over the registry, for the
    importers of the dictionaries it replaced (``verdict.DIRECTION``, ``verdict.METRIC_WORDS``)."""

    def __init__(self, field: str | Callable[[Metric], Any], keep: Callable[[Metric], bool] = lambda m: True):
        self._value = field if callable(field) else (lambda m: getattr(m, field))
        self._keep = keep

    def __getitem__(self, name: str):
        if name not in METRICS or not self._keep(METRICS[name]):
            raise KeyError(name)
        return self._value(METRICS[name])

    def __iter__(self) -> Iterator[str]:
        return (m.name for m in METRICS.values() if self._keep(m))

    def __len__(self) -> int:
        return sum(1 for _ in self)


# --------------------------------------------------------------------------------------------
# What a record implies: the effect and the share of the behaviour left


def damage(metric: str, baseline, ablated):
    """Effect of an ablation on ``metric``, positive = the ablation hurts (arrays or scalars)."""
    direction = METRICS[metric].direction if metric in METRICS else None
    if direction is None:
        raise ValueError(f"unknown metric {metric!r}; one of {sorted(names_with_direction())}")
    return direction * (np.asarray(baseline, float) - np.asarray(ablated, float))


def names_with_direction() -> tuple[str, ...]:
    return tuple(m.name for m in METRICS.values() if m.direction is not None)


def share_left(metric: str, baseline: float, ablated: float, null: float = math.nan) -> float:
    """The share of the behaviour an ablation leaves: ``ablated / baseline`` for a metric with a floor
    (top-1/top-5), ``1 - effect / boost`` for a continuous metric (``null``: the metric on the copy-null);
    NaN where undefined (a zero baseline, no boost, no copy-null)."""
    if has_floor(metric):
        return ablated / baseline if baseline > 0 else math.nan
    boost = float(damage(metric, baseline, null)) if not math.isnan(_num(null)) else math.nan
    if not boost > 0:
        return math.nan
    return 1.0 - float(damage(metric, baseline, ablated)) / boost


def _num(v) -> float:
    """None as NaN, else the value as a float."""
    return math.nan if v is None else float(v)
