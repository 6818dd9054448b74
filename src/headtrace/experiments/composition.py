"""Composition (paper A): when does ablating the previous-token circuit destroy induction?

``composition_table``: per revision, the ``previous_token_circuit`` verdict row (ablation of the
previous-token circuit, against ``previous_token_matched_random``). Induction is *present*
(``induction_present``) when the baseline top-1 is at least ``min_baseline_ratio`` x chance, chance
= 1 / (number of distinct probe tokens) of the model's probe (``chance`` per model);
``destroys_induction`` = induction present AND the verdict is causal
(``headtrace.causal.verdict.destroys_induction``). ``onset`` = the first such revision;
``sustained_onset`` = the first revision from which it holds at every later revision.
"""
from __future__ import annotations

from typing import Mapping

import polars as pl

from headtrace.causal.verdict import destroys_induction, induction_present


def composition_table(verdicts: pl.DataFrame, chance: float | Mapping[str, float],
                      min_baseline_ratio: float = 10.0) -> pl.DataFrame:
    """Per model x revision: the previous-token-circuit ablation against its matched-random control,
    ``induction_present``, ``destroys_induction``, and per model ``onset`` / ``sustained_onset``
    (revision and tokens). ``chance``: chance top-1 (``verdict.chance_top1`` of the probe's token
    range), one number or per model."""
    v = verdicts.filter(pl.col("circuit") == "previous_token_circuit")
    v = v.with_columns(random_top1_mean=(pl.col("random_top1_mean") if "random_top1_mean" in v.columns
                                         else pl.col("baseline_top1") - pl.col("random_effect_mean")))
    if "verdict" not in v.columns:  # tables from before the three-way verdict
        v = v.with_columns(verdict=pl.when(pl.col("causal")).then(pl.lit("causal")).otherwise(pl.lit("not_causal")))
    v = v.sort("model", "tokens", nulls_last=True)
    models = v["model"].to_list()
    missing = sorted({m for m in models if isinstance(chance, Mapping) and m not in chance})
    if missing:
        raise ValueError(f"composition: no chance top-1 for model(s) {missing}")
    ch = [float(chance[m]) if isinstance(chance, Mapping) else float(chance) for m in models]
    base = v["baseline_top1"].to_numpy()
    present = [bool(induction_present(b, c, min_baseline_ratio)) for b, c in zip(base, ch)]
    destroys = [bool(destroys_induction(d, b, c, min_baseline_ratio))
                for d, b, c in zip(v["verdict"].to_list(), base, ch)]
    v = v.with_columns(chance_top1=pl.Series(ch, dtype=pl.Float64),
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
            "induction_present", "destroys_induction",
            "onset_revision", "onset_tokens", "sustained_onset_revision", "sustained_onset_tokens"]
    if not parts:
        return pl.DataFrame(schema={c: pl.String for c in cols})
    return pl.concat(parts).select(cols)
