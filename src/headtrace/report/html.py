"""``results/findings/summary.html``: the run's answers on one page that opens on its own.

First screen: :mod:`headtrace.report.first_screen` — the same facts as summary.md's (the lineage
banner, the sentences, the headline table with every verdict's effect and interval as text, the flag
notes, the legend, the models and selectivity-baseline lines, the notes and the probe).
Below: the findings figures (relative ``<img>`` links with their captions) and one section per
model — its trajectory (induction-circuit and first-token head counts over tokens, an inline SVG and
a table), the verdict of every ablated revision with intervals, and the circuit heads. Plain HTML
and inline CSS; every number comes from the findings / verdict Parquet tables.
"""
from __future__ import annotations

import html
import math
import re
from typing import Iterable, Mapping

import polars as pl

from headtrace.core import tables
from headtrace.report import answers as A
from headtrace.report import copying
from headtrace.report import empty_case as EC
from headtrace.report import first_screen as FS
from headtrace.report import group_html as GH
from headtrace.report import lineage as RL
from headtrace.report import strongest
from headtrace.report import headline as HL
from headtrace.report import verdicts as VS
from headtrace.report.format import fmt_tokens

__all__ = ["page", "headline_fragment", "rst_to_html"]

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1400px;
     padding:12px 20px;color:#222;font-size:14px;line-height:1.4}
h1{font-size:20px;margin:4px 0 6px} h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:14px 0 4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600} td.num{text-align:right}
nav{font-size:13px;margin:6px 0} nav a{margin-right:10px}
figure{margin:10px 0 18px} figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12.5px;color:#333;max-width:1100px}
.note{color:#666;font-size:12px}
.v-causal{background:#d9f2d9;font-weight:600} .v-not_causal{background:#f8d7d7;font-weight:600}
.v-underpowered{background:#fff1c9;font-weight:600} .v-none{color:#777} .v-partial{background:#fde3c8;font-weight:600}
.overlays{display:flex;flex-wrap:wrap;gap:12px} figure.overlay{margin:4px 0}
.why{display:block;font-weight:normal;font-size:11px;color:#444;white-space:normal;max-width:300px}
"""

# The headline's own style, scoped to .ht: the same fragment is embedded in the Snakemake report's
# front page, whose own styles it must neither take nor change.
HEADLINE_CSS = """
.ht{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;font-size:14px;line-height:1.4}
.ht ul.lede{margin:4px 0 10px;padding-left:20px;max-width:1250px;list-style:disc}
.ht table.headline{border-collapse:collapse;font-size:13px;margin:6px 0}
.ht table.headline th,.ht table.headline td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
.ht table.headline th{background:#f3f3f3;font-weight:600}
.ht table.headline td{white-space:nowrap} .ht table.headline td.num{text-align:right}
.ht table.headline td.wrap{white-space:normal;min-width:110px;max-width:260px}
.ht table.headline td.verdict{min-width:170px;max-width:260px}
.ht .rev{display:block;font-size:11px;color:#666}
.ht .v-causal{background:#d9f2d9;font-weight:600} .ht .v-not_causal{background:#f8d7d7;font-weight:600}
.ht .v-underpowered{background:#fff1c9;font-weight:600} .ht .v-none{color:#777}
.ht .v-partial{background:#fde3c8;font-weight:600}
.ht table.headline tr.group td{background:#eef4fb;white-space:normal;max-width:300px}
.ht .why{display:block;font-weight:normal;font-size:11px;color:#444;white-space:normal;max-width:300px}
.ht .note{color:#666;font-size:12px;max-width:1250px}
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def rst_to_html(text: str) -> str:
    """A caption's reStructuredText as light HTML: ``code``, **bold**, *italic*; Jinja blocks dropped."""
    text = re.sub(r"\{\{.*?\}\}", "…", text, flags=re.S)
    text = re.sub(r"\{%.*?%\}", "", text, flags=re.S)
    t = _e(text)
    parts = re.split(r"``(.+?)``", t, flags=re.S)  # odd items: code, kept literal (a glob's * is no italic)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", parts[i], flags=re.S)
        parts[i] = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", parts[i], flags=re.S)
    t = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    return "<p>" + "</p><p>".join(p.strip() for p in re.split(r"\n\s*\n", t) if p.strip()) + "</p>"


def headline_fragment(rows: list[dict], sents: list[str], *, link_models: bool = True) -> str:
    """The sentences and the headline table with its notes (:func:`first_screen.html` of these rows alone)."""
    return FS.html(FS.build(rows, sents), link_models=link_models)


def brief_fragment(rows: list[dict], sents: list[str], page: str = "results/findings/summary.html") -> str:
    """The sentences and a four-column table, for the report's front page (a narrow column beside
    the rule graph): model, first induction circuit, first-token 50%, verdict."""
    body = "".join(
        (f'<tr class="group" data-group="{_e(r["group_name"])}"><td><b>{_e(r["model"])}</b></td>'
         f'<td>{_e(r["circuit_text"])}</td><td>{_e(r["sink50_text"])}</td><td class="v-none">{_e(r["gap_text"])}</td></tr>')
        if r.get("group") else
        f'<tr data-model="{_e(r["model"])}"><td>{_e(r["model"])}</td><td>{_e(HL.bracket_tokens(r["circuit"]))}</td>'
        f'<td>{_e(HL.bracket_tokens(r["sink50"]))}</td>'
        f'<td class="{"v-" + r["verdict"] if r["verdict"] in A.DECIDED + ("underpowered",) else "v-none"}">'
        f'{_e(A.say(r["verdict"]))}</td></tr>' for r in rows)
    return (f'<style>{HEADLINE_CSS}</style><div class="ht ht-brief" style="position:relative;z-index:5;'
            'background:#fff;font-size:12.5px">'
            '<ul class="lede">' + "".join(f"<li>{_e(s)}</li>" for s in sents) + "</ul>"
            '<table class="headline" id="headline"><thead><tr><th>model</th><th>induction circuit (tokens)</th>'
            "<th>first-token 50%</th><th>verdict</th></tr></thead><tbody>" + body + "</tbody></table>"
            '<p class="note">The full table (brackets, gap intervals, circuit heads, verdict reasons, sink spread): '
            "<b>Results → Answers</b>; with figures and a section per model: "
            f"<code>{_e(page)}</code>.</p></div>")


# ---------------------------------------------------------------------------------------------
# per model


def _svg_trajectory(sizes: pl.DataFrame, bos: pl.DataFrame, width: int = 560, height: int = 180) -> str:
    """Induction-circuit heads (blue) and first-token heads (orange) over log tokens, inline SVG."""
    pts = {}
    for r in sizes.iter_rows(named=True):
        pts.setdefault(r["revision"], {})["tokens"] = r["tokens"]
        pts[r["revision"]]["ind"] = r.get("n_induction_circuit")
    for r in bos.iter_rows(named=True):
        pts.setdefault(r["revision"], {})["tokens"] = r["tokens"]
        pts[r["revision"]]["bos"] = r.get("n_first_token")
    rows = [v for v in pts.values() if v.get("tokens") is not None]
    if len(rows) < 1:
        return '<p class="note">no revision with known tokens: nothing to draw.</p>'
    pos = [v["tokens"] for v in rows if v["tokens"] > 0]
    floor = 10.0 ** (math.floor(math.log10(min(pos))) - 1) if pos else 1.0
    xs = [math.log10(v["tokens"] if v["tokens"] > 0 else floor) for v in rows]
    x0, x1 = min(xs), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1
    # two scales: induction-circuit heads (left, blue) and first-token heads (right, orange)
    ymax = {k: max([v.get(k) or 0 for v in rows] + [1]) for k in ("ind", "bos")}
    L, R, T, B = 40, 40, 16, 28
    sx = lambda x: L + (x - x0) / (x1 - x0) * (width - L - R)  # noqa: E731
    sy = lambda y, k: T + (1 - y / ymax[k]) * (height - T - B)  # noqa: E731
    order = sorted(zip(xs, rows), key=lambda p: p[0])
    blue, orange = "#1f77b4", "#ff7f0e"
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="trajectory" '
             f'xmlns="http://www.w3.org/2000/svg" style="font:10px sans-serif">',
             f'<line x1="{L}" y1="{height - B}" x2="{width - R}" y2="{height - B}" stroke="#999"/>',
             f'<line x1="{L}" y1="{T}" x2="{L}" y2="{height - B}" stroke="{blue}"/>',
             f'<line x1="{width - R}" y1="{T}" x2="{width - R}" y2="{height - B}" stroke="{orange}"/>',
             f'<text x="{L - 4}" y="{T + 4}" text-anchor="end" fill="{blue}">{ymax["ind"]}</text>',
             f'<text x="{L - 4}" y="{height - B + 4}" text-anchor="end" fill="{blue}">0</text>',
             f'<text x="{width - R + 4}" y="{T + 4}" fill="{orange}">{ymax["bos"]}</text>',
             f'<text x="{width - R + 4}" y="{height - B + 4}" fill="{orange}">0</text>']
    for d in range(math.ceil(x0), math.floor(x1) + 1):
        parts.append(f'<line x1="{sx(d):.1f}" y1="{height - B}" x2="{sx(d):.1f}" y2="{height - B + 4}" stroke="#999"/>'
                     f'<text x="{sx(d):.1f}" y="{height - B + 15}" text-anchor="middle">{fmt_tokens(10 ** d)}</text>')
    parts.append(f'<text x="{width - R}" y="{height - 2}" text-anchor="end">training tokens (log)</text>')
    for key, color in (("ind", blue), ("bos", orange)):
        seq = [(sx(x), sy(v[key], key)) for x, v in order if v.get(key) is not None]
        if seq:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="'
                         + " ".join(f"{a:.1f},{b:.1f}" for a, b in seq) + '"/>')
            parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{color}"/>' for a, b in seq]
    parts.append(f'<text x="{L + 6}" y="{T - 4}" fill="{blue}">induction-circuit heads (left scale)</text>'
                 f'<text x="{width - R - 6}" y="{T - 4}" fill="{orange}" text-anchor="end">first-token heads '
                 "(right scale)</text></svg>")
    return "".join(parts)


def _verdict_table(v: pl.DataFrame) -> str:
    if v is None or not v.height:
        return '<p class="note">no ablation ran for this model.</p>'
    v = v.sort("tokens", nulls_last=True)
    hdr = ["revision", "tokens", "circuit", "heads", "baseline top-1", "ablated top-1", "effect [interval]",
           "reference-set mean", "p (over)", "in-context boost", "upper bound", "verdict"]
    body = []
    for r in v.iter_rows(named=True):
        heads = r.get("heads")
        heads = list(heads.to_list() if hasattr(heads, "to_list") else heads or [])
        rnd = r.get("random_top1_mean")
        n_sets = r.get("n_random") or r.get("n_distinct_draws") or 0
        p = r.get("p_value")
        word = HL.verdict_word(r)
        cls = f"v-{word}" if word in A.DECIDED + ("underpowered",) else "v-none"
        cv = A.verdict_of(r)
        why = (cv.why or cv.why_not or "") if r.get("n_heads") else ""  # why it could not decide, or why not causal
        cells = [r["revision"], fmt_tokens(r.get("tokens")), str(r.get("circuit", "")).replace("_", " "),
                 " ".join(map(str, heads)) or "—", A.fmt_metric("top1", r.get("baseline_top1")),
                 A.fmt_metric("top1", r.get("ablated_top1")), A.effect_text(r),
                 A.fmt_metric("top1", rnd) if n_sets else "—",
                 (f"{cv.p_text().removeprefix('p = ')} ({cv.control_text()})" if n_sets and p is not None and p == p
                  else "—"),
                 (cv.boost_text() or "—").removeprefix("in-context boost: "),
                 (VS.upper_bound_text(r) or "—").removeprefix("upper bound ")]
        methods = cv.methods_text()
        why = "; ".join(w for w in (why, methods) if w)
        body.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells)
                    + f'<td class="{cls}">{_e(A.say(word))}' + (f'<span class="why">{_e(why)}</span>' if why else "")
                    + "</td></tr>")
    chance = EC.chance_note(v)
    return ('<table class="verdicts"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in hdr)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>"
            + (f'<p class="note">{_e(chance)}</p>' if chance else ""))


def _trajectory_table(sizes: pl.DataFrame, bos: pl.DataFrame) -> str:
    t = sizes.select("revision", "tokens", *[c for c in ("n_induction_circuit", "n_heads") if c in sizes.columns])
    if bos is not None and bos.height:
        t = t.join(bos.select("revision", *[c for c in ("n_first_token", "n_first_token_key0", "bos_fraction")
                                            if c in bos.columns]), on="revision", how="left")
    t = t.sort("tokens", nulls_last=True)
    hdr = ["revision", "tokens", "induction-circuit heads",
           "first-token heads [of them with ≥ ε (findings.key0_mass) of attention on key 0]",
           "first-token fraction"]
    body = []
    for r in t.iter_rows(named=True):
        frac = r.get("bos_fraction")
        body.append("<tr>" + "".join(f'<td class="{c}">{_e(x)}</td>' for c, x in (
            ("", r["revision"]), ("num", fmt_tokens(r["tokens"])), ("num", r.get("n_induction_circuit", "—")),
            ("num", "—" if r.get("n_first_token") is None else
             f"{r['n_first_token']}" + ("" if r.get("n_first_token_key0") is None else f" [{r['n_first_token_key0']}]")),
            ("num", "—" if frac is None else f"{100 * frac:.1f}%"))) + "</tr>")
    return ('<table class="trajectory"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in hdr)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")


def _model_section(r: dict, F: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None) -> str:
    m = r["model"]
    sizes = F.get("circuit_size")
    sizes = sizes.filter(pl.col("model") == m) if sizes is not None and sizes.height else pl.DataFrame(
        schema={"revision": pl.String, "tokens": pl.Int64, "n_induction_circuit": pl.Int64})
    bos = F.get("f2_bos_fraction")
    bos = bos.filter(pl.col("model") == m) if bos is not None and bos.height else pl.DataFrame(
        schema={"revision": pl.String, "tokens": pl.Int64, "n_first_token": pl.Int64})
    v = verdicts.filter(pl.col("model") == m) if verdicts is not None and verdicts.height else None
    circuit = (" ".join(r["heads"]) + f" (at {r['verdict_row']['revision']})") if r["heads"] else "none"
    decided = HL.decided_text(r["answer"])
    out = [f'<section id="model-{_e(m)}"><h2>{_e(m)} <span class="note">({_e(r["family"])}, '
           f'{r["n_revisions"]} revisions)</span></h2>',
           f"<p><b>Final circuit:</b> {_e(circuit)} — <b>{_e(A.say(r['verdict']))}</b>: "
           f"{_e(r['reason'])}. <b>First induction circuit:</b> {_e(r['circuit_text'])}. "
           f"<b>First-token 50%:</b> {_e(r['sink50_text'])}. <b>Gap:</b> {_e(r['gap_text'])}. "
           f"<b>Where the causal test decided:</b> {_e(decided)}.</p>",
           *([f"<p><b>Strongest head per class</b>, first → last revision: {_e(best)}.</p>"]
             if (best := strongest.model_text(F.get("strongest_trend"), m)) else []),
           "<h3>Trajectory</h3>", _svg_trajectory(sizes, bos),
           '<details><summary>per-revision counts</summary>' + _trajectory_table(sizes, bos) + "</details>",
           "<h3>Ablation verdict of every revision</h3>", _verdict_table(v),
           '<p><a href="#top">back to the headline</a></p></section>']
    return "\n".join(out)


def page(rows: list[dict], sents: list[str], findings: Mapping[str, pl.DataFrame],
         verdicts: pl.DataFrame | None = None, *, figures: Iterable[tuple[str, str, str]] = (),
         title: str = "headtrace — when do attention circuits form?", lineage: pl.DataFrame | None = None,
         on_suspect: str = "warn", group_tables: Mapping[str, Mapping[str, pl.DataFrame]] | None = None,
         cross_seed: Mapping[str, pl.DataFrame] | None = None, probes: Mapping[str, str] | None = None,
         notes: Mapping[str, str] | None = None, screen: FS.FirstScreen | None = None) -> str:
    """The whole page. ``figures``: (relative image path, title, caption HTML) in display order.
    ``lineage``: the checkpoint-lineage tables (:mod:`headtrace.findings.lineage`): a banner naming
    every flagged revision above the headline, and a section after the models'. ``screen``: the first
    screen (:func:`first_screen.build`; built from the rows, sentences, lineage, notes and probes when None)."""
    figures = list(figures)
    if screen is None:
        screen = FS.build(rows, sents, lineage=lineage, on_suspect=on_suspect, notes=notes, probes=probes)
    section = RL.section_html(lineage, [r["model"] for r in rows if not r.get("group")])
    nav = ['<a href="#headline">headline</a>'] + (['<a href="#figures">figures</a>'] if figures else []) + [
        f'<a href="#group-{_e(r["group_name"])}">{_e(r["group_name"])} (group)</a>' if r.get("group") else
        f'<a href="#model-{_e(r["model"])}">{_e(r["model"])}</a>' for r in rows] + (
        ['<a href="#lineage">lineage</a>'] if section else [])
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title><style>{CSS}{HEADLINE_CSS}</style></head><body>",
             f'<h1 id="top">{_e(title)}</h1>', "<nav>" + "".join(nav) + "</nav>",
             FS.html(screen)]
    if figures:
        parts.append('<h2 id="figures">Figures</h2>')
        for src, name, cap in figures:
            parts.append(f'<figure id="fig-{_e(name)}"><img src="{_e(src)}" alt="{_e(name)}" loading="lazy">'
                         f"<figcaption>{cap}</figcaption></figure>")
    parts += [GH.group_section(r["answer"], findings, (group_tables or {}).get(r["group_name"]),
                               (cross_seed or {}).get(r["group_name"])) if r.get("group")
              else _model_section(r, findings, verdicts) for r in rows]
    parts += [copying.html(findings, [r["model"] for r in rows if not r.get("group")])]  # beside the circuits (or "")
    parts += [section] if section else []
    parts.append("</body></html>")
    return "\n".join(parts)


def write(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None, out_html, *, headline_html=None,
          brief_html=None, families: Mapping[str, str] | None = None, figures: Iterable[tuple[str, str, str]] = (),
          lineage: pl.DataFrame | None = None, on_suspect: str = "warn",
          group_tables: Mapping[str, Mapping[str, pl.DataFrame]] | None = None,
          cross_seed: Mapping[str, pl.DataFrame] | None = None, probes: Mapping[str, str] | None = None,
          notes: Mapping[str, str] | None = None, traj: pl.DataFrame | None = None,
          class_threshold: float | None = None, induction_threshold: float | None = None) -> list[dict]:
    """Write the page (and, with ``headline_html``, the sentences + headline table alone: the first
    result of ``snakemake --report``); return the headline rows. ``lineage``: the checkpoint-lineage
    tables (:attr:`headtrace.core.results.Results.lineage`): the banner of flagged revisions on the first
    screen, and every statement resting on a flagged revision marked (:mod:`headtrace.report.answers`).
    ``group_tables``: seed group -> its tables by name (``results/groups/{group}/``); ``cross_seed``:
    group -> its cross-seed ablation table: a headline row per group before its members' rows, and
    a section per group (:mod:`headtrace.report.group_html`). ``traj`` (the trajectories) and the
    thresholds: the first screen's models, thresholds and selectivity-baseline lines, as on summary.md
    (:mod:`headtrace.report.first_screen`)."""
    groups = A.group_answers(group_tables or {}, families=families, cross_seed=cross_seed)
    rows = HL.headline_rows(findings, verdicts, families=families, suspect=RL.suspect(lineage), groups=groups,
                            continues=RL.continuations(lineage))
    sents = HL.sentences(rows)
    screen = FS.build(rows, sents, traj=traj, class_threshold=class_threshold, induction_threshold=induction_threshold,
                      lineage=lineage, on_suspect=on_suspect, notes=notes, probes=probes)
    tables.write_text(page(rows, sents, findings, verdicts, figures=figures, lineage=lineage,
                           on_suspect=on_suspect, group_tables=group_tables, cross_seed=cross_seed, probes=probes,
                           notes=notes, screen=screen),
                      out_html)
    if headline_html is not None:  # a fragment: the report's "Answers" result and its front page embed it
        frag = FS.html(screen, link_models=False)
        tables.write_text(f'<meta charset="utf-8"><title>headtrace headline</title><style>{HEADLINE_CSS}</style>\n'
                          f'<div class="ht"><h3>What this run found</h3></div>\n{frag}\n<p class="note">Figures and a '
                          f"section per model: <code>{_e(str(out_html))}</code> (opens on its own).</p>\n",
                          headline_html)
    if brief_html is not None:
        tables.write_text(brief_fragment(rows, sents, str(out_html)) + "\n", brief_html)
    return rows
