"""A verdict row in words: :class:`Verdict` (one ablated induction circuit at one revision), its effect
with the interval (:func:`effect_text`), and the verdict's word and reasons (:func:`verdict_of`); part of
the run's answers (:mod:`headtrace.report.answers`)."""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Mapping

from headtrace.causal import verdict as V
from headtrace.core import metrics
from headtrace.report.words import get as _get
from headtrace.report.words import is_nan as _nan
from headtrace.report.words import plural as _plural

DECIDED = ("causal", "partial", "not_causal")  # the test decided (headtrace.causal.verdict)
# a verdict value in words, the same on every page
SAY = {"causal": "causal", "partial": "necessary in part", "not_causal": "not causal", "underpowered": "underpowered",
       "untested": "untested", "no circuit": "no circuit", "not ablated": "not ablated"}


def say(word: str) -> str:
    """A verdict value as the pages print it: ``partial`` -> 'necessary in part', ``not_causal`` -> 'not causal'."""
    return SAY.get(word, word.replace("_", " "))


@dataclass(frozen=True)
class Verdict:
    """One ablated induction circuit at one revision, as its verdict row says."""
    revision: str
    tokens: float | None
    circuit: str
    heads: tuple[str, ...]
    word: str  # causal | partial | not_causal | underpowered | untested | no circuit
    metric: str
    effect: float | None
    effect_lo: float | None
    effect_hi: float | None
    p: float | None
    n_sets: int  # reference sets evaluated: every set (exact) or the M draws (sampled)
    n_space: int | None  # the reference set's size (None: not recorded)
    exact: bool | None  # every set of the reference set evaluated (None: unknown)
    min_p: float | None
    why: str | None  # why the test cannot decide (underpowered) or did not run (untested)
    # why a decided circuit is not causal: the criteria a not_causal one missed, or why a partial one
    # (it beats its controls) is only necessary in part
    why_not: str | None = None
    floor: str | None = None  # why top-1 could not decide (its baseline at the floor) and what did
    upper_share: float | None = None
    saturates: bool | None = None
    share_note: str | None = None  # why upper_share informs nothing here (None: it informs)
    row: Mapping = field(default_factory=dict, compare=False, repr=False)

    @property
    def decided(self) -> bool:
        return self.word in DECIDED and bool(self.heads)

    def control_text(self) -> str:
        """What p is over: 'all 495 sets of its layers (exact)' / '39 draws of the 3,024 sets of its layers
        (sampled)' / '1 draw (the reference set's size not recorded)' / 'no reference set'."""
        n = self.n_sets
        if not n:
            return "no reference set"
        if self.exact:
            return f"all {n:,} sets of its layers (exact)"
        if self.n_space is None:
            return f"{_plural(n, 'draw')} (the reference set's size not recorded)"
        return f"{_plural(n, 'draw')} of the {self.n_space:,} sets of its layers (sampled)"

    def p_text(self) -> str:
        """'p = 1/495 ≤ 0.003' (the smallest p its reference set allows, and its decimal rounded up) /
        'p = 0.400' (rounded up: a printed p is never below the p computed)."""
        if _nan(self.p):
            return "p undefined"
        if self.n_sets and self.min_p is not None and abs(self.p - self.min_p) < 1e-12:
            return f"p = 1/{self.n_sets if self.exact else self.n_sets + 1} ≤ {fmt_p(self.p)}"
        return f"p = {fmt_p(self.p)}"

    def boost_text(self) -> str | None:
        """The behaviour the test removes: 'the earlier B adds 1.20 nats [0.90, 1.50] to the cross-entropy of
        B'; None without a copy-null."""
        row = self.row
        boost = _get(row, "boost")
        if _nan(boost):
            return None
        lo, hi = _get(row, "boost_lo"), _get(row, "boost_hi")
        said = metrics.words(self.metric)
        if metrics.has_floor(self.metric):
            ci = "" if _nan(lo) or _nan(hi) else " [{}, {}]".format(*_outward(lo, hi, 100))
            value = f"{100 * boost:.2f} pp{ci}"
        else:
            ci = "" if _nan(lo) or _nan(hi) else " [{}, {}]".format(*_outward(lo, hi))
            value = f"{abs(boost):.2f}{_unit(self.metric)}{ci}"
            if _direction(self.metric) < 0:  # less is the behaviour (the cross-entropy of B): the boost lowers it
                return (f"in-context boost: the earlier B lowers {said} by {value}"
                        if boost >= 0 else f"in-context boost: the earlier B raises {said} by {value}")
        return f"in-context boost: the earlier B adds {value} to {said}"

    def methods_text(self) -> str | None:
        """Whether zero and mean ablation agree: 'mean ablation: causal too (p = 0.025)'; None without a second method."""
        row = self.row
        other = row.get("second_method")
        if not other:
            return None
        word = say(str(row.get("second_verdict")))
        p = _get(row, "second_p_value")
        ptext = "" if _nan(p) else f", p = {fmt_p(p)}"
        agree = "agrees" if row.get("methods_agree") else "differs"
        return f"{other} ablation {agree}: {word}{ptext}"

    def upper_share_text(self) -> str | None:
        """The circuit's share of the upper bound's effect where it informs ('42% of the upper bound's
        top-1 effect'), else why it is not shown; None without an upper bound that does damage."""
        if _nan(self.upper_share):
            return None
        if self.share_note:  # the note says why no share is shown
            return self.share_note
        out = f"{100 * self.upper_share:.0f}% of the upper bound's {metrics.bare_words(self.metric)} effect"
        if self.upper_share > 1:  # a point estimate: whether the circuit alone hurts more is not tested
            out += " (the circuit alone against its layers whole: the difference is not tested)"
        return out


# a metric's words before a noun ('the upper bound's cross-entropy of B effect'): the registry's, kept for importers
METRIC_SAY = metrics.FieldView(lambda m: metrics.bare_words(m.name))


def upper_bound_text(v: Mapping) -> str | None:
    """The upper bound (the circuit's whole layers ablated) on the decision metric, in its units, with
    whether it saturates and the circuit's share where that informs: 'upper bound 1.56% (the whole
    layers take top-1 to its floor; share ... not shown: ...)'; None without an upper bound."""
    if not v.get("upper_bound"):
        return None
    metric = v.get("metric") or "top1"
    value = _get(v, "upper_bound_value", _get(v, "upper_bound_top1") if metric == "top1" else None)
    out = f"upper bound {fmt_metric(metric, value)}"
    said = metrics.bare_words(metric)
    share = verdict_of(v).upper_share_text() if v.get("n_heads") else None
    notes = [f"the circuit: {share}" if share and not v.get("upper_bound_share_note") else share]
    if v.get("upper_bound_saturates") and not v.get("upper_bound_share_note"):  # the note says it otherwise
        notes.insert(0, f"the whole layers take {said} to at most {V.SATURATION_FRACTION:.0%} of its baseline")
    notes = [n for n in notes if n]
    return out + (f" ({'; '.join(notes)})" if notes else "")


def effect_text(v: Verdict | Mapping) -> str:
    """The effect on the decision metric with its bootstrap interval. Top-1/top-5 effects are differences
    of two percentages, so in percentage points, with the relative drop beside them: '40.00 pp [30.00,
    50.00] (80% of the baseline)'; the cross-entropy in nats: '2.92 nats [2.18, 3.70]'. Interval ends are
    rounded outward (the lower down, the upper up)."""
    row = v.row if isinstance(v, Verdict) else v
    if isinstance(v, Verdict):
        metric, x, lo, hi = v.metric, v.effect, v.effect_lo, v.effect_hi
    else:
        metric = v.get("metric") or "top1"
        x, lo, hi = v.get("effect"), v.get("effect_lo"), v.get("effect_hi")
    if not metrics.has_floor(metric) or _nan(x):
        ci = ""
        if not _nan(lo) and not _nan(hi):
            a, b = _outward(lo, hi)
            ci = f" [{a}, {b}]"
        return fmt_metric(metric, x) + ci
    base = _get(row, "baseline_value", _get(row, "baseline_top1"))
    ci = " [{}, {}]".format(*_outward(lo, hi, 100)) if not _nan(lo) and not _nan(hi) else ""
    rel = f" ({x / base:.0%} of the baseline)" if base else ""
    return f"{100 * x:.2f} pp{ci}{rel}"


fmt_p = V.fmt_p  # one p rounded up, as the verdict's own reasons print it


def _outward(lo: float, hi: float, scale: float = 1.0, decimals: int = 2) -> tuple[str, str]:
    """An interval's ends times ``scale``, the lower rounded down and the upper up."""
    s = 10 ** decimals
    return (f"{math.floor(lo * scale * s + 1e-9) / s:.{decimals}f}", f"{math.ceil(hi * scale * s - 1e-9) / s:.{decimals}f}")


def fmt_metric(metric: str, x) -> str:
    """A metric's value as printed: a metric with a floor (top-1) as a percentage, the others (logit and
    cross-entropy) to 2 decimals with their unit (headtrace.core.metrics)."""
    return "nan" if _nan(x) else (f"{x:.2%}" if metrics.has_floor(metric) else f"{x:.2f}" + _unit(metric))


def _unit(metric: str) -> str:
    return metrics.METRICS[metric].unit if metric in metrics.METRICS else ""


def _direction(metric: str) -> float:
    return (metrics.METRICS[metric].direction or 1.0) if metric in metrics.METRICS else 1.0



def verdict_word(v: Mapping | None) -> str:
    if v is None:
        return "not ablated"
    if not v.get("n_heads"):
        return "no circuit"
    return v.get("verdict") or ("causal" if v.get("causal") else "not_causal")


def underpowered_why(v: Mapping) -> str:
    """Why an ``underpowered`` row cannot decide: the verdict's own ``underpowered_reason`` when it
    has one (a control of other per-layer sizes, a full layer, too few sets); else, for older tables,
    the smallest p its sets allow, or no control at all."""
    own = v.get("underpowered_reason")
    if own:
        return str(own)
    n_sets = v.get("n_random") or v.get("n_distinct_draws") or 0
    min_p = v.get("min_p")
    if n_sets and not _nan(min_p):
        return f"the smallest p its reference set allows is {fmt_p(min_p)} > alpha"
    return "no reference set, nothing to compare with"


def _heads(v: Mapping | None) -> tuple[str, ...]:
    h = None if v is None else v.get("heads")
    if h is None:
        return ()
    return tuple(str(x) for x in (h.to_list() if hasattr(h, "to_list") else h))


def verdict_of(v: Mapping) -> Verdict:
    word = verdict_word(v)
    n_space = _get(v, "n_matched_sets")
    exact = v.get("control_exact")
    if n_space is None and exact:  # a table written before null meant 'not recorded'
        exact = None
    return Verdict(
        revision=v["revision"], tokens=_get(v, "tokens"), circuit=str(v.get("circuit") or "circuit"),
        heads=_heads(v), word=word, metric=v.get("metric") or "top1", effect=_get(v, "effect"),
        effect_lo=_get(v, "effect_lo"), effect_hi=_get(v, "effect_hi"), p=_get(v, "p_value"),
        n_sets=int(v.get("n_random") or v.get("n_distinct_draws") or 0), n_space=None if n_space is None else int(n_space),
        exact=None if exact is None else bool(exact), min_p=_get(v, "min_p"),
        why=(underpowered_why(v) if word == "underpowered" else untested_why(v) if word == "untested" else None),
        why_not=(v.get({"not_causal": "not_causal_reason", "partial": "partial_reason"}.get(word, "")) or None),
        floor=v.get("floor_reason"), upper_share=_get(v, "upper_bound_share"), saturates=v.get("upper_bound_saturates"),
        share_note=v.get("upper_bound_share_note") or None, row=dict(v))


def untested_why(v: Mapping) -> str:
    """Why no test ran: the verdict's ``untested_reason`` (no reference set, no behaviour, or top-1 at its floor),
    else, for older tables, its ``floor_reason``."""
    return str(v.get("untested_reason") or v.get("floor_reason") or "no test was run")

