"""Composition (paper A): when does ablating the previous-token circuit destroy induction?

``composition_table``: per revision, the ``previous_token_circuit`` verdict row (ablation of the
previous-token circuit, against ``previous_token_matched_random``). Induction is *present*
(``induction_present``) when the baseline top-1 is at least ``min_baseline_ratio`` x chance, chance
= 1 / (number of distinct probe tokens) of the model's probe (``chance`` per model);
``destroys_induction`` = induction present AND the verdict is causal
(``headtrace.causal.verdict.destroys_induction``). ``onset`` = the first such revision;
``sustained_onset`` = the first revision from which it holds at every later revision.

**Copying null.** 10 x chance is a low bar (on the paper probe 10 / 9900 = 0.101%: 3 correct of
2000 sequences, since 2 of 2000 = 0.100% falls just short): a model that copies *some* token of its context, with no A -> B use at all, hits B
about once per distinct context token (a uniform copier over the ~253 distinct tokens of a
256-token paper sequence scores ~0.40%). So the null is measured on the model itself, at the same
query of the same sequences: each sequence gets a *shuffled-B control* token
(``probe.synthetic.control_targets``: a token of its context within 16 positions of B, neither A nor
B, as frequent in the context as B), and the ablation engine records, for the unablated model,
how often the top-1 is that control (``copy_null_top1``, with its 95% Wilson interval
``copy_null_lo`` / ``_hi``) and how often it is any context token other than B
(``copy_other_top1``: the model's copying propensity). A copier blind to A -> B predicts B and
the control equally often. B and the control are distinct tokens, so every sequence hits at most
one of them; ``copy_null_p`` is the exact one-sided sign test over the sequences that hit either
(B no more likely than the control: Binomial(n_B + n_control, 1/2) >= n_B). Induction is present
only when ``copy_null_p <= alpha`` (``above_copy_null``) **and** the old rule holds (>=
``min_baseline_ratio`` x chance; no threshold changed). ``baseline_top1_lo`` / ``_hi`` is B's own
Wilson interval.

What it cannot decide: with few hits on either token the test has no power (with n_B +
n_control <= 4 no split reaches p <= 0.05); it says B is preferred over a context token matched
in frequency and standing near B, not how strong induction is, nor that the preference
comes from the previous-token circuit (the ablation asks that). Where the ablation table has no
copy metrics (the published files record none), these columns are null and only the old rule
applies.
"""
from __future__ import annotations

import math
from typing import Mapping

import polars as pl

from headtrace.causal.verdict import induction_present


def sign_test_p(n_hits: int, n_control: int) -> float:
    """One-sided exact sign test: P(X >= n_hits) for X ~ Binomial(n_hits + n_control, 1/2), the
    chance that B wins at least this often if B and the control were equally likely top-1s."""
    m = int(n_hits) + int(n_control)
    if m == 0:
        return 1.0
    return sum(math.comb(m, k) for k in range(int(n_hits), m + 1)) / 2 ** m


def wilson_interval(p: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``p`` over ``n`` trials (95% by default)."""
    if n <= 0 or p is None or math.isnan(p):
        return math.nan, math.nan
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def composition_table(verdicts: pl.DataFrame, chance: float | Mapping[str, float],
                      min_baseline_ratio: float = 10.0, alpha: float = 0.05) -> pl.DataFrame:
    """Per model x revision: the previous-token-circuit ablation against its matched-random control,
    the copying null (module docstring; from the verdict rows' ``baseline_top1_control``,
    ``baseline_top1_context`` and ``n_sequences``), ``induction_present``, ``destroys_induction``,
    and per model ``onset`` / ``sustained_onset`` (revision and tokens). ``chance``: chance top-1
    (``verdict.chance_top1`` of the probe's token range), one number or per model; ``alpha``: the
    sign test's level (the ablation's ``alpha``)."""
    v = verdicts.filter(pl.col("circuit") == "previous_token_circuit")
    v = v.with_columns(random_top1_mean=(pl.col("random_top1_mean") if "random_top1_mean" in v.columns
                                         else pl.col("baseline_top1") - pl.col("random_effect_mean")))
    if "verdict" not in v.columns:  # tables from before the three-way verdict
        v = v.with_columns(verdict=pl.when(pl.col("causal")).then(pl.lit("causal")).otherwise(pl.lit("not_causal")))
    for c, t in (("n_sequences", pl.Int32), ("baseline_top1_control", pl.Float64), ("baseline_top1_context", pl.Float64)):
        if c not in v.columns:  # verdict tables from before the copy metrics
            v = v.with_columns(pl.lit(None, t).alias(c))
    v = v.sort("model", "tokens", nulls_last=True)
    models = v["model"].to_list()
    missing = sorted({m for m in models if isinstance(chance, Mapping) and m not in chance})
    if missing:
        raise ValueError(f"composition: no chance top-1 for model(s) {missing}")
    ch = [float(chance[m]) if isinstance(chance, Mapping) else float(chance) for m in models]
    cols = {k: [] for k in ("baseline_top1_lo", "baseline_top1_hi", "copy_null_lo", "copy_null_hi",
                            "copy_null_p", "above_copy_null")}
    for b, c0, n in zip(v["baseline_top1"].to_list(), v["baseline_top1_control"].to_list(),
                        v["n_sequences"].to_list()):
        lo, hi = wilson_interval(float(b), int(n)) if n else (None, None)
        cols["baseline_top1_lo"].append(lo)
        cols["baseline_top1_hi"].append(hi)
        if c0 is None or not n:
            for k in ("copy_null_lo", "copy_null_hi", "copy_null_p", "above_copy_null"):
                cols[k].append(None)
            continue
        nlo, nhi = wilson_interval(float(c0), int(n))
        p = sign_test_p(round(float(b) * n), round(float(c0) * n))
        cols["copy_null_lo"].append(nlo)
        cols["copy_null_hi"].append(nhi)
        cols["copy_null_p"].append(p)
        cols["above_copy_null"].append(p <= alpha)
    present = [bool(induction_present(b, c, min_baseline_ratio)) and (ab is None or ab)
               for b, c, ab in zip(v["baseline_top1"].to_list(), ch, cols["above_copy_null"])]
    destroys = [p and d == "causal" for p, d in zip(present, v["verdict"].to_list())]
    v = v.with_columns(chance_top1=pl.Series(ch, dtype=pl.Float64),
                       copy_null_top1=pl.col("baseline_top1_control"),
                       copy_other_top1=pl.col("baseline_top1_context"),
                       **{k: pl.Series(x, dtype=pl.Boolean if k == "above_copy_null" else pl.Float64)
                          for k, x in cols.items()},
                       induction_present=pl.Series(present, dtype=pl.Boolean),
                       destroys_induction=pl.Series(destroys, dtype=pl.Boolean))
    parts = []
    for (m,), g in v.group_by("model", maintain_order=True):
        d = g["destroys_induction"].to_list()
        onset = next((i for i, x in enumerate(d) if x), None)
        sus = None
        for i in range(len(d) - 1, -1, -1):
            if d[i]:
                sus = i
            else:
                break
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        parts.append(g.with_columns(
            onset_revision=pl.lit(None if onset is None else revs[onset], pl.String),
            onset_tokens=pl.lit(None if onset is None else toks[onset], pl.Int64),
            sustained_onset_revision=pl.lit(None if sus is None else revs[sus], pl.String),
            sustained_onset_tokens=pl.lit(None if sus is None else toks[sus], pl.Int64),
        ))
    cols = ["model", "revision", "tokens", "n_heads", "heads", "baseline_top1", "ablated_top1", "random_top1_mean",
            "effect", "random_effect_mean", "effect_vs_random", "p_value", "causal", "verdict", "chance_top1",
            "n_sequences", "baseline_top1_lo", "baseline_top1_hi", "copy_null_top1", "copy_null_lo", "copy_null_hi",
            "copy_other_top1", "copy_null_p", "above_copy_null",
            "induction_present", "destroys_induction",
            "onset_revision", "onset_tokens", "sustained_onset_revision", "sustained_onset_tokens"]
    if not parts:
        return pl.DataFrame(schema={c: pl.String for c in cols})
    return pl.concat(parts).select(cols)
