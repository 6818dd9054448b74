"""The headline: one row per model with the answers, and a few sentences generated from them.

Built only from tables the findings job and the ablation jobs already wrote — nothing is
recomputed here:

* ``circuit_size``   -> the revisions screened per model (and the checkpoint before a milestone,
  the lower end of its bracket when ``f3_onsets`` has not refined that milestone);
* ``f3_milestones``  -> the first revision reaching each milestone;
* ``f3_onsets``      -> the refined bracket (last revision before, first revision at) of a milestone;
* ``f3_gaps``        -> the timing gap (first-token milestone / induction milestone, a token ratio);
* ``f2_layer_spread``-> the spread label of the sink over layers (``first`` onset);
* ``verdict``        -> every cell's causal verdict (the final circuit's row at the last revision
  that was ablated).

A milestone reached at revision r is only known to lie in the bracket (previous screened revision,
r]; the gap ratio is therefore an interval: later in (lo_l, hi_l], earlier in (lo_e, hi_e] gives a
ratio in (lo_l / hi_e, hi_l / lo_e). Where ``f3_gaps`` gives its interval (``gap_lo``/``gap_hi``)
it is used as written; the brackets fill in only a table without one.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

import polars as pl

from headtrace.report import console
from headtrace.report.format import fmt_tokens

__all__ = ["headline_rows", "headline_table", "sentences", "verdict_reason", "verdict_word",
           "gap_text", "bracket_text", "COLUMNS"]

CIRCUIT_MILESTONE = "induction_3_heads"
SINK_MILESTONES = ("first_token_10pct", "first_token_50pct")

# (key, header) of the headline table as it is displayed
COLUMNS = [
    ("model", "model"),
    ("family", "family"),
    ("n_revisions", "revisions"),
    ("circuit_text", "first induction circuit"),
    ("sink10_text", "first-token 10%"),
    ("sink50_text", "first-token 50%"),
    ("gap_text", "gap (sink 50% / circuit)"),
    ("heads_text", "final circuit"),
    ("verdict_text", "verdict"),
    ("spread_text", "sink spread over layers"),
]


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _get(row: Mapping | None, key: str, default=None):
    if row is None:
        return default
    v = row.get(key, default)
    return default if _nan(v) else v


def _ratio(x: float | None) -> str:
    if _nan(x):
        return "?"
    return f"{x:.2g}×" if x < 10 else f"{x:.0f}×"


# ---------------------------------------------------------------------------------------------
# milestones and brackets


def _revisions(sizes: pl.DataFrame | None, model: str) -> list[tuple[str, float | None]]:
    """The model's screened (revision, tokens), in token order (unknown tokens last)."""
    if sizes is None or not sizes.height or "model" not in sizes.columns:
        return []
    g = sizes.filter(pl.col("model") == model).select("revision", "tokens").unique(maintain_order=True)
    return list(g.sort("tokens", nulls_last=True, maintain_order=True).iter_rows())


def _milestone(F: Mapping[str, pl.DataFrame], model: str, milestone: str,
               revs: list[tuple[str, float | None]]) -> dict:
    """``{revision, tokens, lo_revision, lo_tokens, refined, reached, known}`` of one milestone:
    the first revision at it, and the last screened revision before it (from ``f3_onsets`` when it
    refined this milestone, else the previous entry of ``circuit_size``)."""
    out = {"milestone": milestone, "revision": None, "tokens": None, "lo_revision": None, "lo_tokens": None,
           "refined": False, "reached": False, "known": False}
    ms = F.get("f3_milestones")
    if ms is not None and ms.height:
        r = ms.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            out["known"] = True
            row = r.row(0, named=True)
            out["revision"], out["tokens"] = _get(row, "revision"), _get(row, "tokens")
            out["reached"] = out["revision"] is not None
    on = F.get("f3_onsets")
    if on is not None and on.height and out["reached"]:
        r = on.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            row = r.row(0, named=True)
            if _get(row, "hi_revision") is not None:
                out.update(revision=_get(row, "hi_revision"), tokens=_get(row, "hi_tokens", out["tokens"]),
                           lo_revision=_get(row, "lo_revision"), lo_tokens=_get(row, "lo_tokens"),
                           refined=bool(_get(row, "rounds", 0) or _get(row, "n_added", 0)))
                return out
    if out["reached"]:
        names = [r for r, _ in revs]
        if out["revision"] in names:
            i = names.index(out["revision"])
            if i > 0:
                out["lo_revision"], out["lo_tokens"] = revs[i - 1]
    return out


def bracket_tokens(m: dict) -> str:
    """The milestone's token bracket alone: '(512K, 614K]', '≤ 20B (first screened)', 'not reached'."""
    if not m["known"]:
        return "—"
    if not m["reached"]:
        return "not reached"
    tok = fmt_tokens(m["tokens"]) if m["tokens"] is not None else "?"
    if m["lo_revision"] is None:
        return f"≤ {tok} (first screened)"
    return f"({fmt_tokens(m['lo_tokens'])}, {tok}]"


def bracket_text(m: dict) -> str:
    """'step1200 (614K; after 512K)' / 'not reached' / 'step0 (0; the first revision)'."""
    if not m["known"]:
        return "—"
    if not m["reached"]:
        return "not reached"
    tok = fmt_tokens(m["tokens"]) if m["tokens"] is not None else "? tokens"
    if m["lo_revision"] is None:
        return f"{m['revision']} ({tok}; at the first revision screened)"
    return f"{m['revision']} ({fmt_tokens(m['lo_tokens'])}–{tok}]"


# ---------------------------------------------------------------------------------------------
# the gap


def _gap(F: Mapping[str, pl.DataFrame], model: str, later: dict, earlier: dict, final_tokens) -> dict:
    """The gap later/earlier: ``{ratio, lo, hi, state}``; state is ``interval`` (both reached),
    ``no_sink`` (the circuit formed, the sink not by the last revision: a lower bound),
    ``circuit_at_first`` (the circuit already at the first revision: a lower bound), ``no_circuit``,
    ``same_revision`` (both first reached at one revision: the spacing cannot order them) or
    ``unknown``."""
    out = {"ratio": None, "lo": None, "hi": None, "state": "unknown"}
    row = None
    gaps = F.get("f3_gaps")
    if gaps is not None and gaps.height:
        r = gaps.filter((pl.col("model") == model) & (pl.col("later") == later["milestone"])
                        & (pl.col("earlier") == earlier["milestone"]))
        if r.height:
            row = r.row(0, named=True)
            out["ratio"] = _get(row, "gap_ratio")
    if row is not None:  # the findings job's interval, used as written (null on an unbounded side)
        out["lo"], out["hi"] = _get(row, "gap_lo"), _get(row, "gap_hi")
    if not earlier["reached"]:
        out["state"] = "no_circuit"
        return out
    if not later["reached"] or (row is not None and _get(row, "later_right_censored")):
        out["state"] = "no_sink"  # the sink milestone lies after the last revision: a lower bound
        if out["lo"] is None and earlier["tokens"] and final_tokens:
            out["lo"] = float(final_tokens) / float(earlier["tokens"])
        return out
    if row is not None and _get(row, "earlier_left_censored"):
        out["state"] = "circuit_at_first"  # the circuit was there at the first revision: a lower bound
        return out
    if out["lo"] is None and out["hi"] is None:
        e_hi, l_hi = earlier["tokens"], later["tokens"]
        e_lo, l_lo = earlier["lo_tokens"], later["lo_tokens"]
        if e_hi and l_lo is not None:
            out["lo"] = float(l_lo) / float(e_hi)
        if l_hi is not None and e_lo:
            out["hi"] = float(l_hi) / float(e_lo)
    same = _get(row, "same_revision") if row is not None else None
    out["state"] = "same_revision" if (same or later["revision"] == earlier["revision"]) else "interval"
    return out


def gap_text(g: dict) -> str:
    if g["state"] == "no_circuit":
        return "— (no circuit)"
    if g["state"] == "no_sink":
        return (f"> {_ratio(g['lo'])} (no sink by the last revision)" if g["lo"] is not None
                else "sink not reached")
    if g["state"] == "circuit_at_first":
        return (f"≥ {_ratio(g['lo'])} (circuit already at the first revision)" if g["lo"] is not None
                else "circuit already at the first revision: unbounded")
    if g["state"] == "unknown":
        return "—"
    lo = _ratio(g["lo"]) if g["lo"] is not None else "?"
    hi = _ratio(g["hi"]) if g["hi"] is not None else "∞"
    head = f"{_ratio(g['ratio'])}" if g["ratio"] is not None else "?"
    if g["state"] == "same_revision":
        return f"not separated: same revision (between {lo} and {hi})"
    if g["lo"] is not None and g["lo"] < 1:
        return f"{head}, in ({lo}, {hi}]: order not settled by the spacing"
    return f"{head}, in ({lo}, {hi}]"


# ---------------------------------------------------------------------------------------------
# the verdict


def verdict_word(v: Mapping | None) -> str:
    if v is None:
        return "not ablated"
    if not v.get("n_heads"):
        return "no circuit"
    return v.get("verdict") or ("causal" if v.get("causal") else "not_causal")


def verdict_reason(v: Mapping | None) -> str:
    """Why the verdict is what it is, in the console summary's words (``console.underpowered_reason``
    for ``underpowered``): the effect with its interval, p over how many matched sets."""
    if v is None:
        return "no ablation at this revision"
    if not v.get("n_heads"):
        return "no induction circuit at the final revision (nothing to ablate)"
    word = verdict_word(v)
    n_sets = v.get("n_distinct_draws") or 0
    p = v.get("p_value")
    stats = f"effect {console.effect_text(v)}" + (f", p={p:.3f} over {n_sets} matched set(s)"
                                                  if n_sets and not _nan(p) else "")
    if word == "underpowered":
        return f"{console.underpowered_reason(v)}; {stats}"
    return stats


def short_reason(v: Mapping | None) -> str:
    """The reason in a few words, for the headline cell (the full one: :func:`verdict_reason`)."""
    if v is None or not v.get("n_heads"):
        return ""
    n_sets = v.get("n_distinct_draws") or 0
    if verdict_word(v) == "underpowered":
        min_p = v.get("min_p")
        if not n_sets:
            return console.underpowered_reason(v)
        return (f"{_plural(n_sets, 'matched set')}: p ≥ {min_p:.3f} > α" if not _nan(min_p)
                else f"{_plural(n_sets, 'matched set')}: too few")
    p = v.get("p_value")
    return (f"effect {console.effect_text(v)}"
            + (f", p={p:.3f} ({n_sets} sets)" if n_sets and not _nan(p) else ""))


def _final_verdict(verdicts: pl.DataFrame | None, model: str) -> dict | None:
    """The final circuit's verdict row at the model's last ablated revision (``final_circuit`` when
    the cell has one, else ``circuit``)."""
    if verdicts is None or not verdicts.height:
        return None
    g = verdicts.filter(pl.col("model") == model)
    if "circuit" in g.columns:
        g = g.filter(pl.col("circuit").is_in(["final_circuit", "circuit"]))
    if not g.height:
        return None
    g = g.sort("tokens", nulls_last=True)
    last = g["revision"][-1]
    g = g.filter(pl.col("revision") == last)
    if "circuit" in g.columns and (g["circuit"] == "final_circuit").any():
        g = g.filter(pl.col("circuit") == "final_circuit")
    return g.row(0, named=True)


def _heads(v: Mapping | None) -> list[str]:
    h = None if v is None else v.get("heads")
    if h is None:
        return []
    return [str(x) for x in (h.to_list() if hasattr(h, "to_list") else h)]


# ---------------------------------------------------------------------------------------------
# rows


def headline_rows(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None = None, *,
                  families: Mapping[str, str] | None = None, models: Iterable[str] | None = None,
                  circuit_milestone: str | None = None,
                  sink_milestones: tuple[str, str] = SINK_MILESTONES) -> list[dict]:
    """One dict per model: the raw fields (milestones, gap, verdict row) and the ``*_text`` cells of
    :data:`COLUMNS`. ``circuit_milestone``: default the ``earlier`` milestone of ``f3_gaps``
    (``induction_3_heads`` when it has none)."""
    F = dict(findings)
    sizes = F.get("circuit_size")
    gaps = F.get("f3_gaps")
    if circuit_milestone is None:
        earlier = gaps["earlier"].unique(maintain_order=True).to_list() if gaps is not None and gaps.height else []
        circuit_milestone = earlier[0] if earlier else CIRCUIT_MILESTONE
    if models is None:
        seen: list[str] = []
        for name in ("circuit_size", "f3_milestones", "f3_gaps"):
            t = F.get(name)
            if t is not None and "model" in t.columns:
                seen += [m for m in t["model"].unique(maintain_order=True).to_list() if m not in seen]
        models = seen
    spread = F.get("f2_layer_spread")
    rows = []
    for m in models:
        revs = _revisions(sizes, m)
        final_rev, final_tok = (revs[-1] if revs else (None, None))
        circ = _milestone(F, m, circuit_milestone, revs)
        s10 = _milestone(F, m, sink_milestones[0], revs)
        s50 = _milestone(F, m, sink_milestones[1], revs)
        gap50 = _gap(F, m, s50, circ, final_tok)
        gap10 = _gap(F, m, s10, circ, final_tok)
        v = _final_verdict(verdicts, m)
        heads = _heads(v)
        label = None
        if spread is not None and spread.height:
            sp = spread.filter(pl.col("model") == m)
            if "onset" in sp.columns:
                sp = sp.filter(pl.col("onset") == "first")
            if sp.height:
                label = _get(sp.row(0, named=True), "label")
        word = verdict_word(v)
        row = {
            "model": m, "family": (families or {}).get(m) or "—", "n_revisions": len(revs),
            "final_revision": final_rev, "final_tokens": final_tok,
            "circuit": circ, "sink10": s10, "sink50": s50, "gap50": gap50, "gap10": gap10,
            "verdict_row": v, "verdict": word, "reason": verdict_reason(v), "short_reason": short_reason(v),
            "heads": heads,
            "spread": label,
            "circuit_text": bracket_text(circ), "sink10_text": bracket_text(s10), "sink50_text": bracket_text(s50),
            "gap_text": gap_text(gap50),
            "heads_text": (" ".join(heads) + (f" @ {v['revision']}" if v is not None and v.get("revision") else ""))
            if heads else "—",
            "verdict_text": word.replace("_", " ") if word in ("not ablated", "no circuit") else word,
            "spread_text": label if label else "—",
        }
        rows.append(row)
    return rows


def headline_table(rows: list[dict]) -> pl.DataFrame:
    """The displayed cells of :func:`headline_rows` as a table (headers of :data:`COLUMNS`), plus the
    verdict reason."""
    data = {h: [str(r[k]) for r in rows] for k, h in COLUMNS}
    data["verdict reason"] = [r["reason"] for r in rows]
    return pl.DataFrame(data, schema={h: pl.String for h in data})


# ---------------------------------------------------------------------------------------------
# sentences


def _names(ms: list[str]) -> str:
    if len(ms) <= 1:
        return "".join(ms)
    return ", ".join(ms[:-1]) + " and " + ms[-1]


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def sentences(rows: list[dict]) -> list[str]:
    """Three or four sentences stating what the run found and what it could not decide."""
    if not rows:
        return ["This run has no models with findings yet."]
    n = len(rows)
    total_revs = sum(r["n_revisions"] for r in rows)
    formed = [r for r in rows if r["circuit"]["reached"]]
    ms = rows[0]["circuit"]["milestone"].replace("_", " ")
    out = []
    s = (f"This run screened {_plural(n, 'model')} over {_plural(total_revs, 'revision')} in all; "
         f"{len(formed)} of them formed an induction circuit ({ms})")
    if formed:
        known = [r for r in formed if r["circuit"]["tokens"] is not None]
        if known:
            first = min(known, key=lambda r: r["circuit"]["tokens"])
            s += (f", the earliest {first['model']} by {fmt_tokens(first['circuit']['tokens'])} tokens "
                  f"({first['circuit']['revision']})")
    never = [r["model"] for r in rows if r["circuit"]["known"] and not r["circuit"]["reached"]]
    if never:
        s += f"; {_names(never)} never did"
    out.append(s + ".")
    sinks = [r for r in rows if r["sink50"]["reached"]]
    ordered = [r for r in sinks if r["gap50"]["state"] == "interval" and (r["gap50"]["lo"] or 0) >= 1]
    s = f"A first-token sink on half the heads came in {len(sinks)} of {n} models"
    if ordered:
        los = [r["gap50"]["lo"] for r in ordered]
        s += (f"; in {_names([r['model'] for r in ordered])} it came after the induction circuit whatever"
              f" the checkpoint spacing hides (at least {_ratio(min(los))} more tokens at the ends of the"
              " brackets; each model's interval is in the table)")
    out.append(s + ".")
    by = {}
    for r in rows:
        by.setdefault(r["verdict"], []).append(r["model"])
    parts = []
    for word, say in (("causal", "causal"), ("not_causal", "not causal")):
        if by.get(word):
            parts.append(f"{say} in {_names(by[word])}")
    s = "Ablating the final circuit: " + ("; ".join(parts) if parts else "no model gave a decided verdict")
    out.append(s + ".")
    undecided = []
    if by.get("underpowered"):
        no_ctl = [r for r in rows if r["verdict"] == "underpowered"
                  and not _get(r["verdict_row"], "n_distinct_draws", 0)]
        full = [r["model"] for r in no_ctl
                if str(_get(r["verdict_row"], "underpowered_reason", "") or "").startswith("no matched set")]
        none = [r["model"] for r in no_ctl if r["model"] not in full]
        few = [m for m in by["underpowered"] if m not in full and m not in none]
        why = ([f"{_names(few)}: too few matched-random sets for p to reach alpha"] if few else []) + (
            [f"{_names(full)}: the circuit fills its layer, leaving no matched set of its size"] if full else []) + (
            [f"{_names(none)}: no matched-random control"] if none else [])
        undecided.append(f"whether the final circuit is causal in {_plural(len(by['underpowered']), 'model')} "
                         f"(underpowered — {'; '.join(why)})")
    unsettled = [r["model"] for r in rows if r["gap50"]["state"] == "same_revision"
                 or (r["gap50"]["state"] == "interval" and r["gap50"]["lo"] is not None and r["gap50"]["lo"] < 1)]
    if unsettled:
        undecided.append(f"the order of circuit and sink in {_names(unsettled)} (the checkpoint spacing does not "
                         "separate them)")
    no_sink = [r["model"] for r in rows if r["gap50"]["state"] == "no_sink"]
    if no_sink:
        undecided.append(f"the gap in {_names(no_sink)} (no sink by the last revision: a lower bound only)")
    first = [r["model"] for r in rows if r["gap50"]["state"] == "circuit_at_first"]
    if first:
        undecided.append(f"the gap in {_names(first)} (the circuit was already there at the first revision: "
                         "a lower bound only)")
    if undecided:
        out.append("It could not decide " + "; ".join(undecided) + ".")
    else:
        out.append("Every verdict and every gap of this run was decided.")
    return out


def markdown(rows: list[dict], sents: list[str]) -> str:
    """The headline as the top section of summary.md: the sentences, then the table (verdict with
    its reason)."""
    def cell(x) -> str:
        return str(x).replace("|", "\\|")

    hdr = [h for _, h in COLUMNS]
    lines = ["## Headline: what this run found", "", *[f"- {s}" for s in sents], "",
             "| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
    for r in rows:
        cells = [cell(r[k]) for k, _ in COLUMNS]
        cells[[k for k, _ in COLUMNS].index("verdict_text")] = f"**{cell(r['verdict_text'])}** ({cell(r['reason'])})"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Brackets (a–b]: first seen at the revision named (b tokens), not at the screened revision "
              "before it (a tokens). Gap: tokens at the first-token 50% milestone / tokens at the induction "
              "milestone, with the interval the brackets allow. Tables: `f3_milestones`, `f3_onsets`, `f3_gaps`, "
              "`f2_layer_spread`, `results/cells/*/*/verdict.parquet`.", ""]
    return "\n".join(lines)


def insert(summary_md: str, section: str) -> str:
    """``section`` placed after summary.md's title block, before its first ``## `` section."""
    i = summary_md.find("\n## ")
    if i < 0:
        return summary_md.rstrip("\n") + "\n\n" + section
    return summary_md[:i + 1] + section + "\n" + summary_md[i + 1:]
