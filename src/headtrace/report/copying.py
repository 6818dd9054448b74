"""Prefix matching and copying beside the screen's induction circuit, on summary.md and summary.html.

The screen picks its induction circuit on induction selectivity alone; Olsson et al. 2022 call a head an
induction head when it does two things, prefix matching and copying. This section reads the findings
table ``measures_circuit_copying`` (:func:`headtrace.findings.measures.circuit_copying`) and, for every
model whose weights ran here, shows its final revision's circuit heads with their prefix-matching score
and both readings of their OV eigenvalues (docs/measures.md), how many pass both, and that count at
every revision with a circuit. :func:`facts` decides what is said; :func:`markdown` and :func:`html`
only lay it out, so the two pages carry the same facts. :func:`circuit_text` is the console's short form
for one cell.
"""
from __future__ import annotations

import html as _html
from dataclasses import dataclass
from typing import Iterable, Mapping

import polars as pl

TABLE = "measures_circuit_copying"
OVER = "measures_over_training"

READINGS = ("Olsson et al. (2022) call a head an induction head when it does two things: prefix matching (on "
            "random tokens repeated, it attends to the token that followed the current token's earlier "
            "occurrence) and copying (its OV circuit raises the logit of the token it attends to); the screen "
            "picks its circuit on induction selectivity alone. Beside each model's final circuit: every head's "
            "prefix-matching score on the repeated-random probe (prefix-matching above {prefix}, headtrace's "
            "convention: the paper sets no threshold) and the eigenvalues λ of its OV circuit W_E W_V W_O W_U, "
            "read two ways: the positive-eigenvalue share Σ max(Re λ, 0) / Σ |λ| in [0, 1], which decides "
            "(copying above {copying}), and Elhage et al. (2021)'s ratio Σ λ / Σ |λ| in [−1, 1], shown "
            "beside it. A share above 0.5 implies a positive ratio, and on a real spectrum share = (1 + ratio) / 2; "
            "complex eigenvalues pull the share down, so at random init it sits near 0.3 while the ratio "
            "sits near 0 (docs/measures.md). Copying selects little: the last column counts how many of all the "
            "revision's heads pass each test, and prefix matching on a second synthetic probe says the screen is "
            "consistent, not that the heads do induction on text.")


@dataclass(frozen=True)
class HeadScores:
    head: str  # "L1H3"
    selectivity: float  # induction selectivity (x)
    prefix: float | None  # prefix-matching score
    share: float | None  # positive-eigenvalue share (decides copying)
    ratio: float | None  # Elhage et al.'s eigenvalue ratio (None: not stored)
    prefix_matches: bool
    copies: bool

    @property
    def passes(self) -> str:
        return {(True, True): "both", (True, False): "prefix matching only", (False, True): "copying only",
                (False, False): "neither"}[(self.prefix_matches, self.copies)]


@dataclass(frozen=True)
class ModelCopying:
    model: str
    revision: str | None  # the final revision (None: no measures for this model)
    heads: tuple[HeadScores, ...]  # the final revision's circuit heads (empty: no circuit there)
    n_heads: int | None  # every head of the final revision, and of them prefix-matching / copying
    n_heads_prefix: int | None
    n_heads_copying: int | None
    over_training: tuple[tuple[str, int, int], ...]  # (revision, heads passing both, circuit heads)

    @property
    def n_both(self) -> int:
        return sum(h.prefix_matches and h.copies for h in self.heads)

    def count(self, attr: str) -> int:
        return sum(bool(getattr(h, attr)) for h in self.heads)


@dataclass(frozen=True)
class Facts:
    models: tuple[ModelCopying, ...]
    unmeasured: tuple[str, ...]  # models on the page with no prefix-matching or copying scores
    prefix_threshold: float | None  # the table's (None: no row to read them from, no head was judged)
    copying_threshold: float | None
    ratio_stored: bool  # any final circuit head carries Elhage et al.'s ratio


def facts(findings: Mapping[str, pl.DataFrame], models: Iterable[str] = ()) -> Facts | None:
    """What the section says, from the findings tables; None when the run has no copying table (the
    measures did not run). ``models``: the page's models, to name those without scores."""
    table = findings.get(TABLE)
    if table is None:
        return None
    over = findings.get(OVER)
    finals = {}
    if over is not None and over.height:  # every revision with measures, in token order
        for (m,), g in over.group_by("model", maintain_order=True):
            finals[m] = g.sort("tokens", nulls_last=True)["revision"][-1]
    for (m,), g in table.group_by("model", maintain_order=True):
        finals.setdefault(m, g.sort("tokens", nulls_last=True)["revision"][-1])
    out = []
    for m, final in finals.items():
        g = table.filter(pl.col("model") == m).sort("tokens", "layer", "head", nulls_last=True)
        last = g.filter(pl.col("revision") == final)
        heads = tuple(HeadScores(f"L{r['layer']}H{r['head']}", r["sel_induction"], r["prefix_matching"], r["copying"],
                                 r["copying_eigenvalue_ratio"], bool(r["prefix_matches"]), bool(r["copies"]))
                      for r in last.iter_rows(named=True))
        first = last.row(0, named=True) if last.height else {}
        per_rev = tuple((rev, int(x["n_both"][0]), int(x["n_circuit"][0]))
                        for (rev,), x in g.group_by("revision", maintain_order=True))
        out.append(ModelCopying(m, final, heads, first.get("n_heads"), first.get("n_heads_prefix"),
                                first.get("n_heads_copying"), per_rev))
    thresholds = table.row(0, named=True) if table.height else {}  # as the findings table decided
    return Facts(tuple(out), tuple(m for m in models if m not in finals),
                 thresholds.get("prefix_threshold"), thresholds.get("copying_threshold"),
                 any(h.ratio is not None for mc in out for h in mc.heads))


def _readings(f: Facts) -> str:
    """READINGS with the thresholds the findings table recorded ("its threshold" where it holds no row)."""
    return READINGS.format(prefix=_threshold(f.prefix_threshold), copying=_threshold(f.copying_threshold))


def _threshold(x: float | None) -> str:
    return "its threshold" if x is None else f"{x:g}"


def _num(x, fmt: str = "{:.2f}") -> str:
    return "—" if x is None or x != x else fmt.format(x)


def _range(xs: list, fmt: str = "{:.2f}") -> str:
    xs = [x for x in xs if x is not None and x == x]
    if not xs:
        return "—"
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def _failing(mc: ModelCopying) -> str:
    """The circuit heads that miss one property or both, with the number that misses."""
    out = []
    for h in mc.heads:
        miss = ([] if h.prefix_matches else [f"prefix-matching {_num(h.prefix)}"]) + (
            [] if h.copies else [f"copying share {_num(h.share)}"])
        if miss:
            out.append(f"{h.head} ({', '.join(miss)})")
    return "; ".join(out) or "none"


def _summary_cells(mc: ModelCopying) -> list[str]:
    """One model's row: final revision, circuit, each property's count and range, both, the heads that
    miss, and for scale every head of the revision."""
    if mc.revision is None or not mc.heads:
        return [mc.model, mc.revision or "—", "not measured" if mc.revision is None else "no induction circuit",
                "", "", "", "", ""]
    n = len(mc.heads)
    scale = f"{mc.n_heads_prefix} / {mc.n_heads_copying} of {mc.n_heads}" if mc.n_heads else "—"
    return [mc.model, mc.revision, f"{n} heads",
            f"{mc.count('prefix_matches')} of {n} (score {_range([h.prefix for h in mc.heads])})",
            f"{mc.count('copies')} of {n} (share {_range([h.share for h in mc.heads])}"
            + (f"; Elhage ratio {_range([h.ratio for h in mc.heads], '{:+.2f}')}" if any(
                h.ratio is not None for h in mc.heads) else "") + ")",
            f"{mc.n_both} of {n}", _failing(mc), scale]


SUMMARY_HEADER = ["model", "final revision", "induction circuit", "prefix-matching", "copying", "both",
                  "heads that miss", "all the revision's heads: prefix-matching / copying"]
HEAD_HEADER = ["model", "head", "induction selectivity", "prefix-matching score", "copying: positive share",
               "copying: Elhage ratio", "passes"]
DETAILS = "every head of the final circuits"


def _head_cells(mc: ModelCopying, h: HeadScores) -> list[str]:
    return [mc.model, h.head, _num(h.selectivity, "{:.0f}×"), _num(h.prefix), _num(h.share), _num(h.ratio, "{:+.2f}"),
            h.passes]


def _over_text(f: Facts) -> str:
    parts = [f"{mc.model}: " + ", ".join(f"{rev} {b} of {n}" for rev, b, n in mc.over_training)
             for mc in f.models if len(mc.over_training) > 1]
    return ("Over training, circuit heads passing both at each revision with a circuit: " + "; ".join(parts) + "."
            if parts else "")


def _notes(f: Facts) -> list[str]:
    notes = []
    if not f.ratio_stored and any(mc.heads for mc in f.models):
        notes.append("Elhage et al.'s ratio is not stored by these cells (written before it was kept; a rerun of "
                     "the capture jobs stores it).")
    if f.unmeasured:
        notes.append("No prefix-matching or copying scores for " + ", ".join(f.unmeasured)
                     + " (no weights ran here: imported selectivities).")
    return notes


def markdown(findings: Mapping[str, pl.DataFrame], models: Iterable[str] = ()) -> str:
    """The summary.md section ('' when the run has no copying table)."""
    f = facts(findings, models)
    if f is None:
        return ""
    out = ["## Prefix matching and copying of the induction circuit", "",
           _readings(f), ""]
    rows = [_summary_cells(mc) for mc in f.models]
    out += [_md(SUMMARY_HEADER, rows), ""]
    heads = [_head_cells(mc, h) for mc in f.models for h in mc.heads]
    if heads:  # folded: the counts above carry the answer
        out += [f"<details><summary>{DETAILS}</summary>", "", _md(HEAD_HEADER, heads), "", "</details>", ""]
    over = _over_text(f)
    for t in [over] + _notes(f):
        out += [t, ""] if t else []
    return "\n".join(out).rstrip() + "\n"


def html(findings: Mapping[str, pl.DataFrame], models: Iterable[str] = ()) -> str:
    """The summary.html section ('' when the run has no copying table): the same facts as :func:`markdown`."""
    f = facts(findings, models)
    if f is None:
        return ""
    e = _html.escape
    out = ['<section id="copying"><h2>Prefix matching and copying of the induction circuit</h2>',
           f"<p>{e(_readings(f))}</p>",
           _table(SUMMARY_HEADER, [_summary_cells(mc) for mc in f.models])]
    heads = [_head_cells(mc, h) for mc in f.models for h in mc.heads]
    if heads:  # folded: the counts above carry the answer
        out.append(f"<details><summary>{e(DETAILS)}</summary>{_table(HEAD_HEADER, heads)}</details>")
    out += [f"<p>{e(t)}</p>" for t in [_over_text(f)] + _notes(f) if t]
    return "\n".join(out) + "</section>"


def circuit_text(heads: Iterable[str], decided: pl.DataFrame | None) -> str:
    """For the console's circuit line: 'prefix-matching and copying: 4 of 5 heads (prefix-matching 5,
    copying 4)', from one cell's heads as :func:`headtrace.findings.measures.head_decisions` decided them
    (its ``prefix_matches``, ``copies`` and thresholds: the API's ``CellTables.copying_heads``); '' without
    them or without heads."""
    heads = list(heads)
    if decided is None or not decided.height or not heads:
        return ""
    rows = {f"L{r['layer']}H{r['head']}": r for r in decided.iter_rows(named=True)}
    found = [rows[h] for h in heads if h in rows]
    if not found:
        return ""
    pm, cp = [bool(r["prefix_matches"]) for r in found], [bool(r["copies"]) for r in found]
    both = sum(a and b for a, b in zip(pm, cp))
    return (f"prefix-matching (> {found[0]['prefix_threshold']:g}) and copying (OV positive-eigenvalue share > "
            f"{found[0]['copying_threshold']:g}): {both} of {len(found)} heads (prefix-matching {sum(pm)}, "
            f"copying {sum(cp)})")


def _md(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _table(header: list[str], rows: list[list[str]]) -> str:
    e = _html.escape
    return ('<table class="copying"><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows) + "</tbody></table>")
