"""results/findings/summary.md: Paper B's findings as readable markdown tables.

Layout follows the author's ``developmental_note.md`` (per-layer first-token counts, first-token
fraction by tokens, milestones, recall of the final circuit, a worked PR-lead example), computed
from the trajectory table by ``headtrace.findings.trajectory``. Notes where our definitions or the data
differ from the published tables are generated from the data (no published number is stored here).
One section renderer per finding (F1-F5, F2b, refinement, provenance warning); the findings
tables themselves come from the findings job (:mod:`headtrace.findings.compute`).
"""
from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from headtrace.core import tables
from headtrace.core.rounding import fmt_p
from headtrace.findings import trajectory as T
from headtrace.models import provenance
from headtrace.report import copying
from headtrace.report import empty_case as EC
from headtrace.report import first_screen as FS
from headtrace.report import strongest
from headtrace.report.format import fmt_bound, fmt_ratio, fmt_tokens


def bound_label(lo: float | None, hi: float | None) -> str:
    """A ratio as the checkpoints bound it, ends rounded outward (``format.fmt_bound``): "5.1–27×"
    (interval), "≥ 1.0×" (lower bound only), "≤ 3.0×" (upper bound only) or "unknown"."""
    lo = None if lo is None or lo != lo else lo
    hi = None if hi is None or hi != hi else hi
    if lo is not None and hi is not None:
        return f"{fmt_bound(lo, 'lo', unit='')}–{fmt_bound(hi, 'hi')}"
    if lo is not None:
        return f"≥ {fmt_bound(lo, 'lo')}"
    if hi is not None:
        return f"≤ {fmt_bound(hi, 'hi')}"
    return "unknown"


def render(traj: pl.DataFrame, findings: dict[str, pl.DataFrame], *, class_threshold: float,
           induction_threshold: float, found_threshold: float | None = None, sharp_share: float,
           pr_rise_rule: str = "running_min_ratio", pr_rise_factor: float, spread_alpha: float,
           spread_permutations: int = 10000, spread_seed: int = 0, trend_factor: float | None = None,
           **milestones) -> str:
    """The whole summary.md text for the models in ``traj``. ``findings``: the tables of
    :func:`headtrace.findings.compute.all_findings`, computed by the findings job with the same
    parameters (never recomputed here), the thresholds among them given by the caller (the validated
    config's, as the findings job passes them: no default here); ``milestones`` (its ``induction_counts`` /
    ``first_token_fractions`` / ``gaps``) and ``trend_factor`` (the strongest heads' trend, read from
    its table) are accepted so the job passes one parameter set."""
    found = class_threshold if found_threshold is None else found_threshold
    F = findings
    # the title block: the first screen's models and baseline lines (report.first_screen, as on summary.html)
    head = ["# When do attention circuits form? — findings\n",
            FS.intro_line(_models(traj), class_threshold, induction_threshold) + "\n", FS.baseline_line(traj) + "\n"]
    head += _provenance_section(traj)
    return "\n".join(head + [
        _f1_section(F, traj, class_threshold),
        _f2_section(F, traj, class_threshold, sharp_share),
        _f2b_section(F, class_threshold, spread_alpha, spread_permutations),
        _f3_section(F, traj, induction_threshold),
        strongest.markdown(F.get("strongest_trend"), _models(traj)),  # below the thresholds, the trend
        _f4_section(F, traj, induction_threshold, found),
        _f5_section(F, traj, induction_threshold, pr_rise_rule, pr_rise_factor),
        _pr_section(F, traj, class_threshold),
        copying.markdown(F, _models(traj)),  # the circuit's prefix matching and copying (measures findings)
    ])


def write_findings(findings: dict[str, pl.DataFrame], out_dir) -> dict[str, Path]:
    """Write every findings table to ``out_dir/{schema}.parquet``; returns the paths."""
    paths = {}
    for name, df in findings.items():
        p = Path(out_dir) / f"{name}.parquet"
        tables.write(df, p, schema=name)
        paths[name] = p
    return paths


def _bracket(r: dict) -> str:
    """One milestone's checkpoint bracket (``f3_milestones``): "(lo, hi]", "≤ hi" or "> lo"."""
    if r["revision"] is None:
        return "never" if r.get("lo_revision") is None else f"never (> {fmt_tokens(r['lo_tokens'])})"
    hi = f"{fmt_tokens(r['tokens'])} ({r['revision']})"
    if r.get("left_censored"):
        return f"≤ {hi} (left-censored)"
    if r.get("lo_revision") is None:
        return hi
    return f"({fmt_tokens(r['lo_tokens'])}, {hi}]"


def _f3_bootstrap(ms: pl.DataFrame, boot: pl.DataFrame) -> str:
    """The onsets' bootstrap spread (``onsets.onset_intervals``) beside the point estimates."""
    rows, none = [], []
    for r in boot.iter_rows(named=True):
        if not r["n_resamples"]:
            if r["model"] not in none:
                none.append(r["model"])
            continue
        p = ms.filter((pl.col("model") == r["model"]) & (pl.col("milestone") == r["milestone"]))
        point = "never" if not p.height or p["revision"][0] is None else f"{fmt_tokens(p['tokens'][0])} ({p['revision'][0]})"
        side = (lambda rev, tok: "never" if rev is None else f"{fmt_tokens(tok)} ({rev})")
        rows.append([r["model"], r["milestone"], point, side(r["onset_lo_revision"], r["onset_lo_tokens"]),
                     side(r["onset_hi_revision"], r["onset_hi_tokens"]), _pct(r["p_reached"], 0)])
    if not rows and not none:
        return ""
    iv = boot["interval"].drop_nulls()
    level = f"{100 * iv[0]:g}%" if iv.len() else "—"
    out = [f"Onset uncertainty (bootstrap over the probe sequences, `f3_onset_bootstrap`): the {level} central "
           "range across resamples of the first revision reaching each milestone (same draws at every revision; "
           "*never*: that percentile is a resample that never reaches it within the screened revisions).\n"]
    if rows:
        out.append(_md(["model", "milestone", "point estimate", "bootstrap low", "bootstrap high", "resamples reaching it"],
                       rows, right={2, 3, 4, 5}) + "\n")
    if none:
        out.append(f"No bootstrap for {', '.join(none)}: no per-sequence masses (the published reference files hold "
                   "only the means), so these onsets have no interval.\n")
    return "\n".join(out)


def _f4_section(F: dict, traj: pl.DataFrame, induction_threshold: float, found_threshold: float) -> str:
    """Finding 4 as the findings job's tables hold it: the final circuit (``f4_final_circuit``) and the
    first revision at each recall level, a head found at the class threshold (``f4_recall_milestones``)
    and strictly at the circuit threshold (``f4_recall_milestones_strict``)."""
    fin = F["f4_final_circuit"]
    text = ["## Finding 4: recall of the final induction circuit over training\n\n"
            f"Final circuit = heads with `sel_induction ≥ {induction_threshold:g}×` at the last revision; "
            f"a head counts as found at a revision where its `sel_induction ≥ {found_threshold:g}×` "
            f"(strict variant: ≥ {induction_threshold:g}×, in the second table).\n"]
    for title, rm in (("found at the class threshold", F["f4_recall_milestones"]),
                      ("strict: found at the circuit threshold", F["f4_recall_milestones_strict"])):
        rows = []
        for m in _models(traj):
            heads = fin.filter(pl.col("model") == m)
            label = EC.f4_label(m, [tables.head_name(a, b) for a, b in zip(heads["layer"], heads["head"])])
            g = rm.filter(pl.col("model") == m).sort("level")
            cells = ["—" if r["revision"] is None else f"{r['revision']} ({fmt_tokens(r['tokens'])})"
                     for r in g.iter_rows(named=True)]
            share = g.filter(pl.col("level_label") == "67%")["token_share"]
            rows.append([label] + cells + [_pct(share[0]) if share.len() and share[0] is not None else "—"])
        levels = rm["level_label"].unique(maintain_order=True).to_list()
        text.append(f"*{title}*\n\n" + _md(["model"] + [f"first revision at {lv}" for lv in levels]
                                           + ["share of final tokens at 67%"], rows) + "\n")
    text.append(
        "Note on the published table (developmental_note.md, Finding 4): its 67% column is exactly the "
        "class-threshold rule above (first table). Its 33% and 100% columns follow from no single rule: the "
        "strict rule matches its 100% points for two of the three models but not for the 4-head circuit, "
        "and for two models its 33% points lie at revisions where every final-circuit head still has "
        "induction selectivity of order 1× (see `f4_recall`: no head found under either rule). We report what "
        "the data gives.\n")
    return "\n".join(text)


def _f5_section(F: dict, traj: pl.DataFrame, induction_threshold: float, rule: str, factor: float) -> str:
    lead = F["f5_pr_lead"]

    def event(rev, tok, lo_tok):
        if rev is None:
            return "—"
        return (f"≤ {fmt_tokens(tok)} ({rev})" if lo_tok is None
                else f"({fmt_tokens(lo_tok)}, {fmt_tokens(tok)}] ({rev})")

    def decision(r):
        if r.get("rise_ratio") is None:
            return "—" if r.get("max_prior_ratio") is None else f"best {r['max_prior_ratio']:.2f}× < {factor:g}×"
        prior = "" if r.get("max_prior_ratio") is None else f", before: {r['max_prior_ratio']:.2f}×"
        return f"{r['rise_ratio']:.2f}×{prior} (margin {r['rise_margin']:.2f})"
    rows = [[r["model"], tables.head_name(r["layer"], r["head"]),
             event(r["pr_rise_revision"], r["pr_rise_tokens"], r.get("pr_rise_lo_tokens")),
             event(r["selectivity_cross_revision"], r["selectivity_cross_tokens"], r.get("selectivity_cross_lo_tokens")),
             bound_label(r.get("lead_lo"), r.get("lead_hi")) if r["pr_rise_revision"] and r["selectivity_cross_revision"]
             else "—",
             "—" if r["lead_revisions"] is None else str(r["lead_revisions"]), decision(r)]
            for r in lead.iter_rows(named=True)]
    text = ["## Finding 5: PR rise vs induction-selectivity crossing\n\n"
            f"PR rise rule `{rule}` (factor {factor:g}; see `spectral_lead.pr_rise_index`); crossing = first "
            f"revision with `sel_induction ≥ {induction_threshold:g}×`; each event lies in its bracket "
            "(lo, hi] of checkpoints (≤ hi: met at the first revision). *lead* = crossing tokens / rise tokens as "
            "the brackets bound it (a lead below 1 in its range means the order is not resolved; the ratio of the two "
            "revisions, `lead_ratio` in `f5_pr_lead`, is one value inside it). *Rule ratio*: PR at the rise over the rule's reference, the largest such ratio "
            f"before it (each short of {factor:g}×), and the margin (min of rise / {factor:g} and {factor:g} / "
            "before; near 1 = the rise revision hinges on a few percent of PR).\n",
            _md(["model", "head", "PR rises", "selectivity crosses", "lead", "lead (revisions)",
                 "rule ratio"], rows) + "\n" if rows else EC.f5_empty_note(induction_threshold)]
    # worked example per model: the final-circuit head (f4_final_circuit) with the highest final selectivity
    o = T.with_rev_index(traj)
    for m in _models(traj):
        g = o.filter(pl.col("model") == m)
        top = (F["f4_final_circuit"].filter(pl.col("model") == m)
               .sort(["sel_induction", "layer", "head"], descending=[True, False, False]).head(1))
        if not top.height:
            continue
        L, H = top["layer"][0], top["head"][0]
        h = g.filter((pl.col("layer") == L) & (pl.col("head") == H)).sort("rev_index")
        rows = [["?" if t is None else f"{t / 1e9:.3f}", "—" if p is None else f"{p:.2f}",
                 "—" if s is None else f"{s:.1f}"]
                for t, p, s in zip(h["tokens"], h["pr"], h["sel_induction"])]
        text.append(f"Example, {m} {tables.head_name(L, H)} (final induction selectivity "
                    f"{top['sel_induction'][0]:.0f}×):\n\n" + _md(["tokens (B)", "PR", "induction sel"], rows) + "\n")
    text.append(
        "Notes: tokens here are exact (Pythia: step × 2,097,152); the author's trajectory files list "
        "tokens truncated to 3 decimals of a billion, hence last-digit differences. "
        "A null rise means no revision passes the rule (the head's PR is already high at the first "
        "checkpoint, or only falls); lead 1× means PR rise and selectivity crossing fall in the same "
        "checkpoint interval, so the ordering is below checkpoint resolution.\n")
    return "\n".join(text)


def _pr_section(F: dict, traj: pl.DataFrame, class_threshold: float, top: int = 10) -> str:
    pi = F["pr_integral"]
    text = ["## PR integral and specialized-head fraction\n\n"
            "`integral_paper` = Σ_t max(PR_t − 1, 0)·Δln tokens_t (backward differences, first revision adds 0); "
            "`integral_author` = trapezoid of max(PR − 1, 0) over ln(max(tokens/1e9, 1)). Top heads by the "
            "author's integral:\n"]
    for m in _models(traj):
        g = pi.filter(pl.col("model") == m).sort("rank_author").head(top)
        zero = EC.integral_all_zero(m, pi.filter(pl.col("model") == m), traj.filter(pl.col("model") == m)["tokens"].max())
        if zero:
            text.append(zero)
            continue
        rows = [[str(r["rank_author"]), tables.head_name(r["layer"], r["head"]),
                 "—" if r["integral_author"] is None else f"{r['integral_author']:.1f}",
                 "—" if r["integral_paper"] is None else f"{r['integral_paper']:.1f}",
                 "—" if r["rank_paper"] is None else str(r["rank_paper"])] for r in g.iter_rows(named=True)]
        text.append(f"**{m}:**\n\n" + _md(["rank (author)", "head", "integral_author", "integral_paper",
                                            "rank (paper)"], rows) + "\n")
    sf = F["circuit_size"]
    models = _models(traj)
    rows = []
    for m in models:
        g = sf.filter(pl.col("model") == m)
        rows.append([m] + [f"{fmt_tokens(t)}: {_pct(x)}" for t, x in zip(g["tokens"], g["specialized_fraction"])])
    text.append("Note: this counts every head whose best class reaches the class threshold on the synthetic "
                "induction batch, first-token heads included, so it tracks Finding 2; it is not paper A's "
                "specialized fraction (top-K spectral heads / noise-floor heads at the final checkpoint).\n")
    text.append(f"Specialized-head fraction (best selectivity ≥ {class_threshold:g}× / all heads) per revision:\n\n"
                + "\n".join(f"- **{r[0]}**: " + ", ".join(r[1:]) for r in rows) + "\n")
    return "\n".join(text)


def _provenance_section(traj: pl.DataFrame) -> list[str]:
    """A warning block when two revisions of one model ran byte-identical weights (the trajectory's
    ``weights_sha256`` column, from each cell's provenance.parquet); nothing otherwise."""
    lines = provenance.warning_lines(traj)
    if not lines:
        return []
    return [f"## {FS.WARNING_TITLE}\n\n" + "\n".join(f"- {ln}" for ln in lines) + f"\n\n{FS.WARNING_AFTER}\n"]


def _pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}%"


def _md(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right if right is not None else set(range(1, len(header)))
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _models(traj: pl.DataFrame) -> list[str]:
    return traj["model"].unique(maintain_order=True).to_list()


# ---------------------------------------------------------------------------------------------


def _f1_section(F: dict, traj: pl.DataFrame, class_threshold: float) -> str:
    parts = [f"## Finding 1: zero first-token (BOS) floor in layers 0–1\n\n"
             f"First-token head = `sel_first_token ≥ {class_threshold:g}×` whatever its best class (the paper's "
             "definition, a ratio to the baseline). Per-layer counts (first-token heads / heads in the layer) at "
             "every revision; in brackets, where the screen recorded attention masses, how many of those heads also "
             "put at least Gu et al.'s ε of their attention on key 0 at the probe's query (`n_first_token_key0`; "
             "ε = `key0_mass`):\n"]
    f1 = F["f1_bos_floor"]
    for m in _models(traj):
        g = f1.filter(pl.col("model") == m)
        layers = sorted(g["layer"].unique().to_list())
        revs = T.revision_order(g).filter(pl.col("model") == m)
        rows = []
        for rev, tok in zip(revs["revision"], revs["tokens"]):
            r = g.filter(pl.col("revision") == rev)
            key0 = r["n_first_token_key0"].to_list() if "n_first_token_key0" in r.columns else [None] * r.height
            cnt = dict(zip(r["layer"].to_list(), zip(r["n_first_token"].to_list(), r["n_heads"].to_list(), key0)))
            rows.append([rev, fmt_tokens(tok)] + [
                (f"{cnt[l][0]}/{cnt[l][1]}" + ("" if cnt[l][2] is None else f" [{cnt[l][2]}]")) if l in cnt else "—"
                for l in layers])
        parts.append(f"**{m}:**\n\n" + _md(["revision", "tokens"] + [f"L{l}" for l in layers], rows) + "\n")
    fl = F["f1_floor"]
    rows = [[r["model"], r["floor_layers"], str(r["n_revisions"]), str(r["max_first_token"]),
             "—" if r.get("max_sel_first_token") is None else fmt_ratio(r["max_sel_first_token"], sig=3),
             ("yes" if r["floor_holds"] else "**no**") + (" (one checkpoint)" if r["n_revisions"] == 1 else "")]
            for r in fl.iter_rows(named=True)]
    parts.append("Floor check (a model screened at one revision is checked at that checkpoint only, on one synthetic "
                 "probe):\n\n" + _md(["model", "layers", "revisions", "max first-token heads in those layers",
                                       "largest first-token selectivity there", "zero at every revision"], rows) + "\n")
    return "\n".join(parts)


def _f2_section(F: dict, traj: pl.DataFrame, class_threshold: float, sharp_share: float) -> str:
    f2 = F["f2_bos_fraction"]
    models = _models(traj)
    toks = sorted({t for t in f2["tokens"].to_list() if t is not None})
    rows = []
    for t in toks:
        row = [fmt_tokens(t)]
        for m in models:
            r = f2.filter((pl.col("model") == m) & (pl.col("tokens") == t))
            key0 = r["n_first_token_key0"][0] if r.height and "n_first_token_key0" in r.columns else None
            row.append((f"{_pct(r['bos_fraction'][0])} ({_pct(r['bos_fraction_best_class'][0])})"
                        + ("" if key0 is None else f" [{_pct(key0 / r['n_heads'][0])}]")) if r.height else "—")
        rows.append(row)
    text = [f"## Finding 2: first-token (BOS) fraction over training\n\n"
            f"Whole-model fraction of heads with `sel_first_token ≥ {class_threshold:g}×` "
            "(in parentheses: heads whose *best class* is first-token; in brackets, where attention masses were "
            "recorded: first-token heads that also put at least `key0_mass` of their attention on key 0). One row "
            "per checkpoint token count.\n",
            _md(["tokens"] + models, rows) + "\n",
            f"Shape (rule: *sharp transition* when one adjacent-checkpoint step carries ≥ {sharp_share:g} of "
            "the whole rise first → final, else *gradual ramp*):\n"]
    sh = F["f2_shape"]
    rows = [[r["model"], _pct(r["first_fraction"]), _pct(r["final_fraction"]),
             "—" if r["largest_jump_pp"] is None else f"+{r['largest_jump_pp']:.1f} pp",
             "—" if r["jump_from_revision"] is None else
             f"{fmt_tokens(r['jump_from_tokens'])} → {fmt_tokens(r['jump_to_tokens'])}",
             "—" if r["jump_share"] is None else f"{r['jump_share']:.2f}",
             "—" if r["monotone"] is None else "yes" if r["monotone"] else "no", f"**{r['shape']}**"]
            for r in sh.iter_rows(named=True)]
    text.append(_md(["model", "first", "final", "largest adjacent jump", "between", "jump / rise",
                     "monotone", "shape"], rows) + "\n")
    single = [r["model"] for r in sh.iter_rows(named=True) if r["shape"] == T.ONE_CHECKPOINT]
    if single:
        text.append(f"*{T.ONE_CHECKPOINT}*: {', '.join(single)} {'was' if len(single) == 1 else 'were'} screened at "
                    "a single revision, so there is a fraction but no trajectory: no shape, no rise, and no sink "
                    "onset (Finding 2b), and no test of an order.\n")
    # data-driven note on non-monotone trajectories
    notes = []
    for m in models:
        g = T.with_rev_index(f2.filter(pl.col("model") == m)).sort("rev_index")
        fr, tk = g["bos_fraction"].to_list(), g["tokens"].to_list()
        nh = g["n_first_token"].to_list()
        drops = [f"{_pct(a)} ({na} heads) at {fmt_tokens(ta)} → {_pct(b)} ({nb} heads) at {fmt_tokens(tb)}"
                 for a, b, na, nb, ta, tb in zip(fr[:-1], fr[1:], nh[:-1], nh[1:], tk[:-1], tk[1:]) if b < a]
        if drops:
            notes.append(f"- {m}: not monotone: " + "; ".join(drops) + ". A published table that reports "
                         "this stretch as 0% (or the trajectory as monotone) rounds away such isolated heads.")
    if notes:
        text.append("Notes:\n\n" + "\n".join(notes) + "\n")
    return "\n".join(text)


def _f2b_section(F: dict, class_threshold: float, alpha: float, n_permutations: int) -> str:
    """Finding 2b: per-layer onsets and the spread label (``headtrace.findings.layer_onset``)."""
    on, sp = F["f2_layer_onset"], F["f2_layer_spread"]
    text = ["## Finding 2b: how the first-token sink spreads through the layers\n\n"
            f"Per layer: the first revision with ≥ 1 first-token head (`sel_first_token ≥ {class_threshold:g}×`) and "
            "the first with ≥ 50% of the layer's heads (`f2_layer_onset`). Spread rule (`headtrace.findings.layer_onset`): "
            "layers above the floor are ranked by onset (never reached = later than every reached layer, tied); "
            "Spearman ρ of onset with distance from the network's middle layer (ρ_middle > 0: middle-out) and with "
            "depth (ρ_depth > 0: bottom-up, < 0: top-down). *p*: max-T permutation test of the best of the three "
            f"orders ({n_permutations} seeded permutations), which rejects only that onsets are exchangeable across "
            "layers; *p (Holm)*: corrected within its family, stated before the run (`findings.spread_families`; a "
            "model no family names is a family of its own two tests; a member without a p counts as p = 1), so "
            "adding a model never moves another model's p. An order is named only when p (Holm) "
            f"≤ α = {alpha:g} **and** it beats each alternative order, paired on the same permutations (*pairwise*); "
            "when only the first holds: *onsets are not exchangeable across layers*; else *no clear order*.\n"]
    for m in on["model"].unique(maintain_order=True).to_list():
        g = on.filter(pl.col("model") == m).sort("layer")
        rows = [[f"L{r['layer']}", "never" if r["first_revision"] is None else
                 f"{fmt_tokens(r['first_tokens'])} ({r['first_revision']})",
                 "never" if r["half_revision"] is None else f"{fmt_tokens(r['half_tokens'])} ({r['half_revision']})"]
                for r in g.iter_rows(named=True)]
        text.append(f"**{m}:**\n\n" + _md(["layer", "≥ 1 head", "≥ 50% of heads"], rows) + "\n")
    rows, lines = [], []
    for r in sp.iter_rows(named=True):
        f = (lambda x: "—" if x is None else f"{x:+.2f}")
        rows.append([r["model"], r["onset"], "—" if r["middle_layer"] is None else f"{r['middle_layer']:g}",
                     r["leading_layers"] or "—",
                     EC.tokens_or_dash(r["lead_tokens"]), "—" if r["lead_ratio"] is None else f"{r['lead_ratio']:.1f}×",
                     r["last_layers"] or "—", f(r["rho_middle"]), f(r["rho_depth"]),
                     "—" if r["p_value"] is None else fmt_p(r["p_value"]),
                     "—" if r.get("p_holm") is None else
                     f"{fmt_p(r['p_holm'])} ({r.get('holm_family')}, {r.get('holm_m')} tests)",
                     "—" if not r.get("best_order") else f"{r['best_order']}: {r.get('pairwise') or '—'}",
                     f"**{r['label']}**"])
        if r["onset"] == "first" and r["label"] == T.ONE_CHECKPOINT:
            fam = r.get("holm_family")
            lines.append(f"- **{r['model']}**: {T.ONE_CHECKPOINT}: no onset (a sink's onset needs a revision "
                         "before it), so no order to test"
                         + (f"; its family {fam} counts its tests as untested (p = 1)." if fam and fam != r["model"]
                            else "; it is in no other model's Holm family."))
        elif r["onset"] == "first" and not r["leading_layers"]:
            lines.append(EC.no_sink_line(r))
        elif r["onset"] == "first":
            never = f"; never reached: {r['never_layers']}" if r["never_layers"] else ""
            p = "" if r["p_value"] is None or "p = " in r["label"] else (
                f" (p = {fmt_p(r['p_value'])}" + ("" if r.get("p_holm") is None else f", Holm {fmt_p(r['p_holm'])}") + ")")
            lines.append(f"- **{r['model']}**: {r['label']}{p}. First sink in {r['leading_layers'] or 'no layer'}"
                         f" at {fmt_tokens(r['lead_tokens'])}"
                         + ("" if r["lead_ratio"] is None else
                            f", the next layers {r['lead_ratio']:.1f}× later ({fmt_tokens(r['next_tokens'])})")
                         + f"; last: {r['last_layers'] or '—'}{never}.")
    text.append("Spread summary (`f2_layer_spread`; *next* = the earliest onset of the other layers):\n\n"
                + _md(["model", "onset", "middle", "leading layers", "at", "next / leading", "last",
                       "ρ_middle", "ρ_depth", "p", "p (Holm)", "best order: pairwise", "label"], rows) + "\n")
    text.append(EC.floor_note(sp))
    text.append("What each model shows (onset = ≥ 1 first-token head):\n\n" + "\n".join(lines) + "\n")
    text.append("A named order says that order fits better than each other order by more than exchangeable "
                "layers would produce; *not exchangeable* says only that the onsets depend on the layer. With ~10 "
                "checkpoints many layers share an onset revision, so ties are common and a p near α is a "
                "borderline call, not a strong one.\n")
    return "\n".join(text)


def _f3_section(F: dict, traj: pl.DataFrame, induction_threshold: float) -> str:
    ms = F["f3_milestones"]
    models = _models(traj)
    names = ms["milestone"].unique(maintain_order=True).to_list()
    rows = []
    for n in names:
        row = [n]
        for m in models:
            r = ms.filter((pl.col("model") == m) & (pl.col("milestone") == n))
            row.append(_bracket(r.row(0, named=True)) if r.height else "—")
        rows.append(row)
    text = [f"## Finding 3: induction circuit vs first-token attractor\n\n"
            f"When each milestone is crossed (`induction_k_heads`: ≥ k heads with "
            f"`sel_induction ≥ {induction_threshold:g}×`; `first_token_p pct`: Finding 2's fraction ≥ p), as the "
            "checkpoints bound it: after the last revision below it and at or before the first revision reaching it, "
            "\"(lo, hi]\". *≤ hi (left-censored)*: already met at the first revision; *> lo (never reached)*: not met "
            "by the last revision.\n",
            _md(["milestone"] + models, rows) + "\n"]
    gaps = [F["f3_gaps"]]
    rows = []
    for g in gaps:
        for r in g.iter_rows(named=True):
            bound = bound_label(r.get("gap_lo"), r.get("gap_hi"))
            if r.get("gap_bound") == "unknown" or r.get("gap_bound") is None:
                bound = "—" if r["gap_ratio"] is None else "unbounded"
            note = []
            if r["same_revision"]:
                note.append("same checkpoint: order below resolution")
            if r.get("earlier_left_censored"):
                note.append(f"{r['earlier']} met at the first revision: lower bound only")
            if r.get("later_right_censored"):
                note.append(f"{r['later']} never reached: lower bound only")
            rows.append([r["model"], f"{r['later']} / {r['earlier']}", EC.tokens_or_dash(r["later_tokens"]),
                         EC.tokens_or_dash(r["earlier_tokens"]), f"**{bound}**", "; ".join(note) or "—"])
    text.append("Token gaps: what the checkpoints allow, (later's lo / earlier's hi, later's hi / earlier's lo); "
                "a milestone met at the first revision, or never, leaves one side open (≥: a lower bound). The ratio "
                "of the first revisions reaching each (`gap_ratio` in `f3_gaps`) is one value inside the range, not "
                "an estimate of where in it the gap lies.\n\n"
                + _md(["model", "milestones", "later (hi)", "earlier (hi)", "gap", "note"], rows,
                      right={2, 3, 4}) + "\n")
    if F.get("f3_onset_bootstrap") is not None:
        text.append(_f3_bootstrap(ms, F["f3_onset_bootstrap"]))
    return "\n".join(text)
