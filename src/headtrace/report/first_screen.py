"""The first screen of ``summary.md`` and ``summary.html``: one structure, two renderers.

:func:`build` gathers every fact the first screen states — the models and thresholds, the
selectivity baseline of each model's screens, identical-weights warnings, the checkpoint-lineage
banner, the config's notes, the probe, the run's sentences, the headline table's cells (the
verdict's effect and interval as text), the flag notes and the legend (the sink-rate definition,
the tables' paths) — into a :class:`FirstScreen`. :func:`markdown` and :func:`html` lay it out;
neither adds a fact of its own, so the two pages say the same things (``tests/report/test_parity.py``
compares their fact lists). Texts carry a small inline markup: ```code``` and ``**bold**``, which
the markdown renderer keeps and the HTML renderer turns into ``<code>`` and ``<b>``.
"""
from __future__ import annotations

import html as _html
import re
from dataclasses import dataclass
from typing import Mapping

import polars as pl
from headtrace.models import provenance
from headtrace.probe import words as probe_words
from headtrace.report import headline as HL
from headtrace.report import lineage as RL

__all__ = ["FirstScreen", "build", "markdown", "html", "inline_html", "plain", "intro_line", "baseline_line", "UNRECORDED",
           "WARNING_TITLE", "WARNING_AFTER"]

UNRECORDED = "not recorded (imported selectivities: the author's sampled baseline)"
WARNING_TITLE = "Warning: identical weights under different revision names"
WARNING_AFTER = "The findings below treat them as separate checkpoints; see each cell's provenance.parquet."

@dataclass(frozen=True)
class FirstScreen:
    intro: str = ""  # the models, the thresholds, the token units
    baseline: str = ""  # the selectivity baseline of each model's screens
    warnings: tuple[str, ...] = ()  # revisions of one model with byte-identical weights
    banner: str = ""  # the checkpoint-lineage banner (markdown of headtrace.report.lineage)
    notes: tuple[tuple[str, str], ...] = ()  # (model, the config's note)
    probes: tuple[tuple[str, str], ...] = ()  # (models sharing a probe, the probe in words)
    sentences: tuple[str, ...] = ()
    columns: tuple[str, ...] = tuple(h for _, h in HL.COLUMNS)
    rows: tuple[HL.Row, ...] = ()
    flags: tuple[str, ...] = ()  # one note per flagged revision a statement or cell rests on
    legend: tuple[str, ...] = ()  # paragraphs under the table: how to read it, the tables behind it


# ------------------------------------------------------------------------------------------- facts


def _models(traj: pl.DataFrame) -> list[str]:
    return traj["model"].unique(maintain_order=True).to_list()


def intro_line(models: list[str], class_threshold: float, induction_threshold: float) -> str:
    """'Models: a, b. Class threshold 30×, induction circuit 50×. Tokens: …'."""
    return (f"Models: {', '.join(models)}. Class threshold {class_threshold:g}×, induction circuit "
            f"{induction_threshold:g}×. Tokens: K/M/B/T = 10^3/6/9/12. The tables behind this page are the Parquet "
            "files next to it.")


def baseline_line(traj: pl.DataFrame) -> str:
    """Which selectivity baseline the screens used (``cell.screen``; the trajectory's
    ``screen_baseline``): one value for the run, else each value with the models that used it."""
    col = "screen_baseline" in traj.columns
    per: dict[str, list[str]] = {}
    for m in _models(traj):
        vals = sorted(set(traj.filter(pl.col("model") == m)["screen_baseline"].drop_nulls())) if col else []
        per.setdefault(", ".join(vals) if vals else UNRECORDED, []).append(m)
    what = (f"**{next(iter(per))}**" if len(per) == 1 else
            "; ".join(f"**{v}** for {', '.join(ms)}" for v, ms in per.items()))
    return (f"Selectivity baseline: {what} (`screen.baseline`; the sampled baseline's keys include a sequence's own "
            "answer in a share of the sequences, which caps induction selectivity, ~235× at T = 256; the clean one "
            "cannot: docs/statistics.md).")


def build(rows: list[dict], sents: list[str] | None = None, *, traj: pl.DataFrame | None = None,
          class_threshold: float | None = None, induction_threshold: float | None = None,
          lineage: pl.DataFrame | None = None, on_suspect: str = "warn", notes: Mapping[str, str] | None = None,
          probes: Mapping[str, str] | None = None) -> FirstScreen:
    """The first screen of a run: ``rows`` of :func:`headline.headline_rows`, ``sents`` its sentences
    (:func:`headline.sentences` when None); ``traj`` the trajectories (the models line, the
    selectivity baseline, identical weights: left out without it); the thresholds (the models line:
    left out without them); ``lineage`` the checkpoint-lineage tables (the banner); ``notes`` /
    ``probes``: model -> the config's note / the probe in words."""
    sents = HL.sentences(rows) if sents is None else sents
    intro = baseline = ""
    warnings: tuple[str, ...] = ()
    if traj is not None and traj.height:
        if class_threshold is not None and induction_threshold is not None:
            intro = intro_line(_models(traj), class_threshold, induction_threshold)
        baseline = baseline_line(traj)
        warnings = tuple(provenance.warning_lines(traj))
    return FirstScreen(
        intro=intro, baseline=baseline, warnings=warnings, banner=RL.banner_markdown(lineage, on_suspect),
        notes=tuple((m, t.strip()) for m, t in (notes or {}).items()),
        probes=tuple((probe_words.names(ms), t) for ms, t in probe_words.grouped(probes or {})),
        sentences=tuple(sents), rows=tuple(HL.table_row(r) for r in rows), flags=tuple(HL.flag_notes(rows)),
        legend=HL.legend(any(r.get("group") for r in rows)))


# ---------------------------------------------------------------------------------------- markdown


def markdown(fs: FirstScreen) -> str:
    """The first screen below summary.md's title block (:func:`summary.render` writes the models and
    baseline lines with :func:`intro_line` and :func:`baseline_line`): the banner, the notes, the probe,
    then the headline section — the sentences, the table, the flag notes, the legend."""
    out = fs.banner + ("\n" if fs.banner else "")  # a blank line: what follows is no part of the quote
    if fs.notes:
        out += "**About the models** (the config's notes):\n\n" + "".join(f"- {m}: {t}\n" for m, t in fs.notes) + "\n"
    if fs.probes:
        out += ("**Probe** (the synthetic induction batch every screen read):\n\n"
                + "".join(f"- {m}: {t}\n" for m, t in fs.probes) + "\n")
    return out + HL.section_markdown(fs.sentences, fs.rows, fs.flags, fs.legend)


# -------------------------------------------------------------------------------------------- html


def plain(text: str) -> str:
    """A text without its inline markup (the console); a code span's content kept as written (a token
    such as ``**`` stays)."""
    parts = re.split(r"`([^`]+)`", text)  # odd items: code, kept literal
    return "".join(p if i % 2 else p.replace("**", "").replace("`", "") for i, p in enumerate(parts))


def inline_html(text: str) -> str:
    """A text's inline markup as HTML: ```code``` -> ``<code>``, ``**bold**`` -> ``<b>``, the rest escaped."""
    parts = re.split(r"`([^`]+)`", text)  # odd items: code, kept literal
    out = []
    for i, p in enumerate(parts):
        if i % 2:
            out.append(f"<code>{_html.escape(p)}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", _html.escape(p)))
    return "".join(out)


def _banner_html(banner: str) -> str:
    """The lineage banner (markdown: a quoted paragraph and a list) as a boxed HTML block."""
    if not banner:
        return ""
    lines = [ln[1:].strip() for ln in banner.splitlines() if ln.startswith(">") and ln[1:].strip()]
    head = [inline_html(ln) for ln in lines if not ln.startswith("- ")]
    items = "".join(f"<li>{inline_html(ln[2:])}</li>" for ln in lines if ln.startswith("- "))
    return ('<div class="lineage-banner" style="border:2px solid #b00;padding:0.4em 0.8em;margin:0.5em 0">'
            + "".join(f"<p>{h}</p>" for h in head) + (f"<ul>{items}</ul>" if items else "") + "</div>")


_ROLE = {"": "{}", "strong": "<b>{}</b>", "sub": '<span class="rev">{}</span>', "why": '<span class="why">{}</span>'}
_TD_CLASS = {"n_revisions": "num", "circuit_text": "wrap", "sink10_text": "wrap", "sink50_text": "wrap",
             "heads_text": "wrap", "gap_text": "wrap", "decided_text": "wrap", "text_sink_text": "wrap"}


def _td(key: str, parts: tuple[HL.Part, ...], r: HL.Row, link_models: bool) -> str:
    inner = " ".join(_ROLE[role].format(_html.escape(t)) for t, role in parts)
    if key == "model" and link_models:
        href = f"#group-{r.group}" if r.group is not None else f"#model-{r.model}"
        inner = f'<a href="{_html.escape(href)}">{inner}</a>'
    if r.group is not None:
        cls = "wrap"
    elif key == "verdict_text":
        cls = (f"v-{r.verdict}" if r.verdict in ("causal", "partial", "not_causal", "underpowered") else "v-none") + " wrap verdict"
    else:
        cls = _TD_CLASS.get(key, "")
    return f'<td class="{cls}">{inner}</td>' if cls else f"<td>{inner}</td>"


def html(fs: FirstScreen, *, link_models: bool = True) -> str:
    """The first screen of summary.html (and of the report's "Answers" result): the banner, the
    sentences, the table, the flag notes, the legend with the models and baseline lines, the
    identical-weights warnings, the notes and the probe. Every fact is visible text."""
    out = ['<div class="ht">', _banner_html(fs.banner),
           '<ul class="lede" id="sentences">' + "".join(f"<li>{inline_html(s)}</li>" for s in fs.sentences) + "</ul>"]
    head = "".join(f"<th>{_html.escape(h)}</th>" for h in fs.columns)
    body = []
    for r in fs.rows:
        attr = f' class="group" data-group="{_html.escape(r.group)}"' if r.group is not None else \
            f' data-model="{_html.escape(r.model)}"'
        body.append(f"<tr{attr}>" + "".join(_td(k, c, r, link_models) for (k, _), c in zip(HL.COLUMNS, r.cells))
                    + "</tr>")
    out.append(f'<table class="headline" id="headline"><thead><tr>{head}</tr></thead><tbody>'
               + "".join(body) + "</tbody></table>")
    if fs.flags:
        out.append(f'<p class="note flags" id="flags">{HL.DAGGER} Rests on a revision the checkpoint-integrity '
                   "check flags: " + "; ".join(_html.escape(n) for n in fs.flags) + ".</p>")
    out += [f'<p class="note">{inline_html(p)}</p>' for p in (*fs.legend, fs.baseline, fs.intro) if p]
    if fs.warnings:
        out.append(f'<h3 class="warning">{_html.escape(WARNING_TITLE)}</h3><ul>'
                   + "".join(f"<li>{_html.escape(w)}</li>" for w in fs.warnings) + f"</ul><p>{_html.escape(WARNING_AFTER)}</p>")
    if fs.notes:
        out.append('<p class="note"><b>About the models</b> (the config\'s notes):</p><ul class="note">'
                   + "".join(f"<li>{_html.escape(m)}: {_html.escape(t)}</li>" for m, t in fs.notes) + "</ul>")
    if fs.probes:
        out.append('<p class="note"><b>Probe</b> (the synthetic induction batch every screen read):</p><ul class="note">'
                   + "".join(f"<li>{_html.escape(m)}: {_html.escape(t)}</li>" for m, t in fs.probes) + "</ul>")
    out.append("</div>")
    return "\n".join(p for p in out if p)
