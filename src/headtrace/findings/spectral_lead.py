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

__all__ = ["PR_RISE_RULES", "pr_rise_index", "pr_rise_detail", "f5_pr_lead", "pr_integral"]


PR_RISE_RULES = ("running_min_ratio", "first_ratio", "max_log_step")


def pr_rise_detail(pr: list[float | None], rule: str = "running_min_ratio",
                   factor: float = 2.0) -> tuple[int | None, float | None, float | None]:
    """``(index, rise_ratio, max_prior_ratio)`` of :func:`pr_rise_index`'s decision.

    ``rise_ratio``: the rule's ratio at the rise revision (PR_t over the running minimum, or over
    PR_0); ``max_prior_ratio``: the largest such ratio at the revisions before it (all of them when
    there is no rise), each of which fell short of ``factor``. Together they say how close the
    decision was: Pythia L4H4 rises at 27.35 (20.7x its running minimum 1.32) because 2.58 at the
    revision before is 1.96x its running minimum, 2% short of 2x. Both are null for ``max_log_step`` (no factor)."""
    if rule not in PR_RISE_RULES:
        raise ValueError(f"unknown PR rise rule {rule!r}; one of {PR_RISE_RULES}")
    vals = [(i, v) for i, v in enumerate(pr) if v is not None and not math.isnan(v) and v > 0]
    if len(vals) < 2:
        return None, None, None
    if rule == "max_log_step":
        steps = [(math.log(b) - math.log(a), j) for (_, a), (j, b) in zip(vals[:-1], vals[1:])]
        best, j = max(steps)
        return (j if best > 0 else None), None, None
    ref = vals[0][1]
    prior = None
    for i, v in vals[1:]:
        ratio = v / ref
        if v >= factor * ref:
            return i, ratio, prior
        prior = ratio if prior is None else max(prior, ratio)
        if rule == "running_min_ratio":
            ref = min(ref, v)
    return None, None, prior


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
    How close the decision was: :func:`pr_rise_detail`.
    """
    return pr_rise_detail(pr, rule, factor)[0]


def f5_pr_lead(traj: pl.DataFrame, induction_threshold: float = 50.0, rule: str = "running_min_ratio",
               factor: float = 2.0) -> pl.DataFrame:
    """For every final-revision induction head: the PR-rise revision (``pr_rise_index``) vs the
    first revision with sel_induction >= induction_threshold; lead_ratio = selectivity-cross tokens /
    PR-rise tokens (> 1: PR leads). lead_ratio is null when either revision is missing or either
    tokens value is null or 0 (no ratio on a zero-token revision); ``lead_revisions`` (difference
    of revision indices) is still given when both revisions exist.

    Censored timing, as in F3: each event lies in (revision before, revision], so the rise and the
    crossing carry their bracket's lower revision (``*_lo_revision`` / ``*_lo_tokens``; null at the
    first revision: left-censored) and the lead its interval ``lead_lo`` = cross_lo / rise_hi,
    ``lead_hi`` = cross_hi / rise_lo (null where a side is censored or 0 tokens). ``rise_ratio`` /
    ``max_prior_ratio`` / ``rise_margin`` say how close the rule's decision was
    (:func:`pr_rise_detail`; margin = min(rise_ratio / factor, factor / max_prior_ratio), 1 = on the
    edge; Pythia L4H4: 1.02)."""
    fin = final_circuit(traj, induction_threshold)
    o = with_rev_index(traj).join(fin, on=["model", "layer", "head"], how="inner").sort(
        "model", "layer", "head", "rev_index")
    rows = []

    def pos(x):
        return x is not None and x > 0
    for (model, layer, head), g in o.group_by("model", "layer", "head", maintain_order=True):
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        ri, rise_ratio, prior = pr_rise_detail(g["pr"].to_list(), rule, factor)
        sel = g["sel_induction"].to_list()
        ci = next((i for i, s in enumerate(sel) if s is not None and s >= induction_threshold), None)
        rt = toks[ri] if ri is not None else None
        ct = toks[ci] if ci is not None else None
        lead = ct / rt if (rt and ct) else None
        rlo = toks[ri - 1] if ri is not None and ri > 0 else None
        clo = toks[ci - 1] if ci is not None and ci > 0 else None
        margins = [m for m in ((rise_ratio / factor) if rise_ratio is not None else None,
                               (factor / prior) if pos(prior) else None) if m is not None]
        rows.append(dict(model=model, layer=layer, head=head,
                         pr_rise_revision=revs[ri] if ri is not None else None, pr_rise_tokens=rt,
                         selectivity_cross_revision=revs[ci] if ci is not None else None,
                         selectivity_cross_tokens=ct, lead_ratio=lead,
                         lead_revisions=(ci - ri) if (ri is not None and ci is not None) else None,
                         rule=rule,
                         pr_rise_lo_revision=revs[ri - 1] if ri is not None and ri > 0 else None,
                         pr_rise_lo_tokens=rlo,
                         selectivity_cross_lo_revision=revs[ci - 1] if ci is not None and ci > 0 else None,
                         selectivity_cross_lo_tokens=clo,
                         lead_lo=(clo / rt) if (pos(clo) and pos(rt)) else None,
                         lead_hi=(ct / rlo) if (ct is not None and pos(rlo)) else None,
                         rise_ratio=rise_ratio, max_prior_ratio=prior,
                         rise_margin=min(margins) if ri is not None and margins else None))
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
