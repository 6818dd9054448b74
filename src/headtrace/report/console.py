"""The one-screen summary `make demo` ends with (``headtrace summary results``)."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Mapping

import polars as pl

from headtrace.causal import verdict as V
from headtrace.cell import positional
from headtrace.core import paths
from headtrace.core import results as R
from headtrace.probe import words as probe_words
from headtrace.report import answers as A
from headtrace.report import copying
from headtrace.report import first_screen as FS
from headtrace.report import headline as HL
from headtrace.report import lineage as RL
from headtrace.report import strongest
from headtrace.report.verdicts import METRIC_SAY, say, untested_why, upper_bound_text


def summary(results: str | Path = paths.DEFAULT, *, families: Mapping[str, str] | None = None,
            suspect: A.Suspect | None = None) -> str:
    """The one-screen summary of results folder ``results`` (its tables read by
    :func:`headtrace.core.results.read`): :func:`summary_of`."""
    return summary_of(R.read(results), families=families, suspect=suspect)


def summary_of(res: R.Results, *, families: Mapping[str, str] | None = None,
               suspect: A.Suspect | None = None) -> str:
    """A short text table per model: circuit formation, first-token heads, final ablation verdict;
    above it, the first screen's sentences, flag notes and selectivity baseline (:func:`first_screen`:
    the words of summary.md and summary.html). Every count and flag is a table's (the findings job's,
    the cells'): a model the findings have not reached reads "?"."""
    if not res.trajectories:
        return f"no trajectories under {res.folder}/models: has the workflow run?"
    models = res.models
    lines = [f"headtrace summary of {res.folder}"
             + (f" ({len(models)} model{'s' if len(models) != 1 else ''} of its panel.json)" if models is not None
                else " (no panel.json: every model found there, whichever config wrote it)"), ""]
    run = None
    rows, fs = screen_of(res, families, suspect)
    if fs is not None:  # the first screen of summary.md / summary.html, in plain text
        run = HL.run_of(rows)
        lines += ["What this run found:"] + [textwrap.fill(t, 110, initial_indent="- ", subsequent_indent="  ")
                                             for t in fs.sentences]
        if fs.flags:
            lines.append(textwrap.fill(f"{HL.DAGGER} rests on a flagged revision: " + "; ".join(fs.flags), 110))
        lines += [textwrap.fill(FS.plain(fs.baseline), 110, subsequent_indent="  "), ""]
    answers = {a.model: a for a in run.models} if run else {}
    for g in (run.groups if run else ()):  # one line per seed group, its members' rows below as usual
        lines.append(textwrap.fill(f"group {g.group} ({g.n} seeds): {g.order_text()}; {g.gap_text()}; "
                                   f"final circuits: {g.circuit_text()}", 110, subsequent_indent="  "))
    if run and run.groups:
        lines.append("")
    lines += _probe_lines(res.probes)
    head = f"{'model':<28} {'revs':>4} {'first circuit (>=3 heads)':>26} {'final circuit':<28} {'first-token heads':>17}"
    lines += [head, "-" * len(head)]
    verdicts = _verdicts(res.verdicts)
    best = res.findings.get("strongest_trend")  # the strongest head per class (findings job)
    for model, t in res.trajectories.items():
        revisions = t.group_by("revision", "tokens", maintain_order=True).agg(n_heads=pl.len()).sort(
            "tokens", nulls_last=True)
        final = revisions.row(-1, named=True)
        a = answers.get(model)
        # the headline's milestone (refined bracket included); "?" where the findings have not reached the model
        first = (a.circuit.revision if a.circuit.reached else ("never" if a.circuit.known else "?")) if a else "?"
        circuit = (
            t.filter((pl.col("revision") == final["revision"]) & pl.col("in_induction_circuit"))
            .sort("layer", "head")
            .select(pl.format("L{}H{}", "layer", "head"))
            .to_series()
            .to_list()
        )
        ft = a.first_token if a is not None else None  # the key-0 count beside it (findings.trajectory)
        key0 = f" [{ft.n_key0} with >= {ft.key0_mass:g} on key 0]" if ft is not None and ft.n_key0 is not None else ""
        n_bos, n_heads = _first_token_count(res.findings.get("f2_bos_fraction"), model, final["revision"])
        lines.append(
            f"{model:<28} {revisions.height:>4} {first:>26} {' '.join(circuit[:5]) + (' ...' if len(circuit) > 5 else '') or '-':<28} "
            f"{n_bos:>12}/{n_heads if n_heads is not None else final['n_heads']:<4}{key0}"
        )
        line = strongest.model_line(best, model, strongest.CONSOLE_CLASSES)
        if line:  # below the thresholds, the trend: "none yet, rising" is not "none"
            lines.append(textwrap.fill(line, 110, initial_indent=" " * 4, subsequent_indent=" " * 6))
        if a is not None and a.final is not None:
            v = a.final.row
            at = "" if a.final.revision == final["revision"] else f" (at {a.final.revision}, the last ablated revision)"
            lines.append(f"{'':<4}final ablation{at}: " + (verdict_line(v) if a.final.heads else
                         "no induction circuit at the final revision (nothing to ablate)"))
        else:
            v = verdicts.get((model, final["revision"]))
            if v is not None and not v["n_heads"]:
                lines.append(f"{'':<4}final ablation: no induction circuit at the final revision (nothing to ablate)")
            elif v is not None:
                lines.append(f"{'':<4}final ablation: " + verdict_line(v))
        if a is not None and a.decided:
            lines.append(f"{'':<4}where the causal test decided: {HL.decided_text(a)}")
        flagged = _positional_heads(res.findings.get("circuit_positional"), model, final["revision"])
        if circuit and flagged:
            lines.append(f"{'':<4}positional heads in the final circuit ({len(flagged)} of {len(circuit)}: most "
                         f"of their induction mass from one A position): {' '.join(flagged)}")
        pv = verdicts.get((model, final["revision"], "previous_token_circuit"))
        if pv is not None and pv["n_heads"]:
            lines.append(f"{'':<4}previous-token circuit ({pv['n_heads']} heads): " + verdict_line(pv))
    summary_md = res.path("summary")
    lines += ["", f"findings: {summary_md}" if summary_md.exists() else "findings: (not built)"]
    report = res.path("report")
    if report.exists():
        lines.append(f"report:   {report}")
    return "\n".join(lines)


def first_screen(results: str | Path = paths.DEFAULT, *, families: Mapping[str, str] | None = None,
                 suspect: A.Suspect | None = None) -> FS.FirstScreen | None:
    """The first screen of a results folder (:func:`first_screen.build` of its tables, as on
    summary.md and summary.html), which :func:`summary` prints; None before the findings job has run."""
    return screen_of(R.read(results), families, suspect)[1]


def screen_of(res: R.Results, families: Mapping[str, str] | None = None,
              suspect: A.Suspect | None = None) -> tuple[list[dict], FS.FirstScreen | None]:
    """The headline rows and the first screen of a results folder's tables (none before the findings job
    has run); ``families``: the panel.json's when None, as the workflow's summaries name them."""
    if families is None:
        families = res.families or None
    if not res.findings_built or not res.trajectories:
        return [], None
    if suspect is None:
        suspect = RL.suspect(res.lineage)
    groups = A.group_answers(res.groups, families=families, cross_seed=res.cross_seed)
    rows = HL.headline_rows(res.findings, res.verdicts, families=families, suspect=suspect, groups=groups,
                            continues=RL.continuations(res.lineage))
    return rows, FS.build(rows, traj=res.trajectory())


def _first_token_count(bos: pl.DataFrame | None, model: str, revision: str) -> tuple[int | str, int | None]:
    """The first-token heads and heads of a cell, as F2's table counts them (``f2_bos_fraction``, at the
    config's class threshold); ("?", None) where the findings have not reached the cell."""
    row = bos.filter((pl.col("model") == model) & (pl.col("revision") == revision)) if bos is not None else None
    if row is None or not row.height:
        return "?", None
    return int(row["n_first_token"][0]), int(row["n_heads"][0])


def _positional_heads(flags: pl.DataFrame | None, model: str, revision: str) -> list[str]:
    """The circuit heads of a cell its positional check flagged (the findings table ``circuit_positional``)."""
    if flags is None:
        return []
    return (flags.filter((pl.col("model") == model) & (pl.col("revision") == revision) & pl.col("positional_induction"))
            .sort("layer", "head").select(pl.format("L{}H{}", "layer", "head")).to_series().to_list())


def _probe_lines(probes: Mapping[str, pl.DataFrame]) -> list[str]:
    """The probe each model's screens read, from its probe table, models that share one on one line; a
    blank line after (none without probe tables: a reference-only run)."""
    shown = {model: probe_words.from_table(table) for model, table in probes.items()}
    return [textwrap.fill(line, 110, subsequent_indent="  ") for line in probe_words.lines(shown)] + [""] if shown else []


fmt_metric = A.fmt_metric  # public: one formatter of a metric's value (top-1 as %, logit / CE to 2 decimals)


def effect_text(v: dict) -> str:
    """A verdict row's effect on its decision metric with its bootstrap interval: '40.00% [30.00%, 50.00%]'."""
    return A.effect_text(v)


def verdict_line(v: dict) -> str:
    """One verdict row in words: the ablation, its control (exact or sampled), the upper bound on the
    decision metric (whether it saturates; the circuit's share of it only where that informs), the
    effect with its interval, and the verdict with its reason (why the test could not decide, did not
    run, or why the circuit is not, or only in part, causal)."""
    metric = v.get("metric") or "top1"
    n_sets = v.get("n_random") or v.get("n_distinct_draws") or 0
    out = f"top-1 {v['baseline_top1']:.2%} -> circuit {v['ablated_top1']:.2%}, "
    if metric != "top1":  # the metric that decided, in its own units, then top-1 beside it
        random_value = v["baseline_value"] - V.DIRECTION[metric] * v["random_effect_mean"]
        out = (f"{V.METRIC_WORDS[metric].removeprefix('the ')} {fmt_metric(metric, v['baseline_value'])} -> circuit "
               f"{fmt_metric(metric, v['ablated_value'])}"
               + (f", reference-set mean {fmt_metric(metric, random_value)}" if n_sets else "") + f"; {out}")
    if n_sets:
        random_top1 = v.get("random_top1_mean")
        if random_top1 is None or random_top1 != random_top1:
            random_top1 = v["baseline_top1"] - v["random_effect_mean"]
        control = A.verdict_of(v).control_text()
        out += f"reference-set mean {random_top1:.2%} over {control}"
    else:
        out += "no reference set"
    upper = upper_bound_text(v)
    if upper:
        out += f", {upper}"
    out += f"; {METRIC_SAY.get(metric, metric)} effect {effect_text(v)}"
    if n_sets:
        out += f", {A.verdict_of(v).p_text()} (alpha = {v.get('alpha') or V.ALPHA:g})"
    boost = A.verdict_of(v).boost_text()
    if boost:
        out += f"; {boost}"
    if v.get("class_control") and v.get("n_class_matched_sets"):
        out += (f" (class-matched, sinks excluded: p={A.fmt_p(v['class_p_value'])}, mean effect "
                f"{fmt_metric(metric, v['class_random_effect_mean'])})")
    verdict = A.verdict_word(v)
    if v.get("floor_reason") and verdict != "untested":  # an untested verdict's reason is the floor's
        out += f" ({v['floor_reason']})"
    if verdict == "underpowered":
        return out + f"; verdict: underpowered ({underpowered_reason(v)}: the test cannot decide here)"
    if verdict == "untested":
        return out + f"; verdict: untested ({untested_why(v)})"
    out += f"; verdict: {say(verdict)}"
    why = A.verdict_of(v).why_not
    methods = A.verdict_of(v).methods_text()
    return out + (f" ({why})" if why else "") + (f"; {methods}" if methods else "")


def underpowered_reason(v: dict) -> str:
    """Why an ``underpowered`` verdict cannot decide: the verdict's own ``underpowered_reason``
    (another circuit's control, a full layer, too few sets), else the smallest p its sets allow, or
    no control at all (:func:`headtrace.report.answers.underpowered_why`)."""
    return A.underpowered_why(v)


def baseline_line(v: dict) -> str | None:
    """What the unablated model predicts at the query, for ``headtrace cell``: B, the shuffled-B
    control token and any other context token (the copying null of the composition experiment);
    None without the copy metrics."""
    control, other = v.get("baseline_top1_control"), v.get("baseline_top1_context")
    if control is None or other is None:
        return None
    n = v.get("n_sequences")
    return (f"unablated top-1: B {v['baseline_top1']:.2%}" + (f" of {n} sequences" if n else "")
            + f"; a shuffled-B control token of the context {control:.2%}; any other context token {other:.2%}")


def circuit_line(v: dict, copying_heads: pl.DataFrame | None = None) -> str:
    """One circuit's verdict in one line, for ``headtrace cell``: its heads, the effect with its
    interval, p over which reference sets, and the verdict with its reason; for an induction circuit,
    given the cell's heads with prefix matching and copying decided (``CellTables.copying_heads``,
    :func:`headtrace.findings.measures.head_decisions`), how many of its heads do both
    (:func:`headtrace.report.copying.circuit_text`)."""
    metric = v.get("metric") or "top1"
    heads = v.get("heads")
    heads = list(heads.to_list() if hasattr(heads, "to_list") else heads or [])
    name = str(v.get("circuit") or "circuit").replace("_", " ")
    if not heads:
        return f"{name}: no heads (nothing to ablate)"
    n_sets = v.get("n_random") or v.get("n_distinct_draws") or 0
    out = f"{name} ({' '.join(map(str, heads))}): {METRIC_SAY.get(metric, metric)} effect {effect_text(v)}"
    if n_sets:
        out += f", {A.verdict_of(v).p_text()} over {A.verdict_of(v).control_text()}"
    else:
        out += ", no reference set"
    verdict = v.get("verdict") or ("causal" if v.get("causal") else "not_causal")
    olsson = copying.circuit_text(heads, copying_heads) if v.get("circuit", "circuit") in ("circuit", "final_circuit") else ""
    olsson = f"; {olsson}" if olsson else ""
    if verdict == "underpowered":
        return out + f" -> underpowered: {underpowered_reason(v)} (the test cannot decide here){olsson}"
    why = v.get("untested_reason") or v.get("floor_reason") or v.get("partial_reason")
    extra = [t for t in (A.verdict_of(v).boost_text(), A.verdict_of(v).methods_text()) if t]
    return (out + f" -> {A.say(verdict)}" + (f" ({why})" if why else "") + "".join(f"; {t}" for t in extra)
            + olsson)


def cell_lines(screen: pl.DataFrame, positional_table: pl.DataFrame | None = None,
               verdict: pl.DataFrame | None = None, copying_heads: pl.DataFrame | None = None, *,
               name: str | None = None, revision: str | None = None, out=None) -> list[str]:
    """One cell's screen in lines, as ``headtrace cell`` prints it and ``CellTables.summary()`` returns
    it: the induction circuit with each head's selectivity, its positional heads, the sequences the
    verdicts rest on, what the unablated model predicts, and one line per circuit
    (:func:`circuit_line`). ``name`` / ``revision``: from the screen's first row when None; ``out``: the
    folder the tables were written to (a line saying so)."""
    if name is None:
        name = str(screen["model"][0]) if screen.height and "model" in screen.columns else "model"
    if revision is None:
        revision = str(screen["revision"][0] or "") if screen.height and "revision" in screen.columns else ""
    circuit = screen.filter(pl.col("in_induction_circuit")).sort("layer", "head")
    heads = ", ".join(f"L{l}H{h} ({s:.0f}x)" for l, h, s in circuit.select("layer", "head", "sel_induction").iter_rows())
    lines = [f"{' '.join(w for w in (name, revision) if w)}: induction circuit {heads or 'none'}"]
    if positional_table is not None:
        flagged = positional.circuit_flags(positional_table, screen).filter(pl.col("positional_induction"))
        if flagged.height:
            lines.append("  positional (most of their induction mass from one A position: headtrace.cell.positional): "
                         + ", ".join(f"L{l}H{h}" for l, h in flagged.select("layer", "head").iter_rows()))
    if out:
        lines.append(f"tables written to {out}/ (verdict.parquet: every column of the verdicts below)")
    if verdict is None:
        return lines + ["  not ablated: no verdict"]
    if verdict.height:  # which sequences the verdicts below rest on
        v = verdict.row(0, named=True)
        where = ("a held-out draw of the probe, none of them a sequence the screen read"
                 if v["ablation_probe"] == "held_out" else "the screen's own probe sequences")
        lines.append(f"  ablated on {v['n_sequences']} sequences, {where} (seed {v['ablation_probe_seed']}, "
                     f"sha256 {(v['ablation_probe_sha256'] or '')[:12]}...)")
        base = baseline_line(v)
        if base:
            lines.append("  " + base)
    # last: one line per circuit, in the words of `headtrace summary`
    return lines + ["  " + circuit_line(v, copying_heads) for v in verdict.iter_rows(named=True)]


def _verdicts(v: pl.DataFrame | None) -> dict:
    if v is None:
        return {}
    out = {}
    for r in v.iter_rows(named=True):
        key = (r["model"], r["revision"]) if r["circuit"] == "circuit" else (r["model"], r["revision"], r["circuit"])
        out[key] = r
    return out
