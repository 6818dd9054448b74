"""A seed group's section of ``summary.html``: its answers (worded in :mod:`headtrace.report.answers`),
the members' trajectories overlaid in one inline figure per finding (F1 floor, F2 sink fraction, F3
induction circuit, F4 recall of the member's own final circuit), and the group tables
(``results/groups/{group}/``) as they are. Formats only; every number comes from the tables.
"""
from __future__ import annotations

import html
import math
from typing import Mapping

import polars as pl

from headtrace.core.rounding import directed, fmt_p
from headtrace.report import answers as A
from headtrace.report.format import fmt_tokens

__all__ = ["group_section", "svg_overlay", "OVERLAYS"]

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]

# (finding, findings table, value column, how to read it) of the overlaid figures, one per finding
OVERLAYS = [
    ("F3: induction-circuit heads", "circuit_size", "n_induction_circuit", "heads at or above the induction threshold"),
    ("F2: first-token (sink) fraction", "f2_bos_fraction", "bos_fraction", "share of all heads"),
    ("F1: first-token heads in the floor layers (L0, L1)", "f1_bos_floor", "n_first_token", "heads; the floor holds at 0"),
    ("F4: recall of the member's own final circuit", "f4_recall", "recall", "share of the final circuit found"),
]


def svg_overlay(series: Mapping[str, list[tuple]], label: str, width: int = 520, height: int = 190) -> str:
    """One line per member over log training tokens (inline SVG), its colour named in the legend."""
    pts = [(t, y) for s in series.values() for t, y in s]
    if not pts:
        return '<p class="note">no member has this finding with known tokens: nothing to draw.</p>'
    pos = [t for t, _ in pts if t > 0]
    floor = 10.0 ** (math.floor(math.log10(min(pos))) - 1) if pos else 1.0
    lx = (lambda t: math.log10(t if t > 0 else floor))
    x0, x1 = min(lx(t) for t, _ in pts), max(lx(t) for t, _ in pts)
    x1 = x1 if x1 > x0 else x0 + 1
    ymax = max([float(y) for _, y in pts] + [0.0]) or 1.0
    L, R, T, B = 40, 12, 16, 28
    sx = (lambda x: L + (x - x0) / (x1 - x0) * (width - L - R))
    sy = (lambda y: T + (1 - float(y) / ymax) * (height - T - B))
    out = [f'<svg width="{width}" height="{height}" role="img" aria-label="{_e(label)}" '
           f'xmlns="http://www.w3.org/2000/svg" style="font:10px sans-serif">',
           f'<line x1="{L}" y1="{height - B}" x2="{width - R}" y2="{height - B}" stroke="#999"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{height - B}" stroke="#999"/>',
           f'<text x="{L - 4}" y="{T + 4}" text-anchor="end">{ymax:g}</text>',
           f'<text x="{L - 4}" y="{height - B + 4}" text-anchor="end">0</text>']
    for d in range(math.ceil(x0), math.floor(x1) + 1):
        out.append(f'<line x1="{sx(d):.1f}" y1="{height - B}" x2="{sx(d):.1f}" y2="{height - B + 4}" stroke="#999"/>'
                   f'<text x="{sx(d):.1f}" y="{height - B + 15}" text-anchor="middle">{fmt_tokens(10 ** d)}</text>')
    out.append(f'<text x="{width - R}" y="{height - 2}" text-anchor="end">training tokens (log)</text>')
    for i, (m, s) in enumerate(series.items()):
        c = PALETTE[i % len(PALETTE)]
        seq = [(sx(lx(t)), sy(y)) for t, y in s]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.6" points="'
                   + " ".join(f"{a:.1f},{b:.1f}" for a, b in seq) + '"/>')
        out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{c}"/>' for a, b in seq]
        out.append(f'<text x="{L + 6 + 110 * i}" y="{T - 4}" fill="{c}">{_e(m)}</text>')
    return "".join(out) + "</svg>"


def group_section(g: A.GroupAnswer, F: Mapping[str, pl.DataFrame], T: Mapping[str, pl.DataFrame] | None = None,
                  cross_seed: pl.DataFrame | None = None) -> str:
    """The section ``#group-{name}``: the group's answers, one overlaid figure per finding, the tables."""
    T = T or {}
    members = [m for m, _ in g.members]
    figs = "".join(f'<figure class="overlay"><figcaption><b>{_e(title)}</b> ({_e(how)})</figcaption>'
                   f"{svg_overlay(_series(F, table, col, members), title)}</figure>"
                   for title, table, col, how in OVERLAYS)
    out = [f'<section id="group-{_e(g.group)}"><h2>Seed group {_e(g.group)} <span class="note">({_e(g.family)}, '
           f'{g.n} seeds: {_e(", ".join(f"{m} = seed {s}" for m, s in g.members))})</span></h2>',
           f"<p>{_e(g.statement().text)}</p>",
           f"<p><b>{_e(g.circuit_milestone)}:</b> {_e(g.onset_text(g.circuit_milestone))}. "
           f"<b>{_e(g.sink_milestone)}:</b> {_e(g.onset_text(g.sink_milestone))}. "
           f"<b>Across seeds:</b> {_e(g.agreement_text())}.</p>",
           "<h3>Members' trajectories, overlaid</h3>", f'<div class="overlays">{figs}</div>',
           "<h3>Onsets per milestone</h3>",
           _table(T.get("group_milestones"), ["milestone", "n_used", "n_reached", "n_left_censored", "n_right_censored",
                                              "median_lo", "median_hi", "range_lo", "range_hi"]),
           "<details><summary>each member's bracket</summary>"
           + _table(T.get("group_member_milestones"), ["milestone", "member", "seed", "present", "lo_revision",
                                                       "revision", "onset_lo", "onset_hi", "left_censored",
                                                       "right_censored"]) + "</details>",
           "<h3>The F3 pairs</h3>",
           _table(T.get("group_gaps"), ["later", "earlier", "n_decided", "n_earlier_first", "n_later_first",
                                        "n_undecided", "n_absent", "p_sign", "median_gap_lo", "median_gap_hi",
                                        "smallest_gap_lo", "smallest_gap_hi", "largest_gap_lo", "largest_gap_hi"]),
           "<details><summary>each member's order and gap</summary>"
           + _table(T.get("group_member_gaps"), ["later", "earlier", "member", "seed", "order", "gap_lo", "gap_hi",
                                                 "gap_bound"]) + "</details>",
           "<h3>Members: F1, F2, final circuits side by side</h3>",
           _table(T.get("group_members"), ["member", "seed", "n_revisions", "final_revision", "floor_holds", "shape",
                                           "jump_share", "circuit"]),
           "<h3>F4: recall of each member's own final circuit</h3>",
           _table(T.get("group_recall_levels"), ["level_label", "n_used", "n_reached", "share_median", "share_min",
                                                 "share_max"]),
           "<h3>Circuit identity: pairwise Jaccard</h3>",
           _table(T.get("group_jaccard"), ["member_a", "member_b", "jaccard", "n_shared", "n_a", "n_b"])]
    if cross_seed is not None and cross_seed.height:
        out += ["<h3>Cross-seed ablation</h3>", f"<p>{_e(g.cross_seed_text())}.</p>",
                _table(cross_seed.sort("model_seed", "circuit_seed"),
                       ["model", "circuit_model", "n_heads", "jaccard", "top1_drop", "random_drop_mean",
                        "top1_drop_vs_random", "p_value", "n_random", "control_exact"])]
    out.append('<p class="note">Tables: <code>results/groups/' + _e(g.group) + '/</code> (docs/statistics.md, seed '
               'groups). <a href="#top">back to the headline</a></p></section>')
    return "\n".join(out)


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _series(F: Mapping[str, pl.DataFrame], table: str, col: str, members: list[str]) -> dict[str, list[tuple]]:
    t = F.get(table)
    if t is None or not t.height or col not in t.columns:
        return {}
    t = t.filter(pl.col("model").is_in(members))
    if table == "f1_bos_floor":  # the floor layers, summed per revision
        t = t.filter(pl.col("layer").is_in([0, 1])).group_by("model", "revision", "tokens").agg(pl.col(col).sum())
    out = {}
    for m in members:
        g = t.filter((pl.col("model") == m) & pl.col("tokens").is_not_null() & pl.col(col).is_not_null()).sort("tokens")
        if g.height:
            out[m] = list(zip(g["tokens"].to_list(), g[col].to_list()))
    return out


def _table(df: pl.DataFrame | None, cols: list[str]) -> str:
    if df is None or not df.height:
        return '<p class="note">(empty)</p>'
    cols = [c for c in cols if c in df.columns]

    def cell(x, col):
        if isinstance(x, float):
            if math.isnan(x):
                return "—"
            if col.startswith("p_") or col == "p_value":  # a p-value up, an interval's ends outward (core.rounding)
                return fmt_p(x)
            side = "lo" if col.endswith("_lo") else "hi" if col.endswith("_hi") else None
            if side and x != 0 and not math.isinf(x):
                q, decimals = directed(x, side, 4)
                return f"{q:.{decimals}f}"
            return f"{x:.4g}"
        if isinstance(x, list):
            return " ".join(map(str, x)) or "—"
        return "—" if x is None else str(x)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell(r[c], c))}</td>" for c in cols) + "</tr>"
                   for r in df.iter_rows(named=True))
    return ("<table><thead><tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr></thead><tbody>" + body
            + "</tbody></table>")
