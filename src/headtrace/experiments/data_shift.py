"""Data shift (paper A): does the induction circuit survive continued training on a second corpus?

``data_shift_table``: the base model's revisions are phase ``before``, the shift model's are
``after``; ``tokens`` of the after phase = base final tokens + tokens since the shift.
``circuit`` is each revision's induction circuit (``in_induction_circuit``), compared to the base
model's final (pre-shift) circuit by Jaccard, beside the within-layer permutation null
(``headtrace.findings.agreement``: ``jaccard_chance`` its mean, ``jaccard_p_value`` P(J_null >= J)). ``data_shift_heads``: per head and revision across
the shift, induction selectivity and PR.

**Behaviour beside the heads.** The heads can stay while what they do changes, so with ``verdicts``
(the verdict tables of both models' cells) every row also carries what the probe shows at that
revision (:func:`behaviour_columns`): the unablated model's top-1 on B (``baseline_top1``) with its
95% Wilson interval over the ``n_sequences`` of the ablation probe (``baseline_top1_lo`` / ``_hi``,
as ``composition``'s), and for the induction circuit (``circuit_*``) and the previous-token circuit
(``previous_token_*``) the top-1 after ablating it, the effect on the verdict's decision metric
(``*_metric``) with its bootstrap interval (``*_effect_lo`` / ``_hi``), and the verdict. Where both
models ablate on one draw of the probe (``ablation_probe_sha256``, recorded; ``ablation_probe`` says
whether it is held out from the screen), before and after are the same sequences; the table holds no per-sequence hits, so the change is not tested as a paired
difference: :func:`behaviour_change` calls it only where the two intervals do not overlap (a
conservative reading). Without ``verdicts`` (no ablation) these columns are null.

**What survives, decided here** (:func:`survival_columns`; the report only words these columns), on
every row against the pre-shift circuit: ``heads_kept`` (the same heads: Jaccard 1), ``heads_overlap_by_chance``
(``jaccard_p_value`` above the package's alpha: placement within the layers alone gives that
overlap), ``selectivity_kept`` (the pre-shift heads' mean induction selectivity at or above
``induction_threshold``, the screen's circuit threshold, recorded), ``behaviour_change`` (the
after-phase rows against the last pre-shift revision, :func:`behaviour_change`) and, per ablation,
``*_raises_top1`` (ablating it raised top-1: its top-1 effect interval wholly below zero).
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from headtrace.core.heads import as_heads, head_name, jaccard
from headtrace.findings import agreement
from headtrace.experiments.composition import wilson_interval
from headtrace.experiments.seeds import circuit_of

# (column prefix, verdict row's circuit): the two ablations reported across the shift
ABLATIONS = (("circuit", "circuit"), ("previous_token", "previous_token_circuit"))
BEHAVIOUR_TYPES = {"n_sequences": pl.Int64, "baseline_top1": pl.Float64, "baseline_top1_lo": pl.Float64,
                   "baseline_top1_hi": pl.Float64, "ablation_probe": pl.String, "ablation_probe_sha256": pl.String,
                   **{f"{p}_{k}": t for p, _ in ABLATIONS for k, t in (
                       ("n_heads", pl.Int64), ("ablated_top1", pl.Float64), ("metric", pl.String),
                       ("baseline_value", pl.Float64), ("effect", pl.Float64), ("effect_lo", pl.Float64),
                       ("effect_hi", pl.Float64), ("verdict", pl.String))}}


SURVIVAL_TYPES = {"induction_threshold": pl.Float64, "heads_kept": pl.Boolean, "heads_overlap_by_chance": pl.Boolean,
                  "selectivity_kept": pl.Boolean, "behaviour_change": pl.String,
                  **{f"{p}_raises_top1": pl.Boolean for p, _ in ABLATIONS}}


def data_shift_table(base: pl.DataFrame, shifted: pl.DataFrame, base_final_tokens: int | None = None,
                     verdicts: pl.DataFrame | None = None, *, induction_threshold: float = 50.0,
                     alpha: float = agreement.ALPHA) -> pl.DataFrame:
    """``data_shift`` rows from two trajectories (base model = before, shift model = after); with
    ``verdicts`` (both models' verdict rows), the behaviour columns of :func:`behaviour_columns`; on
    every row, what survives (:func:`survival_columns`) at the screen's ``induction_threshold`` and the
    Jaccard null's ``alpha``."""
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
                         "pre_shift_heads_sel_induction": float(np.mean(pre_sel)) if pre_sel else math.nan,
                         **behaviour_columns(verdicts, traj["model"][0], rev)})
    last_before = next((r for r in rows if r["phase"] == "before" and r["revision"] == final_rev), {})
    rows = [{**r, **survival_columns(r, last_before if r["phase"] == "after" else None, bool(pre),
                                     induction_threshold, alpha)} for r in rows]
    return pl.DataFrame(rows, schema_overrides={"circuit": pl.List(pl.String), "pre_shift_circuit": pl.List(pl.String),
                                                "tokens": pl.Int64, "tokens_since_shift": pl.Int64,
                                                "jaccard_chance": pl.Float64, "jaccard_p_value": pl.Float64,
                                                **BEHAVIOUR_TYPES, **SURVIVAL_TYPES})


def survival_columns(row: dict, last_before: dict | None, has_circuit: bool, induction_threshold: float,
                     alpha: float) -> dict:
    """What of the pre-shift circuit survives at ``row`` (module docstring): the heads (Jaccard 1, and
    whether the within-layer null gives that overlap: its P above ``alpha``), their mean induction
    selectivity against ``induction_threshold``, the behaviour against ``last_before`` (the last
    pre-shift row; None for a row before the shift: null) and whether each ablation raised top-1.
    Null where there is nothing to decide: no pre-shift circuit, no null, no selectivity, no top-1."""
    j, p, sel = row.get("jaccard_to_pre_shift"), row.get("jaccard_p_value"), row.get("pre_shift_heads_sel_induction")
    measured = sel is not None and not math.isnan(sel)
    return {"induction_threshold": float(induction_threshold),
            "heads_kept": (j == 1) if has_circuit and j is not None and not math.isnan(j) else None,
            "heads_overlap_by_chance": None if p is None else bool(p > alpha),
            "selectivity_kept": bool(sel >= induction_threshold) if has_circuit and measured else None,
            "behaviour_change": None if last_before is None else behaviour_change(last_before, row),
            **{f"{prefix}_raises_top1": raises_top1(row, prefix) for prefix, _ in ABLATIONS}}


def raises_top1(row: dict, prefix: str) -> bool | None:
    """Ablating the ``prefix`` circuit raised top-1: its decision metric is top-1 and the effect's
    interval lies wholly below zero; None when that circuit was not ablated at this revision."""
    if row.get(f"{prefix}_n_heads") is None:
        return None
    hi = row.get(f"{prefix}_effect_hi")
    return row.get(f"{prefix}_metric") == "top1" and hi is not None and hi < 0


def behaviour_columns(verdicts: pl.DataFrame | None, model: str, revision: str) -> dict:
    """What the probe shows at one revision (module docstring), from its verdict rows; every value
    None when the cell has none (not ablated)."""
    out = dict.fromkeys(BEHAVIOUR_TYPES)
    if verdicts is None or not verdicts.height:
        return out
    cell = verdicts.filter((pl.col("model") == model) & (pl.col("revision") == revision))
    rows = {r["circuit"]: r for r in cell.iter_rows(named=True)}
    if not rows:
        return out
    first = next(iter(rows.values()))
    n = first.get("n_sequences")
    b = first.get("baseline_top1")
    lo, hi = wilson_interval(float(b), int(n)) if (n and b is not None) else (None, None)
    out.update(n_sequences=n, baseline_top1=b, baseline_top1_lo=lo, baseline_top1_hi=hi,
               ablation_probe=first.get("ablation_probe"), ablation_probe_sha256=first.get("ablation_probe_sha256"))
    for prefix, name in ABLATIONS:
        r = rows.get(name)
        if r is None:
            continue
        out.update({f"{prefix}_n_heads": r.get("n_heads"), f"{prefix}_ablated_top1": r.get("ablated_top1"),
                    f"{prefix}_metric": r.get("metric") or "top1",
                    f"{prefix}_baseline_value": r.get("baseline_value", b),
                    f"{prefix}_effect": r.get("effect"), f"{prefix}_effect_lo": r.get("effect_lo"),
                    f"{prefix}_effect_hi": r.get("effect_hi"),
                    f"{prefix}_verdict": r.get("verdict") or ("causal" if r.get("causal") else "not_causal")})
    return out


def behaviour_change(before: dict, after: dict) -> str | None:
    """How the unablated top-1 moved from row ``before`` to row ``after``: ``"fell"`` / ``"rose"`` when
    their Wilson intervals do not overlap, ``"overlap"`` when they do (no change shown: the table
    cannot test a paired difference), None when either row has no top-1."""
    keys = ("baseline_top1", "baseline_top1_lo", "baseline_top1_hi")
    if any(before.get(k) is None or after.get(k) is None for k in keys):
        return None
    if after["baseline_top1_hi"] < before["baseline_top1_lo"]:
        return "fell"
    if after["baseline_top1_lo"] > before["baseline_top1_hi"]:
        return "rose"
    return "overlap"


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
