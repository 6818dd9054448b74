"""Seed specificity (paper A): does seed i's induction circuit matter in the model of seed j?

**Cross-seed ablation** (``cross_seed_conditions`` / ``cross_seed_table``): in the final model of
seed j, ablate the final induction circuit of every seed i (heads named ``LxHy``), each with K
draws of its reference set in model j (``conditions.reference_sets``: the same number of heads per layer,
from every head of those layers, circuit i one of them).
``top1_drop = baseline_top1 - ablated_top1``; ``random_drop_mean`` = mean over the reference draws of
``baseline_top1 - draw_top1``; ``top1_drop_vs_random = top1_drop - random_drop_mean`` (the excess
drop over the reference set, in top-1 units); ``effect_vs_random`` is the ratio, and ``p_value`` the
circuit's p among its reference set (``verdict.reference_p``). The reference set follows the cell
verdict's rule (the same ``exact_max``, ``ablation.exact_max``): every set when it holds at most
``max(n_random, exact_max)`` (``control_exact``), else ``n_random`` uniform draws with replacement;
``n_matched_sets`` is its size. A circuit with no draws has NaN excess, ratio and p: undecidable, not
a negative. ``jaccard`` (``heads.jaccard``) is between circuit i and circuit j;
``n_candidates`` is the number of heads in the circuit's layers (how much room two seeds had to
land on different heads).

**Seed specificity, decided here** (:func:`seed_specificity`, on the whole seed x seed table; the pages
only word it): ``seed_specificity`` is ``no_circuit`` (no seed has an induction circuit at its final
revision), ``undecidable`` (the own or the foreign circuits have no reference draws, so no excess to
compare), ``specific`` (the circuits differ, mean cross-seed Jaccard below 1, and a foreign circuit's
mean excess drop is below ``specificity_factor`` x the own circuits', as in the paper) or ``not_specific``;
``specificity_factor`` (:data:`SPECIFICITY_FACTOR`) is recorded on every row.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import polars as pl

from headtrace.causal.conditions import Condition, reference_sets
from headtrace.causal.verdict import reference_p
from headtrace.core.heads import Head, as_heads, head_name, jaccard, layers_of

# a foreign circuit hurts "far less" than the own one when its mean excess drop is below this share of it
SPECIFICITY_FACTOR = 0.5
SPECIFICITY = ("no_circuit", "undecidable", "specific", "not_specific")


def circuit_of(screen_or_traj: pl.DataFrame, revision: str | None = None) -> tuple[Head, ...]:
    """Induction circuit (``in_induction_circuit``) of a screen, or of one revision of a trajectory."""
    df = screen_or_traj if revision is None else screen_or_traj.filter(pl.col("revision") == revision)
    df = df.filter(pl.col("in_induction_circuit"))
    return as_heads(zip(df["layer"].to_list(), df["head"].to_list()))


def cross_seed_conditions(circuits: Mapping[str, Sequence], n_heads_per_layer: int, n_random: int, seed: int,
                          exact_max: int | None = None):
    """Baseline, then per circuit model i: ``circuit:i`` and ``random:i`` x its reference sets (the
    verdict's: every set when the reference set holds at most ``max(n_random, exact_max)``, else
    ``n_random`` uniform draws)."""

    conds = [Condition("baseline", 0, ())]
    for name, heads in circuits.items():
        heads = as_heads(heads)
        bad = [h for _, h in heads if not 0 <= h < n_heads_per_layer]
        if bad:
            raise ValueError(f"circuit of {name} has heads {bad} beyond {n_heads_per_layer} heads per layer")
        conds.append(Condition(f"circuit:{name}", 0, heads))
        if heads:
            sets, n_sets, exact = reference_sets(heads, n_heads_per_layer, n_random, seed, f"random:{name}",
                                                 exact_max=exact_max)
            conds += [Condition(f"random:{name}", i + 1, d, n_sets=n_sets, exact=exact) for i, d in enumerate(sets)]
    return conds


def cross_seed_table(results: Sequence[dict], circuits: Mapping[str, Sequence], model: str,
                     seeds: Mapping[str, int], n_heads_per_layer: int | None = None) -> pl.DataFrame:
    """Rows (circuit_seed, model_seed, ...) from ``ablation.run`` results of ``cross_seed_conditions``
    evaluated in ``model`` (one row per circuit model). ``n_candidates`` (heads in the layers of
    circuit i or of the model's own circuit) needs ``n_heads_per_layer``; null without it."""
    by = {}
    for r in results:
        by.setdefault(r["name"], []).append(r)
    b = float(by["baseline"][0]["top1"])
    own = circuits[model]
    rows = []
    for name, heads in circuits.items():
        heads = as_heads(heads)
        a = float(by[f"circuit:{name}"][0]["top1"])
        rand = by.get(f"random:{name}", [])
        draws = np.array([d["top1"] for d in rand], float)
        space = next((int(d["n_sets"]) for d in rand if d.get("n_sets") is not None), None)
        exact = bool(rand) and all(d.get("exact") for d in rand)
        drop = b - a
        if draws.size:
            rmean = float(np.mean(b - draws))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.float64(drop) / np.float64(rmean))
            p = reference_p(drop, b - draws, exact) if heads else math.nan
        else:
            rmean, ratio, p = (0.0 if not heads else math.nan), math.nan, math.nan
        rows.append({
            "circuit_seed": int(seeds[name]), "model_seed": int(seeds[model]),
            "top1_drop": drop, "top1_drop_vs_random": drop - rmean if not math.isnan(rmean) else math.nan,
            "jaccard": jaccard(heads, own),
            "n_candidates": (None if n_heads_per_layer is None else
                             n_heads_per_layer * len(set(layers_of(heads)) | set(layers_of(as_heads(own))))),
            "circuit_model": name, "model": model, "same_seed": name == model,
            "circuit": [head_name(*h) for h in heads], "n_heads": len(heads),
            "baseline_top1": b, "ablated_top1": a, "random_drop_mean": rmean,
            "effect_vs_random": ratio, "p_value": p, "n_random": int(draws.size),
            "n_matched_sets": space,
            "control_exact": None if space is None or not draws.size else exact,
        })
    return pl.DataFrame(rows, schema_overrides={"circuit": pl.List(pl.String), "n_candidates": pl.Int64,
                                                "n_matched_sets": pl.Int64, "control_exact": pl.Boolean})


def seed_specificity(df: pl.DataFrame, factor: float = SPECIFICITY_FACTOR) -> pl.DataFrame:
    """``df`` (every model seed's :func:`cross_seed_table` rows together) with the whole table's call
    (module docstring) on every row: ``seed_specificity`` and the ``specificity_factor`` it was made at.
    The excess drops are the rows' ``top1_drop_vs_random`` where there were reference draws (NaN: none)."""
    return df.with_columns(seed_specificity=pl.lit(_specificity(df, factor), pl.String),
                           specificity_factor=pl.lit(float(factor), pl.Float64))


def cross_seed_matrix(df: pl.DataFrame, value: str = "top1_drop_vs_random") -> tuple[list[int], list[int], np.ndarray]:
    """(circuit seeds = rows, model seeds = columns, matrix of ``value``)."""
    rows = sorted(df["circuit_seed"].unique().to_list())
    cols = sorted(df["model_seed"].unique().to_list())
    m = np.full((len(rows), len(cols)), np.nan)
    for r in df.iter_rows(named=True):
        m[rows.index(r["circuit_seed"]), cols.index(r["model_seed"])] = r[value]
    return rows, cols, m


def _specificity(df: pl.DataFrame, factor: float) -> str | None:
    if not df.height:
        return None
    own, other = df.filter(pl.col("same_seed")), df.filter(~pl.col("same_seed"))
    if own["n_heads"].sum() == 0:
        return "no_circuit"
    own_ex, other_ex = _mean_excess(own), _mean_excess(other)
    if own_ex is None or other_ex is None:
        return "undecidable"
    jac = other["jaccard"].drop_nans().drop_nulls()
    return "specific" if jac.len() and jac.mean() < 1 and other_ex < factor * own_ex else "not_specific"


def _mean_excess(rows: pl.DataFrame) -> float | None:
    """Mean excess drop over the reference set of the rows that had reference draws; None: none had."""
    x = rows["top1_drop_vs_random"].fill_nan(None).drop_nulls()
    return float(x.mean()) if x.len() else None
