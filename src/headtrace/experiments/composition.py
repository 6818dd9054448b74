"""Composition (paper A): when does ablating the previous-token circuit destroy induction?

``composition_table``: per revision, the ``previous_token_circuit`` verdict row (ablation of the
previous-token circuit, against ``previous_token_matched_random``). ``destroys_induction`` = the
verdict's causal rule holds AND the baseline top-1 is at least ``min_baseline_top1`` (there is
induction to destroy). ``onset`` = the first such revision; ``sustained_onset`` = the first
revision from which it holds at every later revision.
"""
from __future__ import annotations

import polars as pl


def composition_table(verdicts: pl.DataFrame, min_baseline_top1: float = 0.05) -> pl.DataFrame:
    """Per model x revision: the previous-token-circuit ablation against its matched-random control,
    ``destroys_induction``, and per model ``onset`` / ``sustained_onset`` (revision and tokens)."""
    v = verdicts.filter(pl.col("circuit") == "previous_token_circuit")
    v = v.with_columns(random_top1_mean=(pl.col("random_top1_mean") if "random_top1_mean" in v.columns
                                         else pl.col("baseline_top1") - pl.col("random_effect_mean")))
    v = v.sort("model", "tokens", nulls_last=True)
    v = v.with_columns(destroys_induction=(pl.col("causal") & (pl.col("baseline_top1") >= min_baseline_top1)))
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
            "effect", "random_effect_mean", "effect_vs_random", "p_value", "causal", "destroys_induction",
            "onset_revision", "onset_tokens", "sustained_onset_revision", "sustained_onset_tokens"]
    if not parts:
        return pl.DataFrame(schema={c: pl.String for c in cols})
    return pl.concat(parts).select(cols)
