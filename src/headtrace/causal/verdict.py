"""Verdict statistics: does ablating a circuit remove the behaviour, more than sets of its layers do?
(paper A step 3).

Pure functions over the ``ablation`` table (one row per condition, ``headtrace.causal.conditions``) and
over per-sequence metric arrays. docs/statistics.md#the-causal-verdict says what each part can claim.

**Effect** on a metric (``damage``): how much an ablation hurts, positive = hurts:
``baseline - ablated`` for ``top1``, ``top5`` and ``logit_b``; ``ablated - baseline`` for ``ce``
(the cross-entropy of B, i.e. minus its log-probability): each metric's ``direction`` in its record
(``headtrace.core.metrics``, the one place a metric is defined). The decision metric is ``metric``
(``top1`` by default; a metric whose record ``decides``), or the ``fallback_metric`` where top-1 is at
its floor (below).

**The behaviour first** (``boost``): the unablated model on the probe against the same sequences with
the earlier B replaced by another token of the probe's range (the ``copy_null`` condition,
``headtrace.probe.synthetic.copy_null_tokens``). ``boost = damage(metric, baseline, copy_null)`` is what the
earlier A -> B adds, with its paired bootstrap interval (``boost_lo``/``boost_hi``). A boost whose
interval does not lie above 0 makes every circuit of the cell ``untested``: the model shows no
induction on this probe, so an ablation could not tell removing it from any other damage.

**The reference set and p** (``reference_p``): the circuit's effect is ranked among the effects of
every head set of its shape in its layers (``headtrace.causal.conditions``: the same number of heads in
each of its layers, from all heads there, the circuit one of them). Exact (every set evaluated):
``p = #{sets with effect >= the circuit's} / N``, the circuit counted; sampled (M uniform draws with
replacement): ``p = (1 + #{draws with effect >= the circuit's}) / (M + 1)`` (Phipson & Smyth 2010). The
smallest p possible is ``1/N`` or ``1/(M+1)`` (``min_p``); where it exceeds ``alpha`` the test cannot
decide: ``underpowered``.

**The verdict** (``verdict`` column; ``causal`` is ``verdict == "causal"``). A circuit *beats its
reference set* when its effect is shown (``effect > 0`` and the lower end of its bootstrap interval
above 0, where the table has one) and ``p <= alpha``. The *halving rule*, stated before any model was
ablated under it, asks whether the behaviour is at least halved, on the interval (``half_baseline``):
for top-1/top-5 (a floor at 0) the share left is ``ablated / baseline``; for ``ce`` and ``logit_b`` it is
the share of the in-context boost left, ``1 - effect / boost`` (needs the copy-null). ``at_most_half``
when the paired interval of that share ends at or below ``max_ablated_fraction`` (0.5), ``above_half``
when it starts above, ``straddles_half`` otherwise; without an interval the point decides.

- ``causal``: a non-empty circuit that beats its reference set and is ``at_most_half``.
- ``partial`` (said "necessary in part"): beats its reference set, the halving rule not met or
  not applicable (no copy-null for a continuous metric); ``partial_reason`` says which.
- ``not_causal``: a circuit that does not beat its reference set (and an empty circuit: nothing was
  ablated); ``not_causal_reason`` names the criteria missed, with numbers.
- ``underpowered``: the reference set cannot reach ``p <= alpha`` whatever the effect, or its sets do
  not have the circuit's per-layer sizes (another circuit's); ``underpowered_reason`` says which.
- ``untested``: no test ran (``untested_reason``): no reference set was ablated (the published
  induction circuits), the model shows no behaviour on the probe (the boost), or top-1 is at its floor
  and no fallback metric is set.

**The floor rule** (fixed before any model was ablated under it): when the decision metric is top-1
(or top-5) and fewer than ``min_baseline_hits`` (10) of the ablated sequences have B first, the cell is
decided on ``fallback_metric`` (``ce`` by default; null: ``untested``): with so few hits, half the
baseline is under 5 sequences and one or two sequences would decide the halving rule. ``floor_reason``
says so with the count.

**Two ablation methods** (``method``): ``zero`` (the paper's: a head's output set to 0) and ``mean``
(set to its mean over the probe's positions and sequences). The table may hold both (``ablation.
second_method``); the verdict is the primary method's, and ``second_*`` / ``methods_agree`` report the
other's verdict beside it.

**Exact or sampled**: ``control_exact`` is true when every set of the reference set was evaluated;
only then may a report say "all N sets". The published ablations record neither the space nor how
its sets were drawn: their sets count as draws (``n_matched_sets`` and ``control_exact`` null).

``random_effect_mean`` = the mean effect over the reference draws, ``excess_effect = effect -
random_effect_mean`` (the metric's units), ``effect_vs_random = effect / random_effect_mean`` where that
mean is positive (null elsewhere: a ratio to a non-positive mean says nothing).

**Upper bound** (the circuit's whole layers ablated), on the decision metric: ``upper_bound_value``,
``upper_bound_effect``, ``upper_bound_share = effect / upper_bound_effect`` and, for top-1/top-5,
``upper_bound_saturates`` (at most ``saturation_fraction`` (0.1) of the baseline). Reported, never
required; ``upper_bound_share_note`` says where the share informs nothing.

**Intervals** (``headtrace.causal.intervals``, re-exported here): paired bootstrap intervals over the
probe sequences, the same resamples for every condition of a cell, so effects, the boost and the shares
left are paired.

**Composition** (``induction_present`` / ``destroys_induction``): induction is present when the
baseline top-1 is at least ``min_baseline_ratio x chance``, chance = 1 / (number of distinct probe
tokens); the previous-token circuit destroys it when induction is present and that circuit's verdict
is ``causal``. The composition experiment (``headtrace.experiments.composition``) adds a measured
copying null on top of this rule.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import polars as pl

from headtrace.causal.conditions import CIRCUITS, size_profile
from headtrace.causal.intervals import (boost_share_interval, bootstrap_counts,  # noqa: F401 (re-exported)
                                        bootstrap_intervals, fraction_interval, percentile_interval)
from headtrace.core import metrics, rounding, schema, tables
from headtrace.core.metrics import damage, share_left  # noqa: F401 (re-exported: the verdict's effect and share left)

VERDICTS = ("causal", "partial", "not_causal", "underpowered", "untested")
ALPHA = 0.05  # the package's one significance level (fixed before any result): the verdict's default
#              ablation.alpha, and the level of the agreement beyond chance (headtrace.findings.agreement)
MAX_ABLATED_FRACTION = 0.5
SATURATION_FRACTION = 0.1  # the upper bound saturates: the decision metric at most this share of its baseline
SHARE_SHOWN = 5.0  # a share of the behaviour left beyond ±500% is said as such, not printed (a boost near 0)
MIN_BASELINE_HITS = 10
FALLBACK_METRIC = "ce"
METHODS = ("zero", "mean")
COPY_NULL = "copy_null"  # the ablation table's condition of the unablated model on the copy-null batch
CONTROL_CRITERIA = ("effect", "p")  # what beating the reference set takes
# live views of the metric registry (headtrace.core.metrics), kept for their importers
DIRECTION = metrics.FieldView("direction", keep=lambda m: m.direction is not None)  # effect = DIRECTION x (b - a)
METRIC_WORDS = metrics.FieldView("words", keep=lambda m: m.direction is not None)


def verdict(ablation_df: pl.DataFrame, *, metric: str = "top1", method: str = "zero", alpha: float = ALPHA,
            max_ablated_fraction: float = MAX_ABLATED_FRACTION, saturation_fraction: float = SATURATION_FRACTION,
            min_baseline_hits: int = MIN_BASELINE_HITS, fallback_metric: str | None = FALLBACK_METRIC) -> pl.DataFrame:
    """The ``verdict`` table (tables.SCHEMAS): one row per circuit present in each cell, decided on the
    rows of ablation ``method`` (rows without a method count as it); where the table holds a second
    method, its verdict is reported beside (``second_*``, ``methods_agree``)."""
    if metric not in metrics.decision_metrics():
        raise ValueError(f"ablation.metric must be one of {metrics.decision_metrics()}, got {metric!r}")
    if fallback_metric is not None and fallback_metric not in metrics.fallback_metrics():
        raise ValueError(f"ablation.fallback_metric must be {', '.join(sorted(metrics.fallback_metrics()))} or null, "
                         f"got {fallback_metric!r}")
    if method not in METHODS:
        raise ValueError(f"ablation.method must be one of {METHODS}, got {method!r}")
    opts = dict(metric=metric, alpha=alpha, max_ablated_fraction=max_ablated_fraction,
                saturation_fraction=saturation_fraction, min_baseline_hits=min_baseline_hits,
                fallback_metric=fallback_metric)
    df = ablation_df
    if "method" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.String).alias("method"))
    df = df.with_columns(pl.col("method").fill_null(method))
    rows = []
    for key, cell in df.group_by(["model", "revision", "tokens"], maintain_order=True):
        present = list(dict.fromkeys(cell["method"].to_list()))
        if method not in present:
            raise ValueError(f"cell {key}: the ablation table holds method(s) {present}, not ablation.method {method!r}")
        own = _cell_rows(key, cell.filter(pl.col("method") == method), method=method, **opts)
        other = next((m for m in present if m != method), None)
        second = ({r["circuit"]: r for r in _cell_rows(key, cell.filter(pl.col("method") == other), method=other,
                                                       **opts)} if other else {})
        for r in own:
            s = second.get(r["circuit"])
            r.update(second_method=other if s else None, second_verdict=s["verdict"] if s else None,
                     second_p_value=s["p_value"] if s else None, second_effect=s["effect"] if s else None,
                     second_effect_lo=s["effect_lo"] if s else None, second_effect_hi=s["effect_hi"] if s else None,
                     methods_agree=(s["verdict"] == r["verdict"]) if s else None)
        rows += own
    schema = tables.SCHEMAS["verdict"]
    if not rows:
        return pl.DataFrame(schema=schema)
    return tables.conform(pl.DataFrame(rows, schema=schema), "verdict")


def settings(ablation: Mapping | None) -> dict:
    """The keyword arguments of :func:`verdict` from an ablation config block (the schema's defaults for
    the keys it omits): one place for the ablate job, the notebook API and the published importer."""
    a = {**schema.defaults("ablation"), **dict(ablation or {})}
    return {k: a[k] for k in ("metric", "method", "alpha", "min_baseline_hits", "fallback_metric")}


def decide(*, n_heads: int, effect: float, baseline: float, ablated: float, p_value: float, min_p_value: float,
           metric: str = "top1", alpha: float = ALPHA, max_ablated_fraction: float = MAX_ABLATED_FRACTION,
           fraction: float = math.nan, fraction_lo: float = math.nan, fraction_hi: float = math.nan,
           effect_lo: float = math.nan) -> str:
    """The verdict (module docstring) of a circuit with a reference set and a shown behaviour:
    ``not_causal`` for an empty circuit, ``underpowered`` when ``min_p_value > alpha``, else
    ``not_causal`` (does not beat its reference set), ``partial`` or ``causal`` (the halving rule)."""
    if n_heads == 0:
        return "not_causal"
    if math.isnan(_num(min_p_value)) or min_p_value > alpha:
        return "underpowered"
    missed = missed_criteria(effect=effect, baseline=baseline, ablated=ablated, p_value=p_value, metric=metric,
                             alpha=alpha, max_ablated_fraction=max_ablated_fraction, fraction=fraction,
                             fraction_lo=fraction_lo, fraction_hi=fraction_hi, effect_lo=effect_lo)
    if any(m in CONTROL_CRITERIA for m in missed):
        return "not_causal"
    return "partial" if missed else "causal"


def missed_criteria(*, effect: float, baseline: float, ablated: float, p_value: float, metric: str = "top1",
                    alpha: float = ALPHA, max_ablated_fraction: float = MAX_ABLATED_FRACTION,
                    fraction: float = math.nan, fraction_lo: float = math.nan, fraction_hi: float = math.nan,
                    effect_lo: float = math.nan) -> tuple[str, ...]:
    """The criteria of ``causal`` a circuit with a usable reference set misses (empty: causal), in order:
    ``"effect"`` (no positive effect, or its interval reaches 0), ``"ablated"`` (the halving rule,
    :func:`half_baseline`, not ``at_most_half``, or not applicable), ``"p"`` (``p_value > alpha`` or
    undefined). A NaN fails the criterion it enters. A circuit that misses only ``"ablated"`` is ``partial``."""
    out = []
    if not effect > 0 or not (math.isnan(_num(effect_lo)) or effect_lo > 0):
        out.append("effect")
    if half_baseline(metric, baseline, ablated, fraction_lo, fraction_hi, max_ablated_fraction,
                     fraction=fraction) != "at_most_half":
        out.append("ablated")
    if math.isnan(_num(p_value)) or not p_value <= alpha:
        out.append("p")
    return tuple(out)


def half_baseline(metric: str, baseline: float, ablated: float, fraction_lo: float = math.nan,
                  fraction_hi: float = math.nan, max_ablated_fraction: float = MAX_ABLATED_FRACTION, *,
                  fraction: float = math.nan) -> str | None:
    """The halving rule: ``at_most_half`` (the interval of the share left ends at or below
    ``max_ablated_fraction``), ``above_half`` (it starts above), ``straddles_half``; without an interval
    the point share decides. The share left is ``ablated / baseline`` for top-1/top-5 (``fraction`` NaN:
    computed here) and the share of the in-context boost left for ``ce``/``logit_b`` (``fraction``, from
    :func:`share_left`); None where there is none (a continuous metric without a copy-null)."""
    if metrics.has_floor(metric) and math.isnan(_num(fraction)):
        fraction = ablated / baseline if baseline > 0 else math.nan
    if math.isnan(_num(fraction)):
        return None
    if math.isnan(_num(fraction_lo)) or math.isnan(_num(fraction_hi)):
        return "at_most_half" if fraction <= max_ablated_fraction else "above_half"
    if fraction_hi <= max_ablated_fraction:
        return "at_most_half"
    return "above_half" if fraction_lo > max_ablated_fraction else "straddles_half"


def reference_p(effect: float, set_effects: Sequence[float], exact: bool) -> float:
    """The circuit's p among its reference set (module docstring): exact, ``#{e >= effect} / N`` over all
    N sets (the circuit among them); sampled, ``(1 + #{e >= effect}) / (M + 1)`` over M draws."""
    e = np.asarray(set_effects, float)
    if not e.size:
        return math.nan
    b = int((e >= effect).sum())
    return b / e.size if exact else (1 + b) / (1 + e.size)


def min_p(n: int, exact: bool = False) -> float:
    """Smallest p a reference set allows: ``1/N`` over all N sets (exact), ``1/(M+1)`` over M draws."""
    if n < 1:
        return math.nan
    return 1.0 / n if exact else 1.0 / (1 + n)


def at_floor(metric: str, baseline: float, n_sequences: int | None,
             min_baseline_hits: int = MIN_BASELINE_HITS) -> bool:
    """A top-1/top-5 baseline hit by fewer than ``min_baseline_hits`` of ``n_sequences`` sequences
    (the floor rule); never for ``ce``/``logit_b`` or an unknown count."""
    if not metrics.has_floor(metric) or not n_sequences:
        return False
    return round(baseline * n_sequences) < min_baseline_hits


# --------------------------------------------------------------------------------------------
# One cell's rows


def _cell_rows(key, cell: pl.DataFrame, *, method: str, metric: str, alpha: float, max_ablated_fraction: float,
               saturation_fraction: float, min_baseline_hits: int, fallback_metric: str | None) -> list[dict]:
    """The verdict rows of one cell's conditions of one ablation method."""
    conds = set(cell["condition"].to_list())
    base = cell.filter(pl.col("condition") == "baseline")
    if base.height != 1:
        raise ValueError(f"cell {key}: expected one baseline row, found {base.height}")
    n_seq = int(base["n_sequences"][0]) if "n_sequences" in base.columns and base["n_sequences"][0] else None
    requested = metric
    floor = (floor_reason(requested, float(base[requested][0]), n_seq, min_baseline_hits, fallback_metric)
             if at_floor(requested, float(base[requested][0]), n_seq, min_baseline_hits) else None)
    metric = fallback_metric if floor and fallback_metric else requested
    b_top1, b = float(base["top1"][0]), float(base[metric][0])
    b_copy = {c: None if c not in base.columns or base[c][0] is None else float(base[c][0])
              for c in ("top1_control", "top1_context")}
    null = cell.filter(pl.col("condition") == COPY_NULL)
    nrow = null.row(0, named=True) if null.height else None
    boost = Boost.of(metric, b, nrow)
    rows = []
    for circuit_name, spec in CIRCUITS.items():
        if spec.condition not in conds:
            continue
        crow = cell.filter(pl.col("condition") == spec.condition).row(0, named=True)
        rname = next((r for r in (spec.random, spec.fallback_random) if r and r in conds), None)
        uname = next((u for u in (spec.upper, spec.fallback_upper) if u and u in conds), None)
        cname = spec.class_random if spec.class_random in conds else None
        urow = cell.filter(pl.col("condition") == uname).row(0, named=True) if uname else None
        a, n_heads = float(crow[metric]), int(crow["n_heads"])
        effect = float(damage(metric, b, a))
        ref = _reference(cell, rname, metric, b, effect, n_heads)
        cls = _reference(cell, cname, metric, b, effect, n_heads)
        heads = list(crow["heads"] or [])
        fraction = share_left(metric, b, a, boost.null)
        f_lo, f_hi = _num(crow.get(f"{metric}_fraction_lo")), _num(crow.get(f"{metric}_fraction_hi"))
        if math.isnan(fraction):
            f_lo = f_hi = math.nan
        half = half_baseline(metric, b, a, f_lo, f_hi, max_ablated_fraction, fraction=fraction) if n_heads else None
        effect_lo = _num(crow.get(f"{metric}_effect_lo"))
        crit = dict(effect=effect, baseline=b, ablated=a, p_value=ref.p, metric=metric, alpha=alpha,
                    max_ablated_fraction=max_ablated_fraction, fraction=fraction, fraction_lo=f_lo,
                    fraction_hi=f_hi, effect_lo=effect_lo)
        mismatch = reference_mismatch(cell, rname, heads) if n_heads else None
        v = decide(n_heads=n_heads, min_p_value=ref.min_p, **crit)
        untested = None
        if n_heads:
            if rname is None:
                untested = ("no reference set was ablated, so nothing says whether other heads of its layers "
                            "would do as much")
            elif floor and not fallback_metric:
                untested = floor
            elif boost.shown is False:
                untested = boost.reason()
        if untested:
            v = "untested"
        elif mismatch:
            v = "underpowered"
        reason = not_reason = part = None
        if v == "underpowered":
            reason = mismatch or (f"its reference set allows p >= {ref.min_p_text()} > alpha = {alpha:g} "
                                  f"({ref.over()})")
        elif v == "not_causal" and n_heads:
            not_reason = not_causal_reason(missed_criteria(**crit), **crit)
        elif v == "partial":
            part = partial_reason(half, metric=metric, baseline=b, ablated=a, fraction=fraction, fraction_lo=f_lo,
                                  fraction_hi=f_hi, max_ablated_fraction=max_ablated_fraction)
        ub_value = float(urow[metric]) if urow else math.nan
        ub_effect = float(damage(metric, b, ub_value)) if urow else math.nan
        saturates = _saturates(metric, b, ub_value if urow else b, saturation_fraction)
        share = effect / ub_effect if urow and n_heads and ub_effect > 0 else None
        note = (share_note(n_heads=n_heads, n_upper_heads=int(urow["n_heads"]), saturates=saturates,
                           metric=metric, saturation_fraction=saturation_fraction)
                if share is not None else None)
        rows.append({
            "model": key[0], "revision": key[1], "tokens": key[2], "circuit": circuit_name,
            "n_heads": n_heads, "heads": list(crow["heads"]), "baseline_top1": b_top1,
            "ablated_top1": float(crow["top1"]), "effect": effect, "random_effect_mean": ref.mean,
            "effect_vs_random": effect / ref.mean if ref.mean > 0 else None,
            "excess_effect": effect - ref.mean if not math.isnan(ref.mean) else None,
            "p_value": ref.p if n_heads else math.nan, "upper_bound_top1": float(urow["top1"]) if urow else b_top1,
            "upper_bound_saturates": saturates, "causal": v == "causal", "verdict": v, "metric": metric,
            "method": method, "alpha": alpha, "baseline_value": b, "ablated_value": a,
            "effect_lo": effect_lo, "effect_hi": _num(crow.get(f"{metric}_effect_hi")),
            "min_p": ref.min_p, "n_matched_sets": ref.space,
            "control_exact": ref.exact if ref.n and ref.space is not None else None,
            "control": rname, "upper_bound": uname, "n_random": ref.n, "n_distinct_draws": ref.n_distinct,
            "random_top1_mean": ref.top1_mean,
            "class_control": cname, "class_p_value": cls.p if n_heads else math.nan,
            "class_random_effect_mean": cls.mean, "n_class_matched_sets": cls.space,
            "underpowered_reason": reason, "not_causal_reason": not_reason,
            "control_sizes_match": None if not n_heads or not ref.n else not mismatch,
            "n_sequences": n_seq, "baseline_top1_control": b_copy["top1_control"],
            "baseline_top1_context": b_copy["top1_context"],
            "upper_bound_value": ub_value, "upper_bound_effect": ub_effect, "upper_bound_share": share,
            "floor_reason": floor,
            "null_value": boost.null, "boost": boost.value, "boost_lo": boost.lo, "boost_hi": boost.hi,
            "shows_behaviour": boost.shown,
            "ablated_fraction": None if math.isnan(fraction) else fraction,
            "ablated_fraction_lo": None if math.isnan(f_lo) else f_lo,
            "ablated_fraction_hi": None if math.isnan(f_hi) else f_hi,
            "half_baseline": half, "partial_reason": part, "untested_reason": untested if v == "untested" else None,
            "upper_bound_share_note": note,
        })
    return rows


class Boost:
    """The in-context boost of one cell on the decision metric: what the earlier A -> B adds, the
    unablated model on the probe against the copy-null (module docstring)."""

    def __init__(self, metric: str, null: float, value: float, lo: float, hi: float):
        self.metric, self.null, self.value, self.lo, self.hi = metric, null, value, lo, hi

    @classmethod
    def of(cls, metric: str, baseline: float, null_row: Mapping | None) -> "Boost":
        if null_row is None or null_row.get(metric) is None:
            return cls(metric, math.nan, math.nan, math.nan, math.nan)
        null = float(null_row[metric])
        return cls(metric, null, float(damage(metric, baseline, null)), _num(null_row.get(f"{metric}_effect_lo")),
                   _num(null_row.get(f"{metric}_effect_hi")))

    @property
    def shown(self) -> bool | None:
        """The boost lies above 0 (its interval's lower end, or the point without one); None: no copy-null."""
        if math.isnan(self.value):
            return None
        return bool(self.lo > 0) if not math.isnan(self.lo) else bool(self.value > 0)

    def reason(self) -> str:
        said = metrics.words(self.metric)
        ci = "" if math.isnan(self.lo) else f" [{self.lo:.3g}, {self.hi:.3g}]"
        return (f"the model shows no induction on this probe: the earlier B adds {self.value:.3g}{ci} to {said} "
                f"(the probe against the same sequences with B replaced), an interval that does not lie above 0, so "
                f"an ablation could not tell removing induction from other damage")


class _Reference:
    """One reference set's numbers in a cell: mean effect, p, its size and how it was evaluated."""

    def __init__(self, mean=math.nan, p=math.nan, n=0, n_distinct=0, space=None, exact=False, top1_mean=math.nan):
        self.mean, self.p, self.n, self.n_distinct = mean, p, n, n_distinct
        self.space, self.exact, self.top1_mean = space, exact, top1_mean

    @property
    def min_p(self) -> float:
        return min_p(self.n, self.exact)

    def min_p_text(self) -> str:
        return f"1/{self.n}" if self.exact else f"1/{self.n + 1}"

    def over(self) -> str:
        """'all 12 sets of its layers (exact)' / '20 draws from 3,024 sets of its layers (sampled)'."""
        if self.exact:
            return f"all {self.n:,} sets of its layers (exact)"
        space = f"{self.space:,} sets of its layers" if self.space else "a reference set whose size is not recorded"
        return f"{_plural(self.n, 'draw')} from {space} (sampled)"


def _reference(cell: pl.DataFrame, name: str | None, metric: str, b: float, effect: float, n_heads: int) -> _Reference:
    if name is None:
        return _Reference()
    draws = cell.filter((pl.col("condition") == name) & (pl.col("draw") >= 1))
    space = None
    if "n_matched_sets" in cell.columns:
        s = cell.filter(pl.col("condition") == name)["n_matched_sets"].drop_nulls()
        space = int(s[0]) if s.len() else None
    if not draws.height:
        return _Reference(space=space)
    exact = bool("reference_exact" in draws.columns and draws["reference_exact"].fill_null(False).all()
                 and space is not None and draws.height == space)
    eff = damage(metric, b, draws[metric].to_numpy().astype(float))
    p = reference_p(effect, eff, exact) if n_heads else math.nan
    return _Reference(float(np.mean(eff)), p, draws.height, draws.unique(subset=["heads"]).height, space, exact,
                      float(draws["top1"].mean()))


def reference_mismatch(cell: pl.DataFrame, name: str | None, heads: list[str]) -> str | None:
    """Why a circuit's reference rows cannot judge it, or None: they do not have its per-layer sizes."""
    if not heads or name is None:
        return None
    want = size_profile(heads)
    draws = cell.filter((pl.col("condition") == name) & (pl.col("draw") >= 1))
    bad = [list(h) for h in draws["heads"].to_list() if size_profile(list(h)) != want]
    if bad:
        return (f"reference {name} has sets of other per-layer sizes ({_layers(size_profile(bad[0]))}) "
                f"than the circuit ({_layers(want)})")
    return None


def _layers(profile: dict[int, int]) -> str:
    return ", ".join(f"L{l}: {n}" for l, n in sorted(profile.items()))


def _saturates(metric: str, baseline: float, upper: float, fraction: float) -> bool | None:
    """The upper bound drives the decision metric to at most ``fraction`` of its baseline (metrics
    with a floor at 0); None for metrics without one (``logit_b``, ``ce``)."""
    if not metrics.has_floor(metric):
        return None
    return bool(baseline > 0 and upper <= fraction * baseline)


def _num(v) -> float:
    return math.nan if v is None else float(v)


# --------------------------------------------------------------------------------------------
# Reasons in words


fmt_p = rounding.fmt_p  # a p rounded up, the one rule for every printed p (headtrace.core.rounding)


def floor_reason(metric: str, baseline: float, n_sequences: int, min_baseline_hits: int,
                 fallback: str | None) -> str:
    """Why ``metric`` could not decide, and what did: the words of the ``floor_reason`` column."""
    hits = round(baseline * n_sequences)
    said = metrics.words(metric)
    head = (f"{said} is near its floor: the unablated model predicts B {metrics.get(metric).hit} "
            f"in {hits} of {n_sequences} sequences ({hits / n_sequences:.1%}), fewer than {min_baseline_hits}, so one or "
            f"two sequences would decide the halving rule on {said}")
    return head + (f"; decided on {metrics.words(fallback)} instead" if fallback else "")


def fraction_text(metric: str, baseline: float, ablated: float, fraction: float = math.nan,
                  fraction_lo: float = math.nan, fraction_hi: float = math.nan) -> str:
    """'top-1 after ablation is 59% of its baseline (interval 45% to 75%)' / 'ablation leaves 12% of the in-context
    boost in the cross-entropy of B (interval ...)'; without an interval the point, said so."""
    said = metrics.words(metric)
    if metrics.has_floor(metric):
        frac = ablated / baseline if baseline > 0 else math.nan
        head = f"{said} after ablation is " + (f"{frac:.0%} of its baseline" if frac == frac else
                                                f"{ablated:.1%} against a baseline of {baseline:.1%}")
        point = f"{ablated:.1%} of {baseline:.1%}"
    else:
        if math.isnan(_num(fraction)):
            return f"{said} has no in-context boost to halve (no copy-null was run)"
        if abs(fraction) > SHARE_SHOWN:  # a boost near 0: the share says only that
            return (f"ablation leaves {'more' if fraction > 0 else 'less'} than {SHARE_SHOWN:.0%} of the in-context "
                    f"boost in {said} (a boost near 0)")
        head = f"ablation leaves {fraction:.0%} of the in-context boost in {said}"
        point = f"{fraction:.0%}"
    if math.isnan(_num(fraction_lo)) or math.isnan(_num(fraction_hi)):
        return head + f" ({point}; no interval: the point estimate decides)"
    if max(abs(fraction_lo), abs(fraction_hi)) > SHARE_SHOWN:
        return head + " (its interval reaches beyond ±" + f"{SHARE_SHOWN:.0%})"
    return head + f" (interval {rounding.fmt_share_interval(fraction_lo, fraction_hi, sep=' to ')})"


def partial_reason(half: str | None, *, metric: str, baseline: float, ablated: float, fraction: float = math.nan,
                   fraction_lo: float = math.nan, fraction_hi: float = math.nan,
                   max_ablated_fraction: float = MAX_ABLATED_FRACTION) -> str:
    """Why a circuit that beats its reference set is ``partial``, in words."""
    line, said = f"{max_ablated_fraction:.0%}", metrics.words(metric)
    text = fraction_text(metric, baseline, ablated, fraction, fraction_lo, fraction_hi)
    if half is None:
        return f"it beats its reference set, but the halving rule cannot apply: {text}"
    where = (f"above {line}: without these heads the model keeps more than {line} of its behaviour in {said}"
             if half == "above_half" else
             f"which reaches above {line}: these heads are not shown to halve the behaviour in {said}")
    return f"it beats its reference set, but {text}, " + where


def not_causal_reason(missed: Sequence[str], *, effect: float, baseline: float, ablated: float, p_value: float,
                      metric: str, alpha: float = ALPHA, max_ablated_fraction: float = MAX_ABLATED_FRACTION,
                      fraction: float = math.nan, fraction_lo: float = math.nan, fraction_hi: float = math.nan,
                      effect_lo: float = math.nan) -> str:
    """The ``missed_criteria`` in words, with the circuit's numbers, joined by 'and'."""
    said = metrics.words(metric)
    words = {
        "effect": (f"no positive effect ({said} effect {effect:.3f})" if not effect > 0
                   else f"no effect shown ({said} effect {effect:.3f}, its interval's lower end {effect_lo:.3f})"),
        "ablated": (f"{fraction_text(metric, baseline, ablated, fraction, fraction_lo, fraction_hi)}, not at most "
                    f"{max_ablated_fraction:.0%}"),
        "p": f"p = {fmt_p(p_value)} > alpha = {alpha:g}" if not math.isnan(_num(p_value)) else "p undefined",
    }
    return " and ".join(words[m] for m in missed)


def share_note(*, n_heads: int, n_upper_heads: int, saturates: bool | None, metric: str,
               saturation_fraction: float = SATURATION_FRACTION) -> str | None:
    """Why the circuit's share of the upper bound's effect tells nothing here, or None where it informs:
    the upper bound saturates (its effect is the whole baseline, so the share repeats the relative
    drop), or the circuit's layers hold fewer other heads than circuit heads (the upper bound is
    nearly the circuit)."""
    if saturates:
        return (f"the whole layers take {metrics.words(metric)} to at most {saturation_fraction:.0%} of "
                f"its baseline, so the circuit's share of their effect would only repeat its relative drop")
    others = n_upper_heads - n_heads
    if n_heads and others < n_heads:
        return (f"the circuit's layers hold {_plural(others, 'other head')} beside its {n_heads}, so the upper "
                f"bound is nearly the circuit and the circuit's share of its effect says nothing")
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------------------------
# Composition


def chance_top1(token_range: Sequence[int]) -> float:
    """Top-1 of guessing among the probe's distinct tokens ``[low, high)``: ``1 / (high - low)``."""
    low, high = int(token_range[0]), int(token_range[1])
    if high <= low:
        raise ValueError(f"empty probe token range {token_range}")
    return 1.0 / (high - low)


def induction_present(baseline_top1, chance: float, min_baseline_ratio: float = 10.0):
    """Baseline top-1 at least ``min_baseline_ratio`` x chance (arrays or scalars)."""
    return np.asarray(baseline_top1, float) >= min_baseline_ratio * chance


def destroys_induction(verdict_value, baseline_top1, chance: float, min_baseline_ratio: float = 10.0):
    """Induction present AND the previous-token circuit's verdict is ``causal``."""
    return np.logical_and(induction_present(baseline_top1, chance, min_baseline_ratio),
                          np.asarray(verdict_value) == "causal")
