"""The strongest head of each class over a model's revisions, in words: the findings'
``strongest_trend`` table (:mod:`headtrace.findings.strongest` decides the threshold reached, the
peak and the trend; nothing is decided here), so that a model whose strongest first-token head is
rising towards the threshold ("none yet, rising") reads apart from one that stays near 1× ("none,
flat"). Used by summary.md, summary.html's model sections and ``headtrace summary``."""
from __future__ import annotations

from typing import Iterable

import polars as pl

__all__ = ["fmt_sel", "state_text", "class_text", "model_text", "model_line", "markdown", "CONSOLE_CLASSES"]

CONSOLE_CLASSES = ("induction", "first-token")  # the console's line: the classes of the headline's milestones


def fmt_sel(x: float) -> str:
    """A selectivity with three significant digits: 1.06×, 15.2×, 235×."""
    return f"{x:.3g}×" if x < 1000 else f"{x:,.0f}×"


def state_text(r: dict) -> str:
    """Where the strongest head stands against the class's threshold, and its trend: 'reached 30× at
    step400', 'reached 30× at step400, below it at the last revision', 'below 30× at every revision:
    none yet, rising' / 'none, flat' / 'none, falling'."""
    thr = f"{r['threshold']:g}×"
    if r["reached_revision"] is not None:
        return f"reached {thr} at {r['reached_revision']}" + ("" if r["reached_last"] else ", below it at the last revision")
    if r["trend"] == "one_revision":
        return f"below {thr} at the one revision screened: none"
    if r["trend"] == "rising":
        return f"below {thr} at every revision: none yet, rising"
    return f"below {thr} at every revision: none, {r['trend']}"


def class_text(r: dict) -> str:
    """One class of a model: 'first-token 1.06× → 15.2× (L2H1; below 30× at every revision: none yet,
    rising)'; the peak where it is above the last revision's value."""
    if r["trend"] == "one_revision":
        path = f"{fmt_sel(r['last_selectivity'])}"
    else:
        path = f"{fmt_sel(r['first_selectivity'])} → {fmt_sel(r['last_selectivity'])}"
    peak = (f", peak {fmt_sel(r['peak_selectivity'])} at {r['peak_revision']} ({r['peak_head']})"
            if r["peak_selectivity"] > r["last_selectivity"] else "")
    return f"{r['class']} {path} ({r['last_head']}{peak}; {state_text(r)})"


def model_text(trend: pl.DataFrame | None, model: str, classes: Iterable[str] | None = None) -> str:
    """A model's classes (all, or ``classes`` in that order), '; '-joined :func:`class_text` ("" without the table)."""
    return "; ".join(class_text(r) for r in _rows(trend, model, classes))


def model_line(trend: pl.DataFrame | None, model: str, classes: Iterable[str] | None = None) -> str:
    """A model's strongest head per class, first → last revision, in one line ("" without the table):
    'strongest head, first → last revision: induction 1.00× → 1.36× (…); first-token …'."""
    text = model_text(trend, model, classes)
    return f"strongest head, first → last revision: {text}" if text else ""


def markdown(trend: pl.DataFrame | None, models: Iterable[str]) -> str:
    """summary.md's section: per model and class, the strongest head's selectivity at the first and
    last revision, its peak, the threshold and where it was reached, and the trend ("" without the table)."""
    models = [m for m in models if _rows(trend, m, None)]
    if not models:
        return ""
    lines = ["## The strongest head of each class\n",
             "Per model and class, the largest selectivity of any head at the first and the last revision "
             "screened (the head at the last), its peak, and where it stands against the class's threshold "
             "(the circuit threshold for induction), so that a class with no head at the threshold yet reads "
             f"apart from one that never moved. Trend: the last revision's value against the first's, at a "
             f"factor of {trend['trend_factor'][0]:g} (`findings.trend_factor`). Figure: `strongest_heads.png`; "
             "tables: `strongest_head`, `strongest_trend`.\n",
             "| model | class | first → last | head (last) | peak | threshold | where it stands |",
             "|---|---|---|---|---|---|---|"]
    for m in models:
        for r in _rows(trend, m, None):
            path = (fmt_sel(r["last_selectivity"]) if r["trend"] == "one_revision"
                    else f"{fmt_sel(r['first_selectivity'])} → {fmt_sel(r['last_selectivity'])}")
            lines.append(f"| {m} | {r['class']} | {path} | {r['last_head']} | "
                         f"{fmt_sel(r['peak_selectivity'])} at {r['peak_revision']} ({r['peak_head']}) | "
                         f"{r['threshold']:g}× | {state_text(r)} |")
    return "\n".join(lines) + "\n"


def _rows(trend: pl.DataFrame | None, model: str, classes: Iterable[str] | None) -> list[dict]:
    if trend is None or not trend.height:
        return []
    rows = trend.filter(pl.col("model") == model).rows(named=True)
    if classes is not None:
        keep = list(classes)
        rows = sorted((r for r in rows if r["class"] in keep), key=lambda r: keep.index(r["class"]))
    return rows
