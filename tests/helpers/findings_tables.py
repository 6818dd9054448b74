"""The findings tables a hand-built run implies, as the findings job writes them: ``f3_milestones`` with
its brackets and ``f3_gaps`` from them (:func:`headtrace.findings.trajectory.f3_gap_table`), for the
report's tests, whose fixtures give the milestones' revisions and the screened revisions but not the
columns the findings job decides (the gap's case, its order).

A milestone's bracket is the screened revision before it (``circuit_size``, in token order), or the
refined one where ``f3_onsets`` has a row (the findings job reads the trajectory with the refined
revisions in it); a milestone never met has the last revision as its lower end. Hand-set ``f3_gaps``
columns (a gap's interval or censoring as a test wants it written) are kept over the computed ones,
and the gap's case is decided again from the row so kept.
"""
from __future__ import annotations

import polars as pl

from headtrace.findings import trajectory as T

I3, F10, F50 = "induction_3_heads", "first_token_10pct", "first_token_50pct"
PAIRS = ((F50, I3), (F10, I3))  # the pairs the headline reads (report.words: SINK_MILESTONES after the circuit)


def _revisions(sizes: pl.DataFrame | None, model: str) -> list[tuple[str, float | None]]:
    if sizes is None or "model" not in sizes.columns:
        return []
    g = sizes.filter(pl.col("model") == model).select("revision", "tokens").unique(maintain_order=True)
    return list(g.sort("tokens", nulls_last=True, maintain_order=True).iter_rows())


def _bracket(r: dict, revs: list, onsets: pl.DataFrame | None) -> tuple[str | None, float | None]:
    names = [n for n, _ in revs]
    if r["revision"] is None:
        return revs[-1] if revs else (r.get("lo_revision"), r.get("lo_tokens"))
    if onsets is not None:
        o = onsets.filter((pl.col("model") == r["model"]) & (pl.col("milestone") == r["milestone"])
                          & (pl.col("hi_revision") == r["revision"]))
        if o.height:
            return o["lo_revision"][0], o["lo_tokens"][0]
    if "lo_revision" in r:
        return r["lo_revision"], r["lo_tokens"]
    i = names.index(r["revision"]) if r["revision"] in names else 0
    return revs[i - 1] if i > 0 else (None, None)


def milestones_as_written(F: dict) -> pl.DataFrame:
    """``f3_milestones`` of ``F`` with every bracket and censoring column (module docstring)."""
    ms, sizes, onsets = F["f3_milestones"], F.get("circuit_size"), F.get("f3_onsets")
    rows = []
    for r in ms.iter_rows(named=True):
        lo, lo_tokens = _bracket(r, _revisions(sizes, r["model"]), onsets)
        rows.append({**r, "lo_revision": lo, "lo_tokens": lo_tokens,
                     "left_censored": r["revision"] is not None and lo is None,
                     "right_censored": r["revision"] is None})
    return pl.DataFrame(rows, schema={**ms.schema, "lo_revision": pl.String, "lo_tokens": pl.Float64,
                                      "left_censored": pl.Boolean, "right_censored": pl.Boolean})


def as_written(F: dict, pairs=PAIRS) -> dict:
    """``F`` with ``f3_gaps`` as the findings job writes it for ``pairs`` (those whose milestones ``F``
    has), hand-set columns of ``F["f3_gaps"]`` kept."""
    out = dict(F)
    ms = milestones_as_written(F)
    have = set(ms["milestone"].to_list())
    gaps = T.f3_gap_table(ms, [p for p in pairs if set(p) <= have])
    hand = F.get("f3_gaps")
    if hand is not None and hand.height:
        key = ["model", "later", "earlier"]
        keep = [c for c in hand.columns if c not in key]
        gaps = gaps.join(hand, on=key, how="left", suffix="_hand").with_columns(
            [pl.col(f"{c}_hand").alias(c) for c in keep if c in gaps.columns]).select(gaps.columns)
        gaps = gaps.with_columns(gap_case=pl.Series([T.gap_case(r) for r in gaps.iter_rows(named=True)],
                                                    dtype=pl.String))
    out["f3_gaps"] = gaps
    return out
