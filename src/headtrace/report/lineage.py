"""The lineage section of the report: is each revision the checkpoint its name says?

Renders the ``lineage`` tables (``results/models/{model}/lineage.parquet``,
:mod:`headtrace.findings.lineage`) as

* a *banner* (:func:`banner_markdown`, :func:`banner_html`): one line per flagged revision, and one
  per pair of revisions of two models that the config declares to be one checkpoint (a continuation's
  start), for the first screen of ``summary.md`` / ``summary.html`` (empty when there is neither);
* a *section* per model (:func:`section_markdown`, :func:`section_html`): every revision with its
  distance from the model's earliest revision and from the previous one, its cosine to the earliest,
  the revisions it shares files, shards or matrices with, and its flags;
* :func:`suspect`: ``(model, revision) -> flag labels``, the mapping with which the headline and the
  summary mark each statement resting on a flagged revision.

Every function words the panel's table as the findings job wrote it (``lineage_panel``:
:func:`headtrace.findings.lineage_panel.panel_table`), where the same weights under two models' names are
flagged, or noted where the config declares them (``same_weights_as``, ``declared_same``); nothing is
decided here. Pure functions of the table.
"""
from __future__ import annotations

import html as _html

import polars as pl

from headtrace.findings import lineage as _lineage
from headtrace.report.format import fmt_tokens

__all__ = ["suspect", "continuations", "banner_markdown", "banner_html", "section_markdown", "section_html", "INTEGRITY_DOC"]

INTEGRITY_DOC = "docs/integrity.md"


def suspect(table: pl.DataFrame | None):
    """``(model, revision) -> ["duplicate_of main", ...]`` for every flagged revision of the
    ``lineage_panel`` table (flags across models included; empty mapping when nothing is flagged or there
    is no table): what the headline and summary mark."""
    if table is None or table.is_empty():
        return {}
    return {(r["model"], r["revision"]): _lineage.flag_labels(r) for r in table.iter_rows(named=True) if r["flags"]}


def continuations(table: pl.DataFrame | None) -> dict[str, str]:
    """Model -> the model whose training run it continues, as the lineage tables record the config's
    declaration (``continues``): the first screen counts such a run once."""
    if table is None or "continues" not in table.columns:
        return {}
    rows = table.filter(pl.col("continues").is_not_null() & (pl.col("continues") != "")).select("model", "continues")
    return dict(rows.unique(maintain_order=True).iter_rows())


def _num(x, digits=3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


# what a flag does under provenance.on_suspect; the flags across models are the report's own (the lineage
# job, which drops or fails, sees one model), so they are marked whatever the mode
_MODE_MD = {"warn": "the findings below include them; statements resting on them are marked",
            "drop": "the findings below leave them out (provenance.on_suspect: drop)",
            "fail": "the run stops on them (provenance.on_suspect: fail)"}
_MODE_HTML = {"warn": "statements resting on them are marked", "drop": "the findings leave them out",
              "fail": "the run stops on them"}
_PANEL_ONLY = ("a flag raised across models is found where the panel's tables meet: it marks the statements "
               "resting on it, and provenance.on_suspect does not act on it")


def _banner_parts(table: pl.DataFrame | None) -> tuple[list[dict], bool, list[str]]:
    """(flagged rows, whether any carries a flag across models, declared same-weight sentences)."""
    bad = _lineage.flagged(table)
    rows = list(bad.sort("model", "order").iter_rows(named=True))
    panel = any(set(r["flags"]) & set(_lineage.PANEL_FLAGS) for r in rows)
    return rows, panel, _declared(table)


def _declared(table: pl.DataFrame | None) -> list[str]:
    """One sentence per revision pair the config declares to be one checkpoint: the ``declared_same`` of
    each continuation's first revision (its parent's last), by the continuation's name."""
    if table is None or table.is_empty() or "declared_same" not in table.columns:
        return []
    out = []
    for model, g in sorted(table.group_by("model"), key=lambda kv: kv[0][0]):
        first = g.sort("order").row(0, named=True)
        parent = first.get("continues")
        for other in (first["declared_same"] or []) if parent else []:
            out.append(f"{model[0]} {first['revision']} and {other} are the same weights, byte for byte, as the "
                       f"config declares ({model[0]} continues {parent} from its last checkpoint): one checkpoint, "
                       "to be counted once, not as two independent observations")
    return out


def _label(r: dict) -> str:
    return f"{r['model']} {r['revision']}: " + ", ".join(
        _lineage.flag_labels(r))


def banner_markdown(table: pl.DataFrame | None, on_suspect: str = "warn") -> str:
    """A short block for the top of summary.md listing each flagged revision and each declared pair of
    revisions that are one checkpoint ("" when neither)."""
    rows, panel, same = _banner_parts(table)
    out = ""
    if rows:
        lines = [f"- **{_label(r)}**" + (f" — {r['detail']}" if r["detail"] else "") for r in rows]
        note = f"; {_PANEL_ONLY}" if panel else ""
        out += (f"> **Checkpoint lineage: {len(rows)} revision{'s' if len(rows) != 1 else ''} flagged** "
                f"({_MODE_MD[on_suspect]}{note}; {INTEGRITY_DOC}):\n>\n" + "\n".join("> " + ln for ln in lines) + "\n")
    if same:
        out += (("\n" if out else "") + "> **One checkpoint under two models' names** (declared, not an error):\n>\n"
                + "\n".join(f"> - {s}" for s in same) + "\n")
    return out


def banner_html(table: pl.DataFrame | None, on_suspect: str = "warn") -> str:
    """The banner as an HTML fragment (``<div class="lineage-banner">``; "" when there is nothing to say)."""
    rows, panel, same = _banner_parts(table)
    out = ""
    if rows:
        items = "".join(f"<li><b>{_html.escape(_label(r))}</b>"
                        + (f" — {_html.escape(r['detail'])}" if r["detail"] else "") + "</li>" for r in rows)
        note = f"; {_html.escape(_PANEL_ONLY)}" if panel else ""
        out += (f'<div class="lineage-banner" style="border:2px solid #b00;padding:0.4em 0.8em;margin:0.5em 0">'
                f"<b>Checkpoint lineage: {len(rows)} revision{'s' if len(rows) != 1 else ''} flagged</b> "
                f"({_MODE_HTML[on_suspect]}{note}; see {INTEGRITY_DOC})<ul>{items}</ul></div>")
    if same:
        out += ('<div class="lineage-same" style="border:1px solid #888;padding:0.4em 0.8em;margin:0.5em 0">'
                "<b>One checkpoint under two models' names</b> (declared, not an error)<ul>"
                + "".join(f"<li>{_html.escape(s)}</li>" for s in same) + "</ul></div>")
    return out


def _rows(g: pl.DataFrame) -> list[list[str]]:
    out = []
    for r in g.sort("order").iter_rows(named=True):
        out.append([r["revision"], fmt_tokens(r["tokens"]), _num(r["dist_from_first"]), _num(r["dist_from_previous"]),
                    f"{_num(r['cos_from_first'], 2)} ± {_num(r['cos_sd'], 2)}", r.get("descent") or "—",
                    ", ".join(r["shares"] or []) or "—", ", ".join(_lineage.flag_labels(r)) or "—"])
    return out


_HEAD = ["revision", "tokens", "from first", "from previous", "cosine to first ± null SD", "descent", "shares with",
         "flags"]
_DESCENT = ("descent: direct = the cosine to the earliest revision passes the descent test; chain = it does not, "
            "but a revision that descends passes against it (drifted far from its init, step by step)")


def _unchecked(table: pl.DataFrame | None, models) -> list[str]:
    have = set(table["model"].to_list()) if table is not None and not table.is_empty() else set()
    return [m for m in dict.fromkeys(models or []) if m not in have]


def _elsewhere(g: pl.DataFrame) -> list[str]:
    """One sentence per revision of model ``g`` whose weights another model's revision has."""
    out = []
    for r in g.sort("order").iter_rows(named=True):
        for o in r.get("same_weights_as") or []:
            how = ("declared: one checkpoint, count it once" if o in (r.get("declared_same") or [])
                   else "not declared: flagged")
            out.append(f"{r['revision']} has the same weights as {o} ({how})")
    return out


def section_markdown(table: pl.DataFrame | None, models=()) -> str:
    """The lineage section of summary.md: per model, a table of its revisions; ``models`` without a
    table (no fingerprints: the published panel) are listed as unchecked ("" when neither)."""
    unchecked = _unchecked(table, models)
    if (table is None or table.is_empty()) and not unchecked:
        return ""
    text = ["## Checkpoint lineage\n",
            "Per revision: its distance from the model's earliest revision and from the previous one "
            "(relative to the weights' scale: 0 = identical, √2 ≈ 1.41 = independent weights), its cosine to "
            "the earliest (± the SD of that cosine were the two independent: the null's; 0 = independent), "
            f"{_DESCENT}, the revisions it shares a weight file, shard or matrix with, and its flags "
            f"({INTEGRITY_DOC}).\n"]
    text += [f"> {w}\n" for w in _lineage.reference_warnings(table)]
    if unchecked:
        text.append(f"Unchecked (no fingerprints, so no lineage flag can be raised): {', '.join(unchecked)}.\n")
    for model in ([] if table is None or table.is_empty() else table["model"].unique(maintain_order=True).to_list()):
        g = table.filter(pl.col("model") == model)
        rows = _rows(g)
        md = ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
        md += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        n_bad = _lineage.flagged(g).height
        text.append(f"**{model}** (reference {g['reference'][0]}; "
                    f"{'no revision flagged' if not n_bad else f'{n_bad} flagged'}):\n\n" + "\n".join(md) + "\n")
        text += [f"- {line}.\n" for line in _elsewhere(g)]
    return "\n".join(text)


def section_html(table: pl.DataFrame | None, models=()) -> str:
    """The lineage section as an HTML fragment (``<section id="lineage">``; "" without a table or
    unchecked ``models``)."""
    unchecked = _unchecked(table, models)
    if (table is None or table.is_empty()) and not unchecked:
        return ""
    parts = ['<section id="lineage"><h2>Checkpoint lineage</h2>',
             "<p>Distance from the model's earliest revision and from the previous one, relative to the "
             "weights' scale (0 = identical, √2 ≈ 1.41 = independent weights); cosine to the earliest "
             "(± the SD of that cosine were the two independent: the null's; 0 = independent); "
             f"{_html.escape(_DESCENT)}; shared files, shards or matrices; flags ({_html.escape(INTEGRITY_DOC)}).</p>"]
    parts += [f'<p class="lineage-warning"><b>{_html.escape(w)}</b></p>' for w in _lineage.reference_warnings(table)]
    if unchecked:
        parts.append(f"<p>Unchecked (no fingerprints, so no lineage flag can be raised): "
                     f"{_html.escape(', '.join(unchecked))}.</p>")
    for model in ([] if table is None or table.is_empty() else table["model"].unique(maintain_order=True).to_list()):
        g = table.filter(pl.col("model") == model)
        head = "".join(f"<th>{_html.escape(h)}</th>" for h in _HEAD)
        body = []
        for row in _rows(g):
            style = ' style="background:#fdd"' if row[-1] != "—" else ""
            body.append(f"<tr{style}>" + "".join(f"<td>{_html.escape(c)}</td>" for c in row) + "</tr>")
        parts.append(f"<h3>{_html.escape(model)}</h3><table><tr>{head}</tr>{''.join(body)}</table>")
        parts += [f"<p>{_html.escape(line)}.</p>" for line in _elsewhere(g)]
    parts.append("</section>")
    return "".join(parts)
