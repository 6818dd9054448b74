"""The spectral signal across revisions (paper B's F5 and paper A's PR integral).

``f5_pr_lead``: for every final-revision induction head, where its participation ratio rises
(``pr_rise_index``, one of ``PR_RISE_RULES``) against where its induction selectivity first crosses
the circuit threshold; ``pr_integral``: the PR-integral ranking of heads over training, in the
paper's and the author's definitions. Inputs are ``trajectory`` tables, in the revision order of
``headtrace.findings.trajectory``.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings.trajectory import final_circuit, with_rev_index

__all__ = ["PR_RISE_RULES", "pr_rise_index", "f5_pr_lead", "pr_integral"]


PR_RISE_RULES = ("running_min_ratio", "first_ratio", "max_log_step")


def pr_rise_index(pr: list[float | None], rule: str = "running_min_ratio", factor: float = 2.0) -> int | None:
    """Index of the revision where a PR trajectory "rises" (null PR values are skipped).

    * ``running_min_ratio`` (default, *choice*): first t with PR_t >= factor x min(PR_0..PR_{t-1}),
      i.e. PR at least doubles (factor 2) relative to its lowest earlier value. Robust to an early
      dip (Pythia L4H4: 1.96, 1.96, 1.32, 2.58, 27.35 -> rises at the 27.35 revision; 2.58 is < 2 x
      1.32) and ignores heads whose PR only falls.
    * ``first_ratio``: first t with PR_t >= factor x PR_0.
    * ``max_log_step``: the revision ending the largest single-step increase of ln PR (largest
      multiplicative jump); None if PR never increases.
    A head already elevated at the first revision has no detectable rise (None).
    """
    if rule not in PR_RISE_RULES:
        raise ValueError(f"unknown PR rise rule {rule!r}; one of {PR_RISE_RULES}")
    vals = [(i, v) for i, v in enumerate(pr) if v is not None and not math.isnan(v) and v > 0]
    if len(vals) < 2:
        return None
    if rule == "first_ratio":
        base = vals[0][1]
        return next((i for i, v in vals[1:] if v >= factor * base), None)
    if rule == "running_min_ratio":
        lo = vals[0][1]
        for i, v in vals[1:]:
            if v >= factor * lo:
                return i
            lo = min(lo, v)
        return None
    steps = [(math.log(b) - math.log(a), j) for (_, a), (j, b) in zip(vals[:-1], vals[1:])]
    best, j = max(steps)
    return j if best > 0 else None


def f5_pr_lead(traj: pl.DataFrame, induction_threshold: float = 50.0, rule: str = "running_min_ratio",
               factor: float = 2.0) -> pl.DataFrame:
    """For every final-revision induction head: the PR-rise revision (``pr_rise_index``) vs the
    first revision with sel_induction >= induction_threshold; lead_ratio = selectivity-cross tokens /
    PR-rise tokens (> 1: PR leads). lead_ratio is null when either revision is missing or either
    tokens value is null or 0 (no ratio on a zero-token revision); ``lead_revisions`` (difference
    of revision indices) is still given when both revisions exist."""
    fin = final_circuit(traj, induction_threshold)
    o = with_rev_index(traj).join(fin, on=["model", "layer", "head"], how="inner").sort(
        "model", "layer", "head", "rev_index")
    rows = []
    for (model, layer, head), g in o.group_by("model", "layer", "head", maintain_order=True):
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        ri = pr_rise_index(g["pr"].to_list(), rule, factor)
        sel = g["sel_induction"].to_list()
        ci = next((i for i, s in enumerate(sel) if s is not None and s >= induction_threshold), None)
        rt = toks[ri] if ri is not None else None
        ct = toks[ci] if ci is not None else None
        lead = ct / rt if (rt and ct) else None
        rows.append(dict(model=model, layer=layer, head=head,
                         pr_rise_revision=revs[ri] if ri is not None else None, pr_rise_tokens=rt,
                         selectivity_cross_revision=revs[ci] if ci is not None else None,
                         selectivity_cross_tokens=ct, lead_ratio=lead,
                         lead_revisions=(ci - ri) if (ri is not None and ci is not None) else None,
                         rule=rule))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f5_pr_lead"]), "f5_pr_lead")


def pr_integral(traj: pl.DataFrame) -> pl.DataFrame:
    """Per model x head, two PR integrals over training and the heads' ranks (1 = largest).

    * ``integral_paper`` (paper A): I = sum_t max(PR_t - 1, 0) * dlog(tokens_t) with backward
      differences dlog(tokens_t) = ln tokens_t - ln tokens_{t-1}; the first revision has no
      preceding interval and contributes 0 (*choice*). Revisions with null PR, null tokens or
      tokens 0 are dropped before differencing (ln 0 is undefined).
    * ``integral_author`` (author's code): trapezoid rule of max(PR - 1, 0) over
      x = ln(max(tokens / 1e9, 1)), i.e. tokens clamped below at 1B (intervals under 1B add
      nothing); revisions with null PR or null tokens dropped, tokens 0 clamped like any < 1B.
      On the published panel this reproduces the ``integral`` field of the mech-interp files
      (to ~1e-3 relative: the author used tokens rounded to 1e-3 B).
    """
    o = with_rev_index(traj).sort("model", "layer", "head", "rev_index")
    rows = []
    for (model, layer, head), g in o.group_by("model", "layer", "head", maintain_order=True):
        pr = g["pr"].to_list()
        tok = g["tokens"].to_list()
        pts = [(t, p) for t, p in zip(tok, pr) if p is not None and t is not None and not math.isnan(p)]
        paper = None
        pos = [(t, p) for t, p in pts if t > 0]
        if pos:
            paper = 0.0
            for (t0, _), (t1, p1) in zip(pos[:-1], pos[1:]):
                paper += max(p1 - 1.0, 0.0) * (math.log(t1) - math.log(t0))
        author = None
        if pts:
            x = np.log(np.maximum(np.array([t for t, _ in pts], float) / 1e9, 1.0))
            y = np.maximum(np.array([p for _, p in pts], float) - 1.0, 0.0)
            author = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0)) if len(pts) > 1 else 0.0
        rows.append(dict(model=model, layer=layer, head=head, n_revisions=len(pts),
                         integral_paper=paper, integral_author=author))
    out = pl.DataFrame(rows, schema={k: v for k, v in SCHEMAS["pr_integral"].items()
                                     if not k.startswith("rank_")})
    out = out.with_columns(
        rank_paper=pl.col("integral_paper").rank("ordinal", descending=True).over("model").cast(pl.Int32),
        rank_author=pl.col("integral_author").rank("ordinal", descending=True).over("model").cast(pl.Int32),
    ).sort("model", "layer", "head")
    return conform(out, "pr_integral")
