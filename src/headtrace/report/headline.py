"""The headline: one row per model with the answers, and the run's sentences — formatted.

Every statement is decided in :mod:`headtrace.report.answers` (one :class:`~answers.ModelAnswer` per
model, one :class:`~answers.RunAnswer` per run); this module only lays them out: the rows' cells,
each displayed row (:func:`table_row`: the texts both pages show, the verdict's reason written out),
the legend under the table, and the headline section of ``summary.md`` (:func:`markdown`); the whole
first screen of both pages is :mod:`headtrace.report.first_screen`. A statement or cell resting on a revision flagged by the
checkpoint-integrity check (``suspect``) carries a dagger and a note naming the flag.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import polars as pl

from headtrace.report import answers as A

__all__ = ["headline_rows", "headline_table", "sentences", "verdict_reason", "verdict_word",
           "gap_text", "bracket_text", "bracket_tokens", "markdown", "insert", "flag_notes", "COLUMNS",
           "DAGGER", "Row", "table_row", "legend", "section_markdown"]

CIRCUIT_MILESTONE = A.CIRCUIT_MILESTONE
SINK_MILESTONES = A.SINK_MILESTONES
DAGGER = "†"

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
    ("decided_text", "where the causal test decided"),
    ("spread_text", "sink spread over layers"),
    ("text_sink_text", "sink rate on text"),
]

verdict_word = A.verdict_word


def bracket_tokens(m: A.Milestone) -> str:
    return m.bracket_tokens()


def bracket_text(m: A.Milestone) -> str:
    return m.text()


def gap_text(g: A.Gap) -> str:
    return g.text()


def verdict_reason(a: A.ModelAnswer) -> str:
    return a.reason()


def decided_text(a: A.ModelAnswer) -> str:
    """'causal at step1000, step2000; p ≥ 0.014 (all 70 sets, exact)' / '—' (decided nowhere)."""
    if not a.decided:
        return "—" if a.final is None else "nowhere"
    out = a.decided_words()
    b = a.best
    if b is not None:
        out += f"; smallest p = {A.fmt_p(b.p)} at {b.revision} ({b.control_text()})"
    return out


def _mark(text: str, flags: tuple[str, ...]) -> str:
    return f"{text} {DAGGER}" if flags else text


def headline_rows(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None = None, *,
                  families: Mapping[str, str] | None = None, models: Iterable[str] | None = None,
                  circuit_milestone: str | None = None, sink_milestones: tuple[str, str] = SINK_MILESTONES,
                  suspect: A.Suspect | None = None, groups: Iterable[A.GroupAnswer] = (),
                  continues: Mapping[str, str] | None = None) -> list[dict]:
    """One dict per model: ``answer`` (the :class:`~answers.ModelAnswer`), its parts under their old
    names, and the ``*_text`` cells of :data:`COLUMNS` (a dagger on a cell resting on a flagged
    revision). ``groups``: each seed group gets a row (``group_row``, ``"group": True``) placed
    before its members' rows, which follow it in the group's order. ``continues``: model -> the model
    whose run it continues (:func:`headtrace.panel.config.continuations`)."""
    ans = A.model_answers(findings, verdicts, families=families, models=models,
                          circuit_milestone=circuit_milestone, sink_milestones=sink_milestones, suspect=suspect,
                          continues=continues)
    rows = [row_of(a) for a in ans]
    groups = list(groups)
    if not groups:
        return rows
    by = {r["model"]: r for r in rows}
    out: list[dict] = []
    placed: set[str] = set()
    first = {m: g for g in groups for m, _ in g.members}
    for r in rows:
        g = first.get(r["model"])
        if g is not None and g.group not in placed:  # the group's row where its first member would stand
            placed.add(g.group)
            out.append(group_row(g))
            out += [by[m] for m, _ in g.members if m in by]
        elif g is None:
            out.append(r)
    out += [group_row(g) for g in groups if g.group not in placed]  # a group none of whose members has findings
    return out


def group_row(g: A.GroupAnswer) -> dict:
    """A seed group's headline row: the cells of :data:`COLUMNS`, each worded by :class:`~answers.GroupAnswer`."""
    seeds = ", ".join(str(s) for _, s in g.members)
    return {
        "group": True, "answer": g, "model": f"{g.group} (seeds {seeds})", "group_name": g.group,
        "family": g.family, "n_revisions": f"{g.n} seeds", "verdict": "group", "reason": g.agreement_text(),
        "short_reason": g.cross_seed_text(), "heads": [], "verdict_row": None, "spread": None,
        "circuit_text": g.onset_text(g.circuit_milestone), "sink10_text": g.onset_text(A.SINK_MILESTONES[0]),
        "sink50_text": g.onset_text(g.sink_milestone), "gap_text": f"{g.order_text()}; {g.gap_text()}",
        "heads_text": g.circuit_text(), "verdict_text": "—", "decided_text": g.cross_seed_text() or "—",
        "spread_text": g.agreement_text(),
        "text_sink_text": "—",  # per member in its own row; the group findings do not pool the text probe
    }


def model_rows(rows: list[dict]) -> list[dict]:
    """The models' rows of a headline (the groups' rows left out)."""
    return [r for r in rows if not r.get("group")]


def group_answers_of(rows: list[dict]) -> list[A.GroupAnswer]:
    return [r["answer"] for r in rows if r.get("group")]


# the sink cells of a model with no layer above Finding 1's floor (ModelAnswer.sink_possible)
FLOOR_ONLY = "— (every layer is a floor layer of Finding 1: a sink here would contradict it)"


def row_of(a: A.ModelAnswer) -> dict:
    v = a.final
    heads = list(v.heads) if v is not None else []
    return {
        "answer": a, "model": a.model, "family": a.family, "n_revisions": a.n_revisions,
        "final_revision": a.final_revision, "final_tokens": a.final_tokens,
        "circuit": a.circuit, "sink10": a.sink10, "sink50": a.sink50, "gap50": a.gap50, "gap10": a.gap10,
        "verdict_row": None if v is None else v.row, "verdict": a.verdict, "reason": a.reason(),
        "short_reason": a.short_reason(), "heads": heads, "spread": a.spread,
        "circuit_text": _mark(a.circuit.text(), a.flags_of(a.circuit.rests_on)),
        "sink10_text": _mark(a.sink10.text(), a.flags_of(a.sink10.rests_on)) if a.sink_possible else FLOOR_ONLY,
        "sink50_text": _mark(a.sink50.text(), a.flags_of(a.sink50.rests_on)) if a.sink_possible else FLOOR_ONLY,
        "gap_text": _mark(a.gap50.text(), a.flags_of(a.gap50.rests_on)) if a.sink_possible else FLOOR_ONLY,
        "heads_text": (" ".join(heads) + f" @ {v.revision}") if heads else "—",
        "verdict_text": _mark(A.say(a.verdict), a.flags_of(a.final_rests_on)),
        "decided_text": _mark(decided_text(a), a.flags_of(v.revision for v in a.decided)),
        "spread_text": a.spread if a.spread else "—",
        "text_sink": a.text_sink,
        "text_sink_text": "—" if a.text_sink is None else _mark(a.text_sink.text(), a.flags_of(a.text_sink.rests_on)),
    }


def run_of(rows: list[dict]) -> A.RunAnswer:
    return A.run_answer([r["answer"] for r in model_rows(rows)], group_answers_of(rows))


def sentences(rows: list[dict] | A.RunAnswer) -> list[str]:
    """The run's sentences (:func:`answers.run_answer`), a dagger on one resting on a flagged revision."""
    run = rows if isinstance(rows, A.RunAnswer) else run_of(rows)
    return [_mark(s.text, s.flags) for s in run.statements]


def flag_notes(rows: list[dict] | A.RunAnswer) -> list[str]:
    """One note per flagged revision that a statement or cell rests on: 'toy-neox step1000: duplicate_of step900'."""
    answers = rows.models if isinstance(rows, A.RunAnswer) else [r["answer"] for r in model_rows(rows)]
    run = rows if isinstance(rows, A.RunAnswer) else run_of(rows)
    out = list(run.flags)
    for a in answers:
        used = (a.circuit.rests_on + a.sink10.rests_on + a.sink50.rests_on + a.gap50.rests_on
                + a.final_rests_on + tuple(v.revision for v in a.decided)
                + (a.text_sink.rests_on if a.text_sink is not None else ()))
        out += [f for f in a.flags_of(used) if f not in out]
    return out


def headline_table(rows: list[dict]) -> pl.DataFrame:
    """The displayed cells of :func:`headline_rows` as a table (headers of :data:`COLUMNS`), plus the
    verdict reason."""
    data = {h: [str(r[k]) for r in rows] for k, h in COLUMNS}
    data["verdict reason"] = [r["reason"] for r in rows]
    return pl.DataFrame(data, schema={h: pl.String for h in data})


NOTE = ("Brackets (a–b]: first seen at the revision named (b tokens), not at the screened revision before it "
        "(a tokens); bracket ends and gap bounds are rounded outward (a lower end down, an upper end up). Gap: "
        "tokens at the first-token 50% milestone / tokens at the induction milestone, with the interval the "
        "brackets allow. Verdict: first the model must show the behaviour (its in-context boost, the probe against "
        "the same sequences with the earlier B replaced, with an interval above 0); then the circuit's effect is "
        "ranked among every head set of its shape in its layers (the circuit one of them; all of them, or uniform "
        "draws), and causal needs an effect whose interval lies above 0, p ≤ alpha over that reference set (it "
        "beats its reference set) and the halving rule on its interval (top-1: ablated / baseline at or below 50%; "
        "cross-entropy or logit of B: at most half of the in-context boost left); necessary in part: it beats its "
        "reference set, not shown to halve the behaviour; not causal: it does not beat its reference set; "
        "underpowered: the reference set is too small to reach p ≤ alpha; untested: no reference set, no "
        "behaviour on the probe, or top-1 at its floor with no other metric to decide (docs/statistics.md). The "
        "upper bound (the circuit's layers whole) is reported, not required.")


GROUP_NOTE = ("A seed group's row (before its members'): each milestone's median onset over the seeds as the range of "
              "possible medians the members' brackets allow; the pair's order counted over the seeds whose brackets "
              "decide it, orders that hold only because a milestone never came counted apart, with the exact "
              "two-sided binomial p against 50% over the orders seen (n cannot give less than 2 × 0.5^n); the "
              "gap's range of possible medians; the final circuits' pairwise Jaccard beside its within-layer null "
              "(docs/statistics.md, seed groups).")


LEGEND_TABLES = ("Sink rate on text: Gu et al. 2025's, thresholded per sequence (docs/measures.md), at the last "
                 "revision with a text probe, and the first revision where it reaches half the heads. Tables: "
                 "`f3_milestones`, `f3_onsets`, `f3_gaps`, `f2_layer_spread`, `results/cells/*/*/verdict.parquet`, "
                 "`results/findings/measures/`.")


def legend(groups: bool) -> tuple[str, ...]:
    """The paragraphs under the table: how to read the brackets, the gap, the verdict and the text
    sink rate, and the tables behind them; with ``groups``, how to read a seed group's row."""
    return (NOTE + " " + LEGEND_TABLES,) + ((GROUP_NOTE + " Tables: `results/groups/NAME/`.",) if groups else ())


# A displayed cell: (text, role) parts joined by a space on both pages. role: "" plain, "strong" bold,
# "sub" a second line in the HTML (the revision above its bracket, the revision of the final
# circuit), "why" the verdict's reason under the verdict word.
Part = tuple[str, str]


@dataclass(frozen=True)
class Row:
    """One displayed headline row: ``cells`` in the order of :data:`COLUMNS`."""
    model: str
    cells: tuple[tuple[Part, ...], ...]
    group: str | None = None  # the seed group's name on a group's row
    verdict: str | None = None  # the final verdict's word (the HTML colours the cell by it)

    def texts(self) -> list[str]:
        return [" ".join(t for t, _ in c) for c in self.cells]


def _milestone_cell(text: str, m: A.Milestone) -> tuple[Part, ...]:
    """'step1000 (358K–512K]' as the revision and its bracket."""
    if m.reached and m.revision and text.startswith(f"{m.revision} "):
        return ((m.revision, "sub"), (text[len(m.revision) + 1:], ""))
    return ((text, ""),)


def table_row(r: dict) -> Row:
    """A row of :func:`headline_rows` as displayed: every cell's text, the verdict's reason (its
    effect with the interval, p over which reference sets) written out beside the verdict word."""
    if r.get("group"):
        return Row(r["model"], tuple(((str(r[k]), "strong" if k == "model" else ""),) for k, _ in COLUMNS),
                   group=r["group_name"])
    cells = []
    for key, _ in COLUMNS:
        text = str(r[key])
        if key in ("circuit_text", "sink10_text", "sink50_text"):
            cells.append(_milestone_cell(text, r[key[:-5]]))
        elif key == "heads_text" and r["heads"] and text.endswith(f" @ {r['verdict_row']['revision']}"):
            heads = " ".join(r["heads"])
            cells.append(((heads, ""), (text[len(heads) + 1:], "sub")))
        elif key == "verdict_text":
            cells.append(((text, "strong"), (f"({r['reason']})", "why")))
        else:
            cells.append(((text, ""),))
    return Row(r["model"], tuple(cells), verdict=r["verdict"])


def section_markdown(sents: Iterable[str], rows: Iterable[Row], flags: Iterable[str], notes: Iterable[str]) -> str:
    """The headline section of summary.md: the sentences, the table, the flag notes, the legend."""
    def cell(parts: tuple[Part, ...]) -> str:
        return " ".join(f"**{t}**" if role == "strong" else t for t, role in parts).replace("|", "\\|")

    hdr = [h for _, h in COLUMNS]
    lines = ["## Headline: what this run found", "", *[f"- {s}" for s in sents], "",
             "| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r.cells) + " |" for r in rows]
    flags = list(flags)
    if flags:
        lines += ["", f"{DAGGER} Rests on a revision the checkpoint-integrity check flags: " + "; ".join(flags) + "."]
    for p in notes:
        lines += ["", p]
    return "\n".join(lines + [""])


def markdown(rows: list[dict], sents: list[str] | None = None) -> str:
    """The headline as the top section of summary.md: the sentences, then the table (verdict with
    its reason), then a note per flagged revision and the legend."""
    sents = sentences(rows) if sents is None else sents
    return section_markdown(sents, [table_row(r) for r in rows], flag_notes(rows),
                            legend(any(r.get("group") for r in rows)))


def insert(summary_md: str, section: str) -> str:
    """``section`` placed after summary.md's title block, before its first ``## `` section."""
    i = summary_md.find("\n## ")
    if i < 0:
        return summary_md.rstrip("\n") + "\n\n" + section
    return summary_md[:i + 1] + section + "\n" + summary_md[i + 1:]
