"""The onset spread of the F3 milestones: per model and milestone, the first revision reaching it in
each bootstrap resample of the probe sequences (``bootstrap_milestones``, written per cell by
:mod:`headtrace.cell.bootstrap`), summarised as ``interval`` percentiles of the revision order
(``inverted_cdf``, so the bounds are real revisions). The same resample index is the same draw of
sequences at every revision, so the spread is a paired bootstrap over revisions.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings.trajectory import FIRST_TOKEN_FRACTIONS, INDUCTION_COUNTS, milestone_specs, revision_order


def onset_intervals(counts: pl.DataFrame, models: list[str] | None = None, *, interval: float = 0.9,
                    induction_counts: tuple[int, ...] | None = None,
                    first_token_fractions: tuple[float, ...] | None = None) -> pl.DataFrame:
    """``f3_onset_bootstrap``: per model x F3 milestone (the names of ``trajectories.f3_milestones``),
    the ``interval`` percentiles of the first revision reaching the milestone across resamples.

    ``counts``: ``bootstrap_milestones`` rows of every revision of the models (the same resample
    index means the same draw of sequences at every revision). A resample where the milestone is
    never reached ranks after the last revision: ``p_reached`` is the share of resamples reaching
    it, and a percentile that falls on "never" gives a null revision. ``models``: rows for these
    models too (null bootstrap columns, ``n_resamples`` 0) when they have no counts (the published
    reference panel has no per-sequence masses). ``induction_counts`` / ``first_token_fractions``:
    the milestones (None: those of ``trajectories.f3_milestones``)."""
    specs = milestone_specs(tuple(INDUCTION_COUNTS if induction_counts is None else induction_counts),
                            tuple(FIRST_TOKEN_FRACTIONS if first_token_fractions is None else first_token_fractions))
    q = (1 - interval) / 2
    rows = []
    have = counts["model"].unique(maintain_order=True).to_list() if counts.height else []
    for model in (models if models is not None else have):
        g = counts.filter(pl.col("model") == model) if counts.height else counts
        if not g.height:
            rows += [dict(model=model, milestone=name, n_resamples=0, interval=interval) for name, _, _ in specs]
            continue
        order = revision_order(g).sort("rev_index")
        revs, toks = order["revision"].to_list(), order["tokens"].to_list()
        g = g.join(order.select("revision", "rev_index"), on="revision").with_columns(
            bos_fraction=pl.col("n_first_token") / pl.col("n_heads"))
        n_b = g["resample"].n_unique()
        if g.height != n_b * len(revs):
            raise ValueError(f"{model}: bootstrap counts are not one row per revision x resample "
                             f"({g.height} rows, {len(revs)} revisions, {n_b} resamples); same n_resamples everywhere?")
        g = g.sort("resample", "rev_index")
        for name, col, thr in specs:
            hit = (g[col].to_numpy() >= thr).reshape(n_b, len(revs))
            first = np.where(hit.any(1), hit.argmax(1), len(revs))  # never -> past the last revision
            lo, hi = (int(np.quantile(first, p, method="inverted_cdf")) for p in (q, 1 - q))
            pick = (lambda i, xs: xs[i] if i < len(revs) else None)
            rows.append(dict(model=model, milestone=name, onset_lo_revision=pick(lo, revs),
                             onset_lo_tokens=pick(lo, toks), onset_hi_revision=pick(hi, revs),
                             onset_hi_tokens=pick(hi, toks), p_reached=float(hit.any(1).mean()),
                             n_resamples=n_b, interval=interval))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f3_onset_bootstrap"]), "f3_onset_bootstrap")


def with_onset_columns(table: pl.DataFrame, intervals: pl.DataFrame | None) -> pl.DataFrame:
    """``table`` (any per model x milestone table, e.g. ``f3_onsets``) with ``onset_lo_revision`` /
    ``onset_hi_revision`` set from ``intervals`` (``f3_onset_bootstrap``); null where a model has no
    bootstrap (no per-sequence masses, or ``bootstrap.n_resamples`` 0) or ``intervals`` is None.
    Column order and every other column are kept."""
    cols = ["onset_lo_revision", "onset_hi_revision"]
    if intervals is None or not intervals.height:
        return table.with_columns([pl.lit(None, pl.String).alias(c) for c in cols]).select(table.columns)
    iv = intervals.select("model", "milestone", *cols)
    out = table.drop(cols, strict=False).join(iv, on=["model", "milestone"], how="left")
    order = table.columns + [c for c in cols if c not in table.columns]
    return out.select(order)
