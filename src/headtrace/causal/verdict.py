"""Verdict statistics: is a circuit's ablation effect causal, and how sure are we (paper A step 3)?

Pure functions over the ``ablation`` table (one row per condition, ``headtrace.causal.conditions``) and
over per-sequence metric arrays.

**Effect** on a metric (``damage``): how much an ablation hurts, positive = hurts:
``baseline - ablated`` for ``top1``, ``top5`` and ``logit_b``; ``ablated - baseline`` for ``ce``
(ablation raises the cross-entropy). The decision metric is ``metric`` (``top1`` by default;
``logit_b`` is often the sensitive one on real models, whose top-1 is 1-5 %).

**Permutation p-value** (``permutation_p``): over the N *distinct* matched sets evaluated,
``p = (1 + #{sets with effect >= circuit effect}) / (1 + N)``, counting the circuit itself; its
smallest possible value is ``min_p = 1 / (1 + N)``. N is the whole matched space when it is small
(exact test) or K sets drawn without replacement (sampled); ``n_matched_sets`` is the space size.

**The verdict** (``verdict`` column; the boolean ``causal`` is ``verdict == "causal"``). A circuit
*beats its controls* when the effect is positive (``effect > 0`` and, where the ablation table gives
its bootstrap interval, ``effect_lo > 0``: an effect whose interval reaches 0 is not shown to exist)
AND ``p_value <= alpha`` (0.05) AND ``effect >= min_effect_ratio x max(random_effect_mean, 0)`` (2). The *half-baseline criterion* (top-1/top-5
only; ``half_baseline``) asks whether the ablation leaves at most ``max_ablated_fraction`` (0.5) of the
baseline, read from the paired bootstrap interval of ``ablated / baseline`` (``ablated_fraction_lo``,
``ablated_fraction_hi``; the ablation table's ``top1_fraction_lo/hi``, top-1 only: on top-5 the point
estimate decides): ``at_most_half`` when the
interval's upper end is at most 0.5, ``above_half`` when its lower end is above 0.5, ``straddles_half``
otherwise. Without an interval (the published ablations, ``n_bootstrap: 0``) the point estimate
decides, ``at_most_half`` or ``above_half``.

- ``causal``: a non-empty circuit that beats its controls and (top-1/top-5) is ``at_most_half``.
- ``partial`` (said "necessary in part"): beats its controls, but the interval does not put the
  ablated metric at or below half its baseline (``above_half`` or ``straddles_half``):
  these heads matter more than as many other heads of their layers, yet the model keeps (or may
  keep) more than half of the behaviour without them. ``partial_reason`` says which, with the interval.
- ``not_causal``: a circuit that does not beat its controls (and an empty circuit: nothing was
  ablated). For a non-empty circuit ``not_causal_reason`` names the criteria it missed, with its
  numbers (``missed_criteria``), the half-baseline one included where it is missed too.
- ``underpowered``: a non-empty circuit whose control cannot reach ``p <= alpha`` whatever the
  effect (``min_p > alpha``: fewer than ``1/alpha - 1`` distinct matched sets, e.g. a 2-head circuit
  in a 4-head layer has C(2, 2) = 1), whose layers have fewer free heads than circuit heads (no
  matched set exists: ``headtrace.causal.conditions``), or whose control sets do not have the
  circuit's per-layer sizes (a control of another circuit). The effect and its interval are still
  reported; the test cannot decide; ``underpowered_reason`` says why.
- ``untested``: no test was run, ``untested_reason`` says which of two cases: the ablation table
  holds no matched control for the circuit at all (the published induction circuits: their files
  give no random draw), or the decision metric is top-1 (or top-5) and the unablated model shows no
  behaviour for it to remove: fewer than ``min_baseline_hits`` (10) of the ablated sequences have B
  as their top-1 (``at_floor``), and no ``fallback_metric`` is set. An ablation cannot lower a count
  that is already at its floor, so "not causal" would be a statement about the probe, not the circuit.

**The floor rule** (fixed before any model was ablated under it, the same for every model): when the
decision metric is at its floor and ``fallback_metric`` is set (``ce`` by default), that metric
decides the cell's verdicts instead, by the same criteria (``ce`` has no half-baseline criterion),
and ``floor_reason`` says so with the count; ``metric`` names the metric that decided, and the
top-1 figures stay in their own columns. ``ce`` (the cross-entropy of B) rather than ``logit_b``:
it is the log-probability of the target, which a shift of every logit leaves unchanged, and the
field's usual in-context measure (Olsson et al. 2022 score induction by the loss on repeated tokens).
A cell whose ablated sequences are not counted (the published ablations) is never at its floor.

**Exact or sampled**: ``control_exact`` is true only when every set of the matched space was
evaluated (``n_distinct_draws == n_matched_sets``); only then may a report say "all N sets". When
the ablation table does not record the space's size (the published ablations), ``n_matched_sets``
and ``control_exact`` are null: the sets evaluated are known, whether they were all is not.

``random_effect_mean`` = mean effect over the control's sets; ``effect_vs_random = effect /
random_effect_mean`` (IEEE: ``inf`` when the mean is 0 and the effect positive, ``NaN`` when both
are 0).

**Upper bound** (the circuit's whole layers ablated), on the decision metric: ``upper_bound_value``
(the metric after it), ``upper_bound_effect`` (its damage) and ``upper_bound_share = effect /
upper_bound_effect`` (the circuit's share of what its layers do; null without an upper-bound
condition or when the upper bound does no damage). ``upper_bound_saturates``: the upper bound
drives the decision metric to at most ``saturation_fraction`` (0.1) of its baseline, for the
metrics with a floor at 0 (``top1``, ``top5``; false at a zero baseline); null for ``logit_b`` and
``ce``, which have no floor the table records. Both are reported, **not required**: the verdict
never reads them (they describe the layers, not the circuit). ``upper_bound_top1`` stays top-1.
The share informs only where the layers can do more than the circuit and are not simply the
circuit: ``upper_bound_share_note`` (null where the share is worth showing) says why it is not, when
the upper bound saturates (its effect is then the whole baseline, so the share only repeats the
circuit's relative drop, ``effect / baseline``) or when the circuit's layers hold fewer other heads
than circuit heads (the upper bound is nearly the circuit itself: ``share_note``).
The class-matched control (sink heads excluded), when present, gets its own ``class_p_value``,
``class_random_effect_mean`` and ``n_class_matched_sets`` next to the plain control's.

**Intervals** (``bootstrap_counts`` / ``bootstrap_intervals``): the probe sequences are resampled
with replacement ``n_boot`` times (1000) from ``numpy.random.default_rng([seed, crc32("bootstrap")])``;
every condition of a cell uses the *same* resamples, so an effect's interval is paired (baseline
and ablated mean on the same resample). Percentile interval at ``level`` (0.95), widened to
contain the point estimate in the rare case it does not. Deterministic by seed. For top-1 also the
interval of ``condition / baseline`` (``top1_fraction_lo/hi``), paired the same way, over the
resamples whose baseline is not 0 (the ratio is undefined there): the half-baseline criterion's.

**Composition** (``induction_present`` / ``destroys_induction``): induction is present when the
baseline top-1 is at least ``min_baseline_ratio x chance``, chance = 1 / (number of distinct probe
tokens), i.e. the model predicts B far above guessing; the previous-token circuit destroys it when
induction is present and that circuit's verdict is ``causal``. The composition experiment
(``headtrace.experiments.composition``) adds a measured copying null on top of this rule.
"""
from __future__ import annotations

import math
import zlib
from typing import Mapping, Sequence

import numpy as np
import polars as pl

from headtrace.causal.conditions import CIRCUITS, size_profile
from headtrace.cell.bootstrap import resample_counts
from headtrace.core import tables

VERDICTS = ("causal", "partial", "not_causal", "underpowered", "untested")
MIN_BASELINE_HITS = 10
FALLBACK_METRIC = "ce"
DECISION_METRICS = ("top1", "logit_b", "ce")
CI_METRICS = ("top1", "logit_b", "ce")
FRACTION_METRICS = ("top1",)  # interval of condition / baseline: the half-baseline criterion's
HALF_METRICS = ("top1", "top5")  # the metrics with a floor at 0, which the half-baseline criterion reads
CONTROL_CRITERIA = ("effect", "p", "ratio")  # what beating the matched controls takes
DIRECTION = {"top1": 1.0, "top5": 1.0, "logit_b": 1.0, "ce": -1.0}  # effect = DIRECTION x (baseline - ablated)


def damage(metric: str, baseline, ablated):
    """Effect of an ablation on ``metric``, positive = the ablation hurts."""
    if metric not in DIRECTION:
        raise ValueError(f"unknown metric {metric!r}; one of {sorted(DIRECTION)}")
    return DIRECTION[metric] * (np.asarray(baseline, float) - np.asarray(ablated, float))


def min_p(n_sets: int) -> float:
    """Smallest permutation p-value over ``n_sets`` matched sets: ``1 / (1 + n_sets)``."""
    return 1.0 / (1 + n_sets)


def permutation_p(effect: float, set_effects: Sequence[float]) -> float:
    """``(1 + #{e >= effect}) / (1 + N)`` over the N distinct sets' effects."""
    e = np.asarray(set_effects, float)
    return (1 + int((e >= effect).sum())) / (1 + e.size)


ALPHA = 0.05
MAX_ABLATED_FRACTION = 0.5
MIN_EFFECT_RATIO = 2.0
SATURATION_FRACTION = 0.1  # the upper bound saturates: the decision metric at most this share of its baseline


def decide(*, n_heads: int, effect: float, baseline: float, ablated: float, p_value: float, n_sets: int,
           random_effect_mean: float, metric: str = "top1", alpha: float = ALPHA,
           max_ablated_fraction: float = MAX_ABLATED_FRACTION, min_effect_ratio: float = MIN_EFFECT_RATIO,
           fraction_lo: float = math.nan, fraction_hi: float = math.nan, effect_lo: float = math.nan) -> str:
    """The verdict (module docstring) from one circuit's numbers: ``not_causal`` for an empty circuit,
    ``underpowered`` for a control that cannot reach ``alpha``, else ``not_causal`` (does not beat its
    controls), ``partial`` (beats them, not shown at or below half its baseline) or ``causal``."""
    if n_heads == 0:
        return "not_causal"
    if n_sets == 0 or min_p(n_sets) > alpha:
        return "underpowered"
    missed = missed_criteria(effect=effect, baseline=baseline, ablated=ablated, p_value=p_value,
                             random_effect_mean=random_effect_mean, metric=metric, alpha=alpha,
                             max_ablated_fraction=max_ablated_fraction, min_effect_ratio=min_effect_ratio,
                             fraction_lo=fraction_lo, fraction_hi=fraction_hi, effect_lo=effect_lo)
    if any(m in CONTROL_CRITERIA for m in missed):
        return "not_causal"
    return "partial" if missed else "causal"


def half_baseline(metric: str, baseline: float, ablated: float, fraction_lo: float = math.nan,
                  fraction_hi: float = math.nan, max_ablated_fraction: float = MAX_ABLATED_FRACTION) -> str | None:
    """The half-baseline criterion: ``at_most_half`` (the interval of ``ablated / baseline`` ends at
    or below ``max_ablated_fraction``), ``above_half`` (it starts above), ``straddles_half``; without an
    interval (NaN ends) the point ``ablated <= max_ablated_fraction x baseline`` decides. None for
    the metrics without the criterion (``ce``, ``logit_b``)."""
    if metric not in HALF_METRICS:
        return None
    if math.isnan(_num(fraction_lo)) or math.isnan(_num(fraction_hi)):
        return "at_most_half" if ablated <= max_ablated_fraction * baseline else "above_half"
    if fraction_hi <= max_ablated_fraction:
        return "at_most_half"
    return "above_half" if fraction_lo > max_ablated_fraction else "straddles_half"


def at_floor(metric: str, baseline: float, n_sequences: int | None,
             min_baseline_hits: int = MIN_BASELINE_HITS) -> bool:
    """A top-1/top-5 baseline hit by fewer than ``min_baseline_hits`` of ``n_sequences`` sequences
    (the module docstring's floor rule); never for ``ce``/``logit_b`` or an unknown count."""
    if metric not in ("top1", "top5") or not n_sequences:
        return False
    return round(baseline * n_sequences) < min_baseline_hits


def floor_reason(metric: str, baseline: float, n_sequences: int, min_baseline_hits: int,
                 fallback: str | None) -> str:
    """Why ``metric`` could not decide, and what did: the words of the ``floor_reason`` column."""
    hits = round(baseline * n_sequences)
    said = {"top1": "top-1", "top5": "top-5"}[metric]
    head = (f"{said} is at its floor: the unablated model predicts B {'first' if metric == 'top1' else 'in its top 5'} "
            f"in {hits} of {n_sequences} sequences, fewer than {min_baseline_hits}, so no ablation can show a loss "
            f"on it")
    return head + (f"; decided on {METRIC_WORDS[fallback]} instead" if fallback else "")


def fmt_p(p: float, decimals: int = 3) -> str:
    """A p-value rounded up to ``decimals`` (a printed p is never smaller than the p computed)."""
    s = 10 ** decimals
    return f"{math.ceil(p * s - 1e-9) / s:.{decimals}f}"


METRIC_WORDS = {"top1": "top-1", "top5": "top-5", "ce": "the cross-entropy of B", "logit_b": "the logit of B"}


def missed_criteria(*, effect: float, baseline: float, ablated: float, p_value: float, random_effect_mean: float,
                    metric: str = "top1", alpha: float = ALPHA, max_ablated_fraction: float = MAX_ABLATED_FRACTION,
                    min_effect_ratio: float = MIN_EFFECT_RATIO, fraction_lo: float = math.nan,
                    fraction_hi: float = math.nan, effect_lo: float = math.nan) -> tuple[str, ...]:
    """The criteria of ``causal`` a circuit with a usable control misses (empty: causal), in the
    module docstring's order: ``"effect"`` (no positive effect, or its interval ``effect_lo`` reaches 0),
    ``"ablated"`` (top-1/top-5 only: the
    half-baseline criterion, :func:`half_baseline`, not ``at_most_half``), ``"p"`` (``p_value >
    alpha`` or undefined), ``"ratio"`` (the effect below ``min_effect_ratio`` times the matched-random
    mean). A NaN fails the criterion it enters. The ``CONTROL_CRITERIA`` are what beating the
    controls takes; a circuit that misses only ``"ablated"`` is ``partial``."""
    out = []
    if not effect > 0 or not (math.isnan(_num(effect_lo)) or effect_lo > 0):
        out.append("effect")
    half = half_baseline(metric, baseline, ablated, fraction_lo, fraction_hi, max_ablated_fraction)
    if half not in (None, "at_most_half"):
        out.append("ablated")
    if math.isnan(p_value) or not p_value <= alpha:
        out.append("p")
    if not effect >= min_effect_ratio * max(random_effect_mean, 0.0):
        out.append("ratio")
    return tuple(out)


def fraction_text(metric: str, baseline: float, ablated: float, fraction_lo: float = math.nan,
                  fraction_hi: float = math.nan) -> str:
    """'top-1 after ablation is 59% of its baseline (interval 45% to 75%)'; without an interval
    '... (29.7% of 50.0%; no interval: the point decides)'."""
    said = METRIC_WORDS.get(metric, metric)
    frac = ablated / baseline if baseline > 0 else math.nan
    head = f"{said} after ablation is " + (f"{frac:.0%} of its baseline" if frac == frac else
                                            f"{ablated:.1%} against a baseline of {baseline:.1%}")
    if math.isnan(_num(fraction_lo)) or math.isnan(_num(fraction_hi)):
        return head + f" ({ablated:.1%} of {baseline:.1%}; no interval: the point estimate decides)"
    return head + f" (interval {fraction_lo:.0%} to {fraction_hi:.0%})"


def partial_reason(half: str, *, metric: str, baseline: float, ablated: float, fraction_lo: float = math.nan,
                   fraction_hi: float = math.nan, max_ablated_fraction: float = MAX_ABLATED_FRACTION) -> str:
    """Why a circuit that beats its controls is ``partial``, in words: where the interval of the ablated
    metric over its baseline lies against ``max_ablated_fraction`` (above it, or across it)."""
    line, said = f"{max_ablated_fraction:.0%}", METRIC_WORDS.get(metric, metric)
    where = (f"above {line}: without these heads the model keeps more than {line} of its baseline {said}"
             if half == "above_half" else
             f"which reaches above {line}: these heads are not shown to bring {said} to {line} of its baseline or less")
    return (f"it beats its matched controls, but {fraction_text(metric, baseline, ablated, fraction_lo, fraction_hi)}, "
            + where)


def not_causal_reason(missed: Sequence[str], *, effect: float, baseline: float, ablated: float, p_value: float,
                      random_effect_mean: float, metric: str, alpha: float = ALPHA,
                      max_ablated_fraction: float = MAX_ABLATED_FRACTION,
                      min_effect_ratio: float = MIN_EFFECT_RATIO, fraction_lo: float = math.nan,
                      fraction_hi: float = math.nan, effect_lo: float = math.nan) -> str:
    """The ``missed_criteria`` in words, with the circuit's numbers in the metric's units (top-1 /
    top-5 as fractions), joined by 'and': 'p = 0.400 > alpha = 0.05 and top-1 after ablation is 59%
    of its baseline (interval 45% to 75%), not at most 50%'."""
    words = {
        "effect": (f"no positive effect ({METRIC_WORDS.get(metric, metric)} effect {effect:.3f})" if not effect > 0
                   else f"no effect shown ({METRIC_WORDS.get(metric, metric)} effect {effect:.3f}, its interval's "
                        f"lower end {effect_lo:.3f})"),
        "ablated": (f"{fraction_text(metric, baseline, ablated, fraction_lo, fraction_hi)}, not at most "
                    f"{max_ablated_fraction:.0%}"),
        "p": f"p = {fmt_p(p_value)} > alpha = {alpha:g}" if not math.isnan(p_value) else "p undefined",
        "ratio": (f"effect {effect:.3f} is less than {min_effect_ratio:g} times the matched sets' mean effect "
                  f"{random_effect_mean:.3f}"),
    }
    return " and ".join(words[m] for m in missed)


def share_note(*, n_heads: int, n_upper_heads: int, saturates: bool | None, metric: str,
               saturation_fraction: float = SATURATION_FRACTION) -> str | None:
    """Why the circuit's share of the upper bound's effect tells nothing here, or None where it informs:
    the upper bound saturates (its effect is the whole baseline, so the share repeats the relative
    drop), or the circuit's layers hold fewer other heads than circuit heads (the upper bound is
    nearly the circuit)."""
    if saturates:
        return (f"the whole layers take {METRIC_WORDS.get(metric, metric)} to at most {saturation_fraction:.0%} of "
                f"its baseline, so the circuit's share of their effect would only repeat its relative drop")
    others = n_upper_heads - n_heads
    if n_heads and others < n_heads:
        return (f"the circuit's layers hold {_plural(others, 'other head')} beside its {n_heads}, so the upper "
                f"bound is nearly the circuit and the circuit's share of its effect says nothing")
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------------------------
# Bootstrap over probe sequences


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


def bootstrap_intervals(per_sequence: Sequence[Mapping[str, np.ndarray]], baseline_index: int = 0, *,
                        n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                        metrics: Sequence[str] = CI_METRICS) -> list[dict[str, float]]:
    """Per condition: ``{m}_lo``/``{m}_hi`` (its mean) and ``{m}_effect_lo``/``{m}_effect_hi``
    (its paired effect against the baseline condition ``baseline_index``) for every metric, and for
    the ``FRACTION_METRICS`` ``{m}_fraction_lo``/``{m}_fraction_hi`` (its mean over the baseline's,
    paired; NaN when the baseline is 0 on every resample)."""
    n = len(per_sequence[baseline_index][metrics[0]])
    w = bootstrap_counts(n, n_boot, seed)
    out = []
    base = {m: np.asarray(per_sequence[baseline_index][m], float) for m in metrics}
    base_boot = {m: (w @ base[m]) / n for m in metrics}
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
            if m in FRACTION_METRICS:
                row[f"{m}_fraction_lo"], row[f"{m}_fraction_hi"] = fraction_interval(boot, base_boot[m], v, base[m],
                                                                                     level)
        out.append(row)
    return out


# --------------------------------------------------------------------------------------------
# The verdict table


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _control_stats(cell: pl.DataFrame, name: str | None, metric: str, b: float, effect: float, n_heads: int):
    """(mean effect, p, N distinct sets, space size, mean top-1) of one control in a cell."""
    if name is None:
        return math.nan, math.nan, 0, 0, math.nan, 0
    draws = cell.filter((pl.col("condition") == name) & (pl.col("draw") >= 1))
    k = draws.height
    space = 0
    if "n_matched_sets" in cell.columns:
        s = cell.filter(pl.col("condition") == name)["n_matched_sets"].drop_nulls()
        space = int(s[0]) if s.len() else 0
    if not k:
        return math.nan, math.nan, 0, space, math.nan, 0
    eff = damage(metric, b, draws[metric].to_numpy().astype(float))
    r_mean = float(np.mean(eff))
    # The p-value counts *distinct* head sets: K copies of one comparison are not K comparisons.
    distinct = draws.unique(subset=["heads"], keep="first", maintain_order=True)
    dmetric = distinct[metric].to_numpy().astype(float)
    p = permutation_p(effect, damage(metric, b, dmetric))  # a set tied with the circuit: b - d == b - a exactly
    if not n_heads:
        p = math.nan
    # the space's size when the table records it; None when it does not (exactness unknown)
    return r_mean, p, distinct.height, space or None, float(draws["top1"].mean()), k


def _layers(profile: dict[int, int]) -> str:
    return ", ".join(f"L{l}: {n}" for l, n in sorted(profile.items()))


def _saturates(metric: str, baseline: float, upper: float, fraction: float) -> bool | None:
    """The upper bound drives the decision metric to at most ``fraction`` of its baseline (metrics
    with a floor at 0); None for metrics without one (``logit_b``, ``ce``)."""
    if metric not in ("top1", "top5"):
        return None
    return bool(baseline > 0 and upper <= fraction * baseline)


def control_problem(cell: pl.DataFrame, name: str | None, heads: list[str], upper: str | None) -> str | None:
    """Why a circuit's matched control cannot judge it, or None: its draws do not have the circuit's
    per-layer sizes, or there are none because a layer has fewer free heads than circuit heads."""
    if not heads:
        return None
    want = size_profile(heads)
    draws = cell.filter((pl.col("condition") == name) & (pl.col("draw") >= 1)) if name else cell.clear()
    if draws.height:
        bad = [list(h) for h in draws["heads"].to_list() if size_profile(list(h)) != want]
        if bad:
            return (f"control {name} has sets of other per-layer sizes ({_layers(size_profile(bad[0]))}) "
                    f"than the circuit ({_layers(want)})")
        return None
    if upper is not None and "heads" in cell.columns:
        up = cell.filter(pl.col("condition") == upper)["heads"]
        if up.len():
            have = size_profile(list(up[0]))
            short = [f"L{l}: {k} circuit heads, {have.get(l, 0) - k} free" for l, k in sorted(want.items())
                     if have.get(l, 0) - k < k]
            if short:
                return "no matched set: too few free heads (" + "; ".join(short) + ")"
    return "no matched control"


def verdict(ablation_df: pl.DataFrame, *, metric: str = "top1", alpha: float = ALPHA,
            max_ablated_fraction: float = MAX_ABLATED_FRACTION, min_effect_ratio: float = MIN_EFFECT_RATIO,
            saturation_fraction: float = SATURATION_FRACTION, min_baseline_hits: int = MIN_BASELINE_HITS,
            fallback_metric: str | None = FALLBACK_METRIC) -> pl.DataFrame:
    """The ``verdict`` table (tables.SCHEMAS): one row per circuit present in each cell. A cell whose
    top-1 baseline is at its floor (:func:`at_floor`) is decided on ``fallback_metric``, or is
    ``untested`` without one (module docstring, the floor rule)."""
    if metric not in DECISION_METRICS:
        raise ValueError(f"ablation.metric must be one of {DECISION_METRICS}, got {metric!r}")
    if fallback_metric is not None and fallback_metric not in ("ce", "logit_b"):
        raise ValueError(f"ablation.fallback_metric must be ce, logit_b or null, got {fallback_metric!r}")
    requested = metric
    rows = []
    for key, cell in ablation_df.group_by(["model", "revision", "tokens"], maintain_order=True):
        conds = set(cell["condition"].to_list())
        base = cell.filter(pl.col("condition") == "baseline")
        if base.height != 1:
            raise ValueError(f"cell {key}: expected one baseline row, found {base.height}")
        n_seq = int(base["n_sequences"][0]) if "n_sequences" in base.columns and base["n_sequences"][0] else None
        floor = (floor_reason(requested, float(base[requested][0]), n_seq, min_baseline_hits, fallback_metric)
                 if at_floor(requested, float(base[requested][0]), n_seq, min_baseline_hits) else None)
        metric = fallback_metric if floor and fallback_metric else requested
        b_top1, b = float(base["top1"][0]), float(base[metric][0])
        b_copy = {c: None if c not in base.columns or base[c][0] is None else float(base[c][0])
                  for c in ("top1_control", "top1_context")}
        for circuit_name, spec in CIRCUITS.items():
            if spec.condition not in conds:
                continue
            crow = cell.filter(pl.col("condition") == spec.condition).row(0, named=True)
            rname = next((r for r in (spec.random, spec.fallback_random) if r and r in conds), None)
            uname = next((u for u in (spec.upper, spec.fallback_upper) if u and u in conds), None)
            cname = spec.class_random if spec.class_random in conds else None
            urow = cell.filter(pl.col("condition") == uname).row(0, named=True) if uname else None
            ub = float(urow["top1"]) if urow else b_top1
            ub_value = float(urow[metric]) if urow else math.nan
            ub_effect = float(damage(metric, b, ub_value)) if urow else math.nan
            a, n_heads = float(crow[metric]), int(crow["n_heads"])
            effect = float(damage(metric, b, a))
            r_mean, p, n_distinct, space, r_top1, k = _control_stats(cell, rname, metric, b, effect, n_heads)
            c_mean, c_p, c_distinct, c_space, _, _ = _control_stats(cell, cname, metric, b, effect, n_heads)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.float64(effect) / np.float64(r_mean))
            # the half-baseline criterion's interval: the ablation table's, on the decision metric
            f_lo, f_hi = (_num(crow.get(f"{metric}_fraction_lo")), _num(crow.get(f"{metric}_fraction_hi")))
            half = half_baseline(metric, b, a, f_lo, f_hi, max_ablated_fraction)
            crit = dict(effect=effect, baseline=b, ablated=a, p_value=p, random_effect_mean=r_mean, metric=metric,
                        alpha=alpha, max_ablated_fraction=max_ablated_fraction, min_effect_ratio=min_effect_ratio,
                        fraction_lo=f_lo, fraction_hi=f_hi, effect_lo=_num(crow.get(f"{metric}_effect_lo")))
            v = decide(n_heads=n_heads, n_sets=n_distinct, **crit)
            heads = list(crow["heads"] or [])
            problem = control_problem(cell, rname, heads, uname) if n_heads else None
            if problem and "per-layer sizes" in problem:
                v = "underpowered"  # never judged against another circuit's control
            untested = None
            if n_heads and rname is None:  # no matched control in the table: no test was run
                v, untested = "untested", ("no matched control was ablated, so nothing says whether as many "
                                           "other heads of its layers would do as much")
            if floor and not fallback_metric and n_heads:
                v, untested = "untested", floor  # no behaviour for the requested metric to lose, nothing else decides
            reason = not_reason = part = None
            if v == "underpowered":
                reason = problem or (f"{n_distinct} distinct matched set(s): min p = 1/{n_distinct + 1} = "
                                     f"{min_p(n_distinct):.3f} > alpha = {alpha:g}")
            elif v == "not_causal" and n_heads:
                not_reason = not_causal_reason(missed_criteria(**crit), **crit)
            elif v == "partial":
                part = partial_reason(half, metric=metric, baseline=b, ablated=a, fraction_lo=f_lo, fraction_hi=f_hi,
                                      max_ablated_fraction=max_ablated_fraction)
            saturates = _saturates(metric, b, ub_value if urow else b, saturation_fraction)
            share = effect / ub_effect if urow and n_heads and ub_effect > 0 else None
            note = (share_note(n_heads=n_heads, n_upper_heads=int(urow["n_heads"]), saturates=saturates,
                               metric=metric, saturation_fraction=saturation_fraction)
                    if share is not None else None)
            rows.append({
                "model": key[0], "revision": key[1], "tokens": key[2], "circuit": circuit_name,
                "n_heads": n_heads, "heads": list(crow["heads"]), "baseline_top1": b_top1,
                "ablated_top1": float(crow["top1"]), "effect": effect, "random_effect_mean": r_mean,
                "effect_vs_random": ratio, "p_value": p, "upper_bound_top1": ub,
                "upper_bound_saturates": saturates,
                "causal": v == "causal", "verdict": v, "metric": metric,
                "baseline_value": b, "ablated_value": a,
                "effect_lo": _num(crow.get(f"{metric}_effect_lo")), "effect_hi": _num(crow.get(f"{metric}_effect_hi")),
                "min_p": min_p(n_distinct) if n_distinct else math.nan, "n_matched_sets": space,
                "control_exact": (None if space is None and n_distinct else
                                  bool(n_distinct and n_distinct == space)),
                "control": rname, "upper_bound": uname, "n_random": k, "n_distinct_draws": n_distinct, "random_top1_mean": r_top1,
                "class_control": cname, "class_p_value": c_p, "class_random_effect_mean": c_mean,
                "n_class_matched_sets": c_space,
                "underpowered_reason": reason,
                "not_causal_reason": not_reason,
                "control_sizes_match": None if not n_heads or not n_distinct else not bool(problem),
                "n_sequences": n_seq, "baseline_top1_control": b_copy["top1_control"],
                "baseline_top1_context": b_copy["top1_context"],
                "upper_bound_value": ub_value, "upper_bound_effect": ub_effect,
                "upper_bound_share": share,
                "floor_reason": floor,
                "ablated_fraction": a / b if metric in HALF_METRICS and b > 0 else None,
                "ablated_fraction_lo": None if math.isnan(f_lo) else f_lo,
                "ablated_fraction_hi": None if math.isnan(f_hi) else f_hi,
                "half_baseline": half if n_heads else None,
                "partial_reason": part,
                "untested_reason": untested,
                "upper_bound_share_note": note,
            })
    schema = tables.SCHEMAS["verdict"]
    if not rows:
        return pl.DataFrame(schema=schema)
    return tables.conform(pl.DataFrame(rows, schema=schema), "verdict")


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
