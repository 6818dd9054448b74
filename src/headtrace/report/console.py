"""The one-screen summary `make demo` ends with (``headtrace summary results``)."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from headtrace.cell import positional


def summary(results: str | Path = "results", *, class_threshold: float = 30.0) -> str:
    """A short text table per model: circuit formation, first-token heads, final ablation verdict."""
    results = Path(results)
    trajectories = sorted(results.glob("models/*/trajectory.parquet"))
    if not trajectories:
        return f"no trajectories under {results}/models: has the workflow run?"
    lines = ["headtrace summary", ""]
    head = f"{'model':<28} {'revs':>4} {'first circuit (>=3 heads)':>26} {'final circuit':<28} {'BOS heads':>9}"
    lines += [head, "-" * len(head)]
    verdicts = _verdicts(results)
    for path in trajectories:
        t = pl.read_parquet(path)
        model = t["model"][0]
        per_rev = (
            t.group_by("revision", "tokens", maintain_order=True)
            .agg(
                n_circuit=pl.col("in_induction_circuit").sum(),
                n_bos=(pl.col("sel_first_token") >= class_threshold).sum(),
                n_heads=pl.len(),
            )
            .sort("tokens", nulls_last=True)
        )
        final = per_rev.row(-1, named=True)
        formed = per_rev.filter(pl.col("n_circuit") >= 3)
        first = formed["revision"][0] if formed.height else "never"
        circuit = (
            t.filter((pl.col("revision") == final["revision"]) & pl.col("in_induction_circuit"))
            .sort("layer", "head")
            .select(pl.format("L{}H{}", "layer", "head"))
            .to_series()
            .to_list()
        )
        lines.append(
            f"{model:<28} {per_rev.height:>4} {first:>26} {' '.join(circuit[:5]) + (' ...' if len(circuit) > 5 else '') or '-':<28} "
            f"{final['n_bos']:>4}/{final['n_heads']:<4}"
        )
        v = verdicts.get((model, final["revision"]))
        if v is not None and not v["n_heads"]:
            lines.append(f"{'':<4}final ablation: no induction circuit at the final revision (nothing to ablate)")
        elif v is not None:
            lines.append(f"{'':<4}final ablation: " + verdict_line(v))
        pos = results / "cells" / model / final["revision"] / "positional.parquet"
        if circuit and pos.exists():
            flags = positional.circuit_flags(pl.read_parquet(pos), t.filter(pl.col("revision") == final["revision"]))
            flagged = flags.filter(pl.col("positional_induction")).select(
                pl.format("L{}H{}", "layer", "head")).to_series().to_list()
            if flagged:
                lines.append(f"{'':<4}positional heads in the final circuit ({len(flagged)} of {len(circuit)}: most "
                             f"of their induction mass from one A position): {' '.join(flagged)}")
        pv = verdicts.get((model, final["revision"], "previous_token_circuit"))
        if pv is not None and pv["n_heads"]:
            lines.append(f"{'':<4}previous-token circuit ({pv['n_heads']} heads): " + verdict_line(pv))
    summary_md = results / "findings" / "summary.md"
    lines += ["", f"findings: {summary_md}" if summary_md.exists() else "findings: (not built)"]
    report = results / "report.html"
    if report.exists():
        lines.append(f"report:   {report}")
    return "\n".join(lines)


def fmt_metric(metric: str, x) -> str:
    """A metric's value as printed: top-1 as a percentage, logit and cross-entropy to 2 decimals."""
    return "nan" if x is None or x != x else (f"{x:.2%}" if metric == "top1" else f"{x:.2f}")


def effect_text(v: dict) -> str:
    """A verdict row's effect on its decision metric with its bootstrap interval: '40.00% [30.00%, 50.00%]'."""
    metric = v.get("metric") or "top1"
    lo, hi = v.get("effect_lo"), v.get("effect_hi")
    ci = f" [{fmt_metric(metric, lo)}, {fmt_metric(metric, hi)}]" if lo is not None and lo == lo else ""
    return fmt_metric(metric, v.get("effect")) + ci


def verdict_line(v: dict) -> str:
    """One verdict row in words: the ablation, its control (exact or sampled), the effect with its
    interval, and the three-way verdict (``underpowered`` says why the test cannot decide)."""
    metric = v.get("metric") or "top1"
    n_sets, n_space = v.get("n_distinct_draws") or 0, v.get("n_matched_sets")
    out = f"top-1 {v['baseline_top1']:.2%} -> circuit {v['ablated_top1']:.2%}, "
    if n_sets:
        random_top1 = v.get("random_top1_mean")
        if random_top1 is None or random_top1 != random_top1:
            random_top1 = v["baseline_top1"] - v["random_effect_mean"]
        control = (f"all {n_sets} matched set(s) (exact)" if v.get("control_exact")
                   else f"{n_sets} of {n_space} matched sets (sampled)")
        out += f"matched-random mean {random_top1:.2%} over {control}"
    else:
        out += "no matched control"
    if v.get("upper_bound", "-") is not None:
        out += f", upper bound {v['upper_bound_top1']:.2%}"
    out += f"; {metric} effect {effect_text(v)}"
    if n_sets:
        out += f", p={v['p_value']:.3f}"
    if v.get("class_control") and v.get("n_class_matched_sets"):
        out += (f" (class-matched, sinks excluded: p={v['class_p_value']:.3f}, mean effect "
                f"{fmt_metric(metric, v['class_random_effect_mean'])})")
    verdict = v.get("verdict") or ("causal" if v["causal"] else "not_causal")
    if verdict == "underpowered":
        out += f"; verdict: underpowered ({underpowered_reason(v)}: the test cannot decide here)"
    else:
        out += f"; verdict: {verdict.replace('_', ' ')}"
    return out


def underpowered_reason(v: dict) -> str:
    """Why an ``underpowered`` verdict cannot decide: the smallest p its matched sets allow, or no
    control at all."""
    n_sets = v.get("n_distinct_draws") or 0
    min_p = v.get("min_p")
    if n_sets and min_p is not None and min_p == min_p:
        return f"the smallest p {n_sets} matched set(s) allow is {min_p:.3f} > alpha"
    own = v.get("underpowered_reason")
    if own and own.startswith("no matched set"):  # the verdict's own: which layer is too small
        return own
    return "no matched-random sets, nothing to compare with"


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


def circuit_line(v: dict) -> str:
    """One circuit's verdict in one line, for ``headtrace cell``: its heads, the effect with its
    interval, p over how many matched sets, and the verdict with its reason."""
    metric = v.get("metric") or "top1"
    heads = v.get("heads")
    heads = list(heads.to_list() if hasattr(heads, "to_list") else heads or [])
    name = str(v.get("circuit") or "circuit").replace("_", " ")
    if not heads:
        return f"{name}: no heads (nothing to ablate)"
    n_sets, n_space = v.get("n_distinct_draws") or 0, v.get("n_matched_sets")
    out = f"{name} ({' '.join(map(str, heads))}): {metric} effect {effect_text(v)}"
    if n_sets:
        p = v.get("p_value")
        out += f", p={p:.3f} over {n_sets}" + (f" of {n_space}" if n_space and n_space != n_sets else "") + \
            " matched set(s)"
    else:
        out += ", no matched control"
    verdict = v.get("verdict") or ("causal" if v.get("causal") else "not_causal")
    if verdict == "underpowered":
        return out + f" -> underpowered: {underpowered_reason(v)} (the test cannot decide here)"
    return out + f" -> {verdict.replace('_', ' ')}"


def _verdicts(results: Path) -> dict:
    paths = sorted(results.glob("cells/*/*/verdict.parquet"))
    if not paths:
        return {}
    v = pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")
    out = {}
    for r in v.iter_rows(named=True):
        key = (r["model"], r["revision"]) if r["circuit"] == "circuit" else (r["model"], r["revision"], r["circuit"])
        out[key] = r
    return out
