"""Two finished runs side by side (``headtrace compare RESULTS_A RESULTS_B``): each headline question,
then each panel's answer to it, one line per model, aligned.

Reads each results folder as ``headtrace summary`` does (only the models of its ``panel.json``,
its tables read by :func:`headtrace.core.results.read`), so a stale cell of another panel in a folder never enters.
``RESULTS:MODEL`` keeps one model of a folder: ``headtrace compare results:toy-neox-seed1 results:toy-olmo``
puts two models of one panel side by side. Formats only: every answer is the headline's cell.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from headtrace.core import results as R
from headtrace.report import console
from headtrace.report import headline as HL

__all__ = ["Side", "parse", "compare"]

WIDTH = 110


@dataclass(frozen=True)
class Side:
    """One column of the comparison: a results folder and, optionally, one model of it."""
    results: Path
    model: str | None = None

    @property
    def label(self) -> str:
        return f"{self.results}:{self.model}" if self.model else str(self.results)


def parse(arg: str) -> Side:
    """``RESULTS`` or ``RESULTS:MODEL`` (a folder whose name holds a colon is taken whole where it exists)."""
    if Path(arg).is_dir() or ":" not in arg:
        return Side(Path(arg))
    folder, model = arg.rsplit(":", 1)
    return Side(Path(folder), model or None)


def compare(args: list[str] | list[Side]) -> tuple[str, list[str]]:
    """The comparison in text, and the problems (a folder missing, a model not there): each question of
    the headline (:data:`headtrace.report.headline.COLUMNS`), each side's models' answers below it."""
    sides = [a if isinstance(a, Side) else parse(a) for a in args]
    problems: list[str] = []
    entries: list[tuple[str, dict]] = []  # (side label, headline row)
    for side in sides:
        rows, bad = _rows(side)
        problems += bad
        entries += [(str(side.results), r) for r in rows]  # the model is the next column
    if not entries:
        return "", problems
    lab = max(len(s) for s, _ in entries)
    mod = max(len(r["model"]) for _, r in entries)
    lines = ["headtrace compare: " + " | ".join(s.label for s in sides), ""]
    for key, title in HL.COLUMNS:
        if key == "model":
            continue
        lines.append(title)
        for label, r in entries:
            lead = f"  {label:<{lab}}  {r['model']:<{mod}}  "
            lines.append(textwrap.fill(str(r.get(key, "—")), max(WIDTH, len(lead) + 48), initial_indent=lead,
                                       subsequent_indent=" " * len(lead)))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n", problems


def _rows(side: Side) -> tuple[list[dict], list[str]]:
    """The headline rows of a side (its model's alone with ``model``) and the problems found."""
    if not side.results.is_dir():
        return [], [f"{side.results}: no such folder"]
    rows, fs = console.screen_of(R.read(side.results))
    if fs is None:
        return [], [f"{side.results}: no findings yet (has the workflow finished there?)"]
    rows = [r for r in rows if not r.get("group")]
    if side.model is not None:
        found = [r for r in rows if r["model"] == side.model]
        if not found:
            names = ", ".join(r["model"] for r in rows) or "none"
            return [], [f"{side.label}: no model {side.model} in {side.results} (its models: {names})"]
        rows = found
    return rows, []
