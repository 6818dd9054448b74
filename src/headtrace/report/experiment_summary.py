"""Prose of the method experiments for ``summary.md``: one paragraph per experiment, stating what
this panel shows next to the paper's numbers (markdown). Token counts as ``summary.fmt_tokens``.
"""
from __future__ import annotations

import polars as pl

import math

from headtrace.core import metrics
from headtrace.core.rounding import fmt_p, fmt_share_bound
from headtrace.report.format import fmt_tokens
from headtrace.report.verdicts import effect_text, say


def summary_markdown(cross_seed: pl.DataFrame | None = None, data_shift: pl.DataFrame | None = None,
                     composition: pl.DataFrame | None = None, noise_floor: pl.DataFrame | None = None) -> str:
    """One paragraph per experiment, stating what this panel shows (markdown), as the experiments'
    tables decided it (``seed_specificity``: ``experiments.seeds``; the data shift's survival columns;
    the noise floor's ``quantile``, ``class_threshold`` and ``init_null_narrow``: ``experiments.noise_floor``)."""
    out = ["## Method experiments (paper A)", ""]
    # seed specificity
    if cross_seed is not None and cross_seed.height:
        own = cross_seed.filter(pl.col("same_seed"))
        other = cross_seed.filter(~pl.col("same_seed"))
        seeds = sorted(set(cross_seed["model_seed"].to_list()))
        circ = {r["circuit_seed"]: ",".join(r["circuit"]) or "∅" for r in own.iter_rows(named=True)}
        jac = other["jaccard"].drop_nans().drop_nulls()
        own_ex, own_n = _excess(own)
        other_ex, other_n = _excess(other)
        call = cross_seed["seed_specificity"][0]  # decided in experiments.seeds.seed_specificity
        if call == "no_circuit":
            verdict = "No seed has an induction circuit at its final revision, so there is nothing to compare. "
        elif call == "undecidable":
            which = " and ".join(w for w, x in (("own", own_ex), ("foreign", other_ex)) if x is None)
            verdict = (f"Seed specificity is undecidable: no reference draws for the {which} circuits, so there is "
                       "no excess over the reference set to compare. ")
        elif call == "specific":
            verdict = "Circuits differ by seed and a foreign circuit hurts far less than the own one, as in the paper. "
        else:
            verdict = ("Unlike the paper's 51M models, the circuits here are not clearly seed-specific (with few heads "
                       "per layer, seeds can land on the same heads), so a foreign circuit can hurt like the own one. ")
        out.append(
            f"**Seed specificity.** {len(seeds)} seeds of `{own['model'][0]}`; final induction "
            f"circuits: " + "; ".join(f"seed {s}: {circ.get(s, '?')}" for s in seeds) + ". "
            f"Ablating a model's own circuit drops top-1(B) by "
            f"{100 * own['top1_drop'].mean():.1f} pp on average ({_beyond(own_ex, own_n, own.height)}); "
            f"another seed's circuit drops it by {100 * other['top1_drop'].mean():.1f} pp "
            f"({_beyond(other_ex, other_n, other.height)}). Mean cross-seed Jaccard "
            f"{jac.mean() if jac.len() else float('nan'):.2f}. " + _controls(cross_seed) + verdict
            + "(`results/experiments/cross_seed_ablation.parquet`)")
        out.append("")
    # data shift
    if data_shift is not None and data_shift.height:
        out.append(data_shift_paragraph(data_shift))
        out.append("")
    # composition
    if composition is not None and composition.height:
        parts = []
        for (m,), g in composition.group_by("model", maintain_order=True):
            on = g["onset_revision"][0]
            sus = g["sustained_onset_revision"][0]
            last = g.sort("tokens").row(-1, named=True)
            null = ("" if last.get("copy_null_top1") is None else
                    f" (at {last['revision']}: top-1 B {100 * last['baseline_top1']:.2f}% vs its shuffled-B control "
                    f"{100 * last['copy_null_top1']:.2f}%, sign test p = {fmt_p(last['copy_null_p'])}; another context "
                    f"token {100 * last['copy_other_top1']:.2f}%)")
            parts.append(f"`{m}`: " + ("never" if on is None else
                         f"from {on} ({fmt_tokens(g['onset_tokens'][0])} tokens)"
                         + ("" if sus == on else f", for good from {sus or 'never'}")) + null)
        measured = "copy_null_p" in composition.columns and composition["copy_null_p"].drop_nulls().len() > 0
        null_txt = (" and B the top-1 more often than a shuffled-B control token of the same context, by an exact "
                    "sign test at the verdicts' alpha: the measured copying null" if measured else "")
        out.append(
            "**Composition.** Revisions at which ablating the previous-token circuit (best class previous-token "
            "≥ 100×) destroys induction (causal against its reference set; induction present: baseline "
            "top-1 ≥ min_baseline_ratio × chance" + null_txt + "): "
            + "; ".join(parts) + ". (`results/experiments/composition.parquet`)")
        out.append("")
    # noise floor
    if noise_floor is not None and noise_floor.height:
        first = noise_floor.row(0, named=True)  # recorded and decided on every row (experiments.noise_floor)
        cut = f"{first['class_threshold']:g}×"
        parts = []
        for (m,), g in noise_floor.filter(pl.col("class") == "any").group_by("model", maintain_order=True):
            g = g.sort("tokens")
            gi = noise_floor.filter((pl.col("model") == m) & (pl.col("class") == "induction")).sort("tokens")
            parts.append(f"`{m}` {100 * g['fraction_above'][-1]:.1f}% of heads above the floor of some class vs "
                         f"{100 * g['fraction_classified'][-1]:.1f}% classified at ≥ {cut}; induction alone "
                         f"{100 * gi['fraction_above'][-1]:.1f}% above its floor ({gi['floor'][-1]:.3g}×) vs "
                         f"{100 * gi['fraction_classified'][-1]:.1f}% at ≥ {cut}")
        narrow = ("Random-init heads attend almost uniformly, so the init null is narrow (floors near 1×) and "
                  "any trained head that departs from uniform attention crosses it: the above-floor fraction is an "
                  f"upper bound, the {cut} count a lower one. ")
        q = first["quantile"]
        out.append(
            "**Specialized fraction and noise floor.** Floor = "
            + ("a high percentile" if q is None else f"the {100 * q:g}th percentile") + " of a null of "
            "selectivities (random-init heads; position-shuffled probe for the content classes). At the final "
            "revision: " + "; ".join(parts) + ". Paper: ~17–19% over 124M–410M, 4.7–27.3% at 1B. "
            + (narrow if first["init_null_narrow"] else "")
            + "(`results/experiments/noise_floor.parquet`)")
        out.append("")
    return "\n".join(out) + "\n"


def data_shift_paragraph(data_shift: pl.DataFrame) -> str:
    """The data-shift paragraph: the heads across the shift (Jaccard beside its null), their
    selectivity, and beside them the behaviour (the unablated top-1 before and after, with intervals,
    and what the two ablations did after the shift); then one sentence saying what survives and
    what does not, as the table's decisions (``experiments.data_shift.survival_columns``) say."""
    before = data_shift.filter(pl.col("phase") == "before").sort("tokens")
    # the shift run's first checkpoint at 0 tokens since the shift is the base's final weights, not a
    # post-shift observation: it is left out of the post-shift counts
    after = data_shift.filter((pl.col("phase") == "after")
                              & ~(pl.col("tokens_since_shift").fill_null(1) == 0)).sort("tokens")
    pre = data_shift["pre_shift_circuit"][0].to_list()
    j_end = after["jaccard_to_pre_shift"][-1] if after.height else float("nan")
    j_min = after["jaccard_to_pre_shift"].drop_nans().min() if after.height else float("nan")
    b_last = before.row(-1, named=True) if before.height else {}
    a_last = after.row(-1, named=True) if after.height else {}
    sel_before, sel_after = b_last.get("pre_shift_heads_sel_induction"), a_last.get("pre_shift_heads_sel_induction")
    text = (
        f"**Data shift.** `{after['model'][0] if after.height else '?'}` continues the final checkpoint of "
        f"`{before['model'][0] if before.height else '?'}` on a second corpus for "
        f"{fmt_tokens(after['tokens_since_shift'].max() if after.height else None)} tokens. Pre-shift induction circuit: "
        f"{', '.join(pre) or '∅'}; after the shift: {', '.join(after['circuit'][-1].to_list()) if after.height else '?'} "
        f"(Jaccard {j_end:.2f} at the end" + (f", minimum {j_min:.2f} over the {after.height} post-shift checkpoints"
                                               if after.height > 1 and j_min is not None else
                                               f", {after.height} post-shift checkpoint")
        + f"; paper: 1.00, FineWeb → OpenWebText){_chance(after)}. "
        + (f"The pre-shift heads' mean induction selectivity goes from {sel_before:.3g}× before the shift to "
           f"{sel_after:.3g}× at the end (circuit threshold: induction selectivity ≥ {a_last['induction_threshold']:g}×). "
           if pre and after.height else ""))
    text += _behaviour(b_last, a_last)
    text += _survives(pre, j_end, sel_before, sel_after, b_last, a_last)
    return text + "(`results/experiments/data_shift.parquet`)"


def _excess(g: pl.DataFrame) -> tuple[float | None, int]:
    """Mean excess drop over the reference set of the rows that had reference draws (NaN: none), and
    how many rows that is; (None, 0) when no row had any."""
    x = g["top1_drop_vs_random"].fill_nan(None).drop_nulls()
    return (float(x.mean()) if x.len() else None), x.len()


def _beyond(mean: float | None, n: int, total: int) -> str:
    if mean is None:
        return "beyond the reference set: undecidable, no reference draws"
    return f"{100 * mean:+.1f} pp beyond the reference set" + ("" if n == total else f", over the {n} of {total} "
                                                              "pairs with reference draws")


def _controls(cross_seed: pl.DataFrame) -> str:
    """How the cross-seed reference sets were evaluated: exact (every set) or sampled (draws)."""
    if "control_exact" not in cross_seed.columns:
        return ""
    ex = cross_seed["control_exact"]
    n_exact, n_sampled = int((ex == True).sum()), int((ex == False).sum())  # noqa: E712
    if not n_exact + n_sampled:
        return ""
    return (f"Reference sets: {n_exact} exact (every set of the circuit's shape in its layers), {n_sampled} sampled"
            + ("" if n_exact + n_sampled == cross_seed.height else
               f", {cross_seed.height - n_exact - n_sampled} without reference draws") + ". ")


def _chance(after: pl.DataFrame) -> str:
    """'; by placement within the layers alone 0.78, P = 1: no more than chance' for the last checkpoint
    (``heads_overlap_by_chance``, decided in ``experiments.data_shift``)."""
    if not after.height or "jaccard_chance" not in after.columns or after["jaccard_chance"][-1] is None:
        return ""
    p = after["jaccard_p_value"][-1]
    return (f"; by placement within the layers alone {after['jaccard_chance'][-1]:.2f}, P = {fmt_p(p)}: "
            + ("no more than chance" if after["heads_overlap_by_chance"][-1] else "beyond chance"))


def _pct(x) -> str:
    return "?" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


def _pct_interval(lo, hi) -> str:
    """' [53.8%, 70.5%]': a 95% interval of a share, its ends rounded outward to 0.1 pp
    (:func:`headtrace.core.rounding.fmt_share_bound`)."""
    if lo is None or hi is None:
        return ""
    return f" [{fmt_share_bound(lo, 'lo', 1)}, {fmt_share_bound(hi, 'hi', 1)}]"


def _top1(row: dict) -> str:
    return _pct(row.get("baseline_top1")) + _pct_interval(row.get("baseline_top1_lo"), row.get("baseline_top1_hi"))


def _ablation(row: dict, prefix: str, name: str) -> str:
    """'ablating the previous-token circuit (4 heads) takes top-1 to 53.91% (effect on top-1 -14.84 pp
    [-21.88, -8.59] ...; verdict: not causal)'; '' when that circuit was not ablated."""
    n = row.get(f"{prefix}_n_heads")
    if n is None:
        return ""
    if not n:
        return f"there is no {name} to ablate"
    metric = row.get(f"{prefix}_metric") or "top1"
    v = {"metric": metric, "effect": row.get(f"{prefix}_effect"), "effect_lo": row.get(f"{prefix}_effect_lo"),
         "effect_hi": row.get(f"{prefix}_effect_hi"), "baseline_value": row.get(f"{prefix}_baseline_value")}
    raises = row.get(f"{prefix}_raises_top1")  # decided in experiments.data_shift
    verdict = say(row.get(f"{prefix}_verdict") or "?")
    if raises:  # said as the rise it is, its interval wholly above zero
        up = dict(v, effect=-v["effect"], effect_lo=-v["effect_hi"], effect_hi=-v["effect_lo"])
        return (f"ablating the {name} ({n} heads) takes top-1 to {_pct(row.get(f'{prefix}_ablated_top1'))}: it "
                f"*raises* top-1, by {effect_text(up)}, the whole interval above zero; verdict {verdict}")
    return (f"ablating the {name} ({n} heads) takes top-1 to {_pct(row.get(f'{prefix}_ablated_top1'))}, "
            f"effect on {metrics.words(metric)} {effect_text(v)}, verdict {verdict}")


def _behaviour(b_last: dict, a_last: dict) -> str:
    """The probe's top-1 before and after, and what the ablations did after the shift."""
    if a_last.get("baseline_top1") is None:
        return ("The behaviour was not measured (no verdict tables: the ablation did not run), so only the "
                "heads are compared. ")
    n = a_last.get("n_sequences")
    same = (b_last.get("ablation_probe_sha256") is not None
            and b_last.get("ablation_probe_sha256") == a_last.get("ablation_probe_sha256"))
    held = " held-out" if a_last.get("ablation_probe") == "held_out" else ""
    probe = (f"on the same {n}{held} probe sequences before and after" if same else f"on {n}{held} probe sequences")
    abl = [t for t in (_ablation(a_last, "circuit", "induction circuit"),
                       _ablation(a_last, "previous_token", "previous-token circuit")) if t]
    return (f"Behaviour, {probe} (95% Wilson intervals): the unablated model's top-1 on B is "
            + (f"{_top1(b_last)} at the last pre-shift checkpoint ({b_last['revision']}) and " if
               b_last.get("baseline_top1") is not None else "")
            + f"{_top1(a_last)} at the end ({a_last['revision']})"
            + (f"; there, {'; '.join(abl)}" if abl else "") + ". ")


def _survives(pre: list, j_end, sel_before, sel_after, b_last: dict, a_last: dict) -> str:
    """What survives the shift and what does not, each part as the last post-shift row's decisions say
    (``heads_kept``, ``heads_overlap_by_chance``, ``selectivity_kept`` at its ``induction_threshold``,
    ``behaviour_change``, ``previous_token_raises_top1``: ``experiments.data_shift.survival_columns``)."""
    if not pre:
        return "There was no pre-shift circuit to track. "
    kept, lost = [], []
    undecided = None
    same, chance = a_last.get("heads_kept") is True, a_last.get("heads_overlap_by_chance") is True
    threshold = a_last.get("induction_threshold")
    if same and chance:  # the same heads, but placement within the layers gives that overlap by chance
        undecided = ("whether the heads survived is not shown: they are the same heads, but placement within the "
                     "layers alone gives that overlap")
    elif same:
        kept.append("the same heads")
    else:
        lost.append(f"the circuit's heads (Jaccard {j_end:.2f} at the end)")
    whose = "the pre-shift circuit heads'" if undecided else "their"  # 'their' only after a clause on the heads
    if a_last.get("selectivity_kept") is not None:
        if a_last["selectivity_kept"]:
            kept.append(f"{whose} induction selectivity ({sel_before:.3g}× → {sel_after:.3g}×, above the {threshold:g}× "
                        "threshold)")
        else:
            lost.append(f"{whose} induction selectivity ({sel_before:.3g}× → {sel_after:.3g}×, below the {threshold:g}× "
                        "threshold)")
    change = a_last.get("behaviour_change")
    move = f"top-1 on B from {_pct(b_last.get('baseline_top1'))} to {_pct(a_last.get('baseline_top1'))}"
    raised = a_last.get("previous_token_raises_top1") is True
    if change == "fell":
        lost.append(f"the behaviour ({move}, the intervals apart" + (
            "; and ablating the previous-token circuit now raises top-1)" if raised else ")"))
    elif change in ("rose", "overlap"):
        kept.append(f"the behaviour ({move}, " + ("the intervals apart" if change == "rose" else
                                                 "within overlapping intervals: no change shown") + ")")
        if raised:
            lost.append("the previous-token circuit's part in it (ablating it now raises top-1)")
    out = ("What survives the shift: " + " and ".join(kept) + ". ") if kept else (
        "" if undecided else "Nothing of the circuit survives the shift. ")
    if lost:
        out += "What does not: " + "; ".join(lost) + ". "
    if undecided:
        out += undecided[0].upper() + undecided[1:] + ". "
    if change is None:
        out += "Whether the behaviour survives is not measured here. "
    return out
