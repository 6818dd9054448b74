"""Data shift (paper A): does the induction circuit survive continued training on a second corpus?

``data_shift_table``: the base model's revisions are phase ``before``, the shift model's are
``after``; ``tokens`` of the after phase = base final tokens + tokens since the shift.
``circuit`` is each revision's induction circuit (``in_induction_circuit``), compared to the base
model's final (pre-shift) circuit by Jaccard, beside the within-layer permutation null
(``headtrace.findings.agreement``: ``jaccard_chance`` its mean, ``jaccard_p_value`` P(J_null >= J)). ``data_shift_heads``: per head and revision across
the shift, induction selectivity and PR.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from headtrace.core.heads import as_heads, head_name, jaccard
from headtrace.findings import agreement
from headtrace.experiments.seeds import circuit_of


def data_shift_table(base: pl.DataFrame, shifted: pl.DataFrame, base_final_tokens: int | None = None) -> pl.DataFrame:
    """``data_shift`` rows from two trajectories (base model = before, shift model = after)."""
    base_revs = base.select("revision", "tokens").unique(maintain_order=True).sort("tokens", nulls_last=True)
    final_rev = base_revs["revision"][-1]
    pre = circuit_of(base, final_rev)
    n_heads = agreement.heads_per_layer(base)
    if base_final_tokens is None:
        base_final_tokens = int(base_revs["tokens"][-1] or 0)
    rows = []
    shift_tokens = [t for t in shifted["tokens"].to_list() if t is not None]
    # After-phase tokens counted from the shift (explicit specs) get the base's final tokens added;
    # cumulative ones (expand_models) are kept.
    offset = base_final_tokens if shift_tokens and min(shift_tokens) < base_final_tokens else 0
    for phase, traj in (("before", base), ("after", shifted)):
        revs = traj.select("revision", "tokens").unique(maintain_order=True).sort("tokens", nulls_last=True)
        for rev, tok in revs.iter_rows():
            c = circuit_of(traj, rev)
            total = (tok if phase == "before" else (None if tok is None else offset + tok))
            cell = traj.filter(pl.col("revision") == rev)
            pre_sel = [float(v) for l, h, v in cell.select("layer", "head", "sel_induction").iter_rows()
                       if (l, h) in set(pre) and v is not None]
            null = agreement.jaccard_null(c, pre, n_heads) if n_heads else {}
            rows.append({"model": traj["model"][0], "revision": rev, "tokens": total, "phase": phase,
                         "circuit": [head_name(*h) for h in c], "jaccard_to_pre_shift": jaccard(c, pre),
                         "jaccard_chance": null.get("null_mean"), "jaccard_p_value": null.get("p_value"),
                         "tokens_since_shift": None if (phase == "before" or total is None) else total - base_final_tokens,
                         "n_circuit": len(c),
                         "pre_shift_circuit": [head_name(*h) for h in pre],
                         "recall_pre_shift": (len(set(c) & set(pre)) / len(pre)) if pre else math.nan,
                         "pre_shift_heads_sel_induction": float(np.mean(pre_sel)) if pre_sel else math.nan})
    return pl.DataFrame(rows, schema_overrides={"circuit": pl.List(pl.String), "pre_shift_circuit": pl.List(pl.String),
                                                "tokens": pl.Int64, "tokens_since_shift": pl.Int64,
                                                "jaccard_chance": pl.Float64, "jaccard_p_value": pl.Float64})


def data_shift_heads(base: pl.DataFrame, shifted: pl.DataFrame, base_final_tokens: int | None = None) -> pl.DataFrame:
    """Per head and revision across the shift: induction selectivity and PR, with cumulative tokens."""
    table = data_shift_table(base, shifted, base_final_tokens)
    pre = set(as_heads(table["pre_shift_circuit"][0]))
    after_tokens = dict(table.filter(pl.col("phase") == "after").select("revision", "tokens").iter_rows())
    out = []
    for phase, traj in (("before", base), ("after", shifted)):
        t = traj.select("model", "revision", "tokens", "layer", "head", "sel_induction", "pr", "in_induction_circuit")
        t = t.with_columns(phase=pl.lit(phase))
        if phase == "after":
            t = t.with_columns(tokens=pl.col("revision").replace_strict(after_tokens, return_dtype=pl.Int64))
        out.append(t)
    df = pl.concat(out, how="diagonal_relaxed")
    return df.with_columns(in_pre_shift_circuit=pl.struct("layer", "head").map_elements(
        lambda s: (s["layer"], s["head"]) in pre, return_dtype=pl.Boolean))
