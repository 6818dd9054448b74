"""The strongest head of each class at every revision, and how it moved over the revisions.

Where no head crosses a threshold, the counts of the other findings are all zero, and a model whose
strongest first-token head rose from 1× to 15× reads like one that never moved. These two tables keep
the trend: ``strongest_head`` (per model x revision x class: the head with the largest selectivity,
and whether it reaches the class's threshold) and ``strongest_trend`` (per model x class: that
selectivity at the first and last revision, its peak, the first revision where it reached the
threshold, and whether it rose, fell or stayed flat). The report words them ("none yet, rising" is
not "none").

Thresholds: induction is compared with the induction-circuit threshold (a circuit head), every other
class with the class threshold (a head of that class; for first-token: a sink head, Finding 1/2's
definition). Trend: ``rising`` when the last revision's selectivity is at least ``trend_factor`` times
the first's, ``falling`` when at most 1 / ``trend_factor`` times, else ``flat``; ``one_revision`` for a
model screened once.
"""
from __future__ import annotations

import polars as pl

from headtrace.core.tables import CLASS_COLUMNS, SCHEMAS, conform, head_name
from headtrace.findings.trajectory import with_rev_index

__all__ = ["strongest_head", "strongest_trend", "threshold_of", "TRENDS"]

TRENDS = ("rising", "flat", "falling", "one_revision")


def threshold_of(cls: str, class_threshold: float = 30.0, induction_threshold: float = 50.0) -> float:
    """The selectivity a head of class ``cls`` (``induction``, ``first-token``, ...) must reach to count."""
    return induction_threshold if cls == "induction" else class_threshold


def strongest_head(traj: pl.DataFrame, class_threshold: float = 30.0, induction_threshold: float = 50.0) -> pl.DataFrame:
    """Per model, revision (training order) and class, the head with the largest selectivity of that
    class (ties: the lowest layer, then head), its selectivity, the threshold and ``reached``
    (selectivity >= threshold). A class whose selectivity is null at a revision (not recorded) has no row there."""
    rows = []
    t = with_rev_index(traj)
    for col in CLASS_COLUMNS:
        cls = col.replace("_", "-")
        sel = f"sel_{col}"
        if sel not in t.columns:
            continue
        best = (t.filter(pl.col(sel).is_not_null() & pl.col(sel).is_not_nan())
                .sort(["model", "rev_index", sel, "layer", "head"], descending=[False, False, True, False, False])
                .group_by("model", "rev_index", maintain_order=True).first())
        thr = threshold_of(cls, class_threshold, induction_threshold)
        rows.append(best.select(
            "model", "revision", "tokens", "rev_index", pl.lit(cls).alias("class"), "layer", "head",
            pl.col(sel).cast(pl.Float64).alias("selectivity"), pl.lit(float(thr)).alias("threshold"),
            (pl.col(sel) >= thr).alias("reached")))
    if not rows:
        return pl.DataFrame(schema=SCHEMAS["strongest_head"])
    order = {c.replace("_", "-"): i for i, c in enumerate(CLASS_COLUMNS)}
    out = pl.concat(rows).with_columns(pl.col("class").replace_strict(order, return_dtype=pl.Int32).alias("_c"))
    return conform(out.sort("model", "_c", "rev_index").drop("_c", "rev_index"), "strongest_head")


def strongest_trend(strongest: pl.DataFrame, trend_factor: float = 2.0) -> pl.DataFrame:
    """Per model and class, from :func:`strongest_head` (in its order: training order per model and
    class): the strongest selectivity at the first and the last revision (with the head), its peak,
    the first revision where it reached the threshold (null: never), whether the last revision's does,
    ``ratio`` = last / first and the ``trend`` (module docstring)."""
    out = []
    for (model, cls), g in strongest.group_by("model", "class", maintain_order=True):
        r = g.rows(named=True)
        first, last = r[0], r[-1]
        peak = max(r, key=lambda x: x["selectivity"])  # the first of equal peaks
        reached = next((x for x in r if x["reached"]), None)
        ratio = last["selectivity"] / first["selectivity"] if first["selectivity"] > 0 else None
        if len(r) == 1:
            trend = "one_revision"
        elif ratio is None:
            trend = "rising" if last["selectivity"] > 0 else "flat"
        elif ratio >= trend_factor:
            trend = "rising"
        elif ratio <= 1 / trend_factor:
            trend = "falling"
        else:
            trend = "flat"
        out.append({
            "model": model, "class": cls, "threshold": first["threshold"], "n_revisions": len(r),
            "first_revision": first["revision"], "first_tokens": first["tokens"],
            "first_head": head_name(first["layer"], first["head"]), "first_selectivity": first["selectivity"],
            "last_revision": last["revision"], "last_tokens": last["tokens"],
            "last_head": head_name(last["layer"], last["head"]), "last_selectivity": last["selectivity"],
            "peak_revision": peak["revision"], "peak_head": head_name(peak["layer"], peak["head"]),
            "peak_selectivity": peak["selectivity"],
            "reached_revision": None if reached is None else reached["revision"],
            "reached_tokens": None if reached is None else reached["tokens"],
            "reached_last": bool(last["reached"]), "ratio": ratio, "trend": trend, "trend_factor": float(trend_factor),
        })
    if not out:
        return pl.DataFrame(schema=SCHEMAS["strongest_trend"])
    return conform(pl.DataFrame(out, schema_overrides={"first_tokens": pl.Int64, "last_tokens": pl.Int64,
                                                       "reached_tokens": pl.Int64, "reached_revision": pl.String,
                                                       "ratio": pl.Float64}), "strongest_trend")
