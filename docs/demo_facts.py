"""The figures the pages quote from a `make demo` run, read from that run's tables, so that no page
quotes a number another run gave.

A quoted figure is marked in the page's Markdown, invisibly on the rendered page::

    raises it by <!-- demo:smollm2-135m-instruct.effect -->2.92 nats [2.18, 3.70]<!-- /demo -->

``docs/demo-facts.json`` holds the facts of the run the pages quote (its commit and date with them).
Usage (from the repository root)::

    .venv/bin/python docs/demo_facts.py write results   # after a demo: the facts of results/ into the json
                                                        # and every marked figure of the pages
    .venv/bin/python docs/demo_facts.py check           # exit 1 when a marked figure differs from the json
                                                        # or names no fact (tests/test_docs.py)
    .venv/bin/python docs/demo_facts.py verify results  # exit 1 when the json differs from a fresh run's
                                                        # facts (.ci/run, after its demo)

The facts are worded by :func:`facts` from the verdict, F1, circuit-size and text-probe tables, with
the report's own rounding (interval ends outward, p as the exact fraction it is).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import polars as pl

from headtrace.core.rounding import fmt_p

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "docs" / "demo-facts.json"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!-- demo:([\w.\-]+) -->(.*?)<!-- /demo -->", re.S)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _outward(lo: float, hi: float, digits: int = 2) -> str:
    """'[2.18, 3.70]': the lower end rounded down, the upper end up."""
    s = 10 ** digits
    return f"[{math.floor(lo * s) / s:.{digits}f}, {math.ceil(hi * s) / s:.{digits}f}]"


def _p(row: dict) -> str:
    """'1/40' when p is the smallest its reference set allows (1/N over all N sets, 1/(M + 1) over M draws),
    else p rounded up (:func:`headtrace.core.rounding.fmt_p`, the one rule for a printed p)."""
    p, n = row["p_value"], row.get("n_random") or row["n_distinct_draws"]
    smallest = n if row.get("control_exact") else n + 1
    if n and abs(p - 1 / smallest) < 1e-12:
        return f"1/{smallest}"
    return fmt_p(p)


def _sets(row: dict) -> str:
    """'all 495' (every set of the reference set) / '39 draws of 3,024'."""
    n, space = row.get("n_random") or row["n_distinct_draws"], row["n_matched_sets"]
    return f"all {n:,}" if row.get("control_exact") else f"{n} draws of {space:,}" if space else f"{n} draws"


def verdict_facts(v: pl.DataFrame) -> dict[str, str]:
    """Per model, the induction circuit's verdict row at its last ablated revision (the final circuit
    where there is one): heads, verdict, the decision metric before and after ablation, effect with its
    interval, the matched sets' mean, p, the upper bound."""
    out: dict[str, str] = {}
    v = v.filter(pl.col("circuit").is_in(["circuit", "final_circuit"]))
    for (model,), g in v.group_by("model", maintain_order=True):
        last = g.sort("tokens").filter(pl.col("tokens") == g["tokens"].max())
        final = last.filter(pl.col("circuit") == "final_circuit")
        r = (final if final.height else last).row(0, named=True)
        k = f"{model}."
        out[k + "circuit"] = ", ".join(r["heads"])
        out[k + "verdict"] = r["verdict"]
        out[k + "n_sequences"] = str(r["n_sequences"])
        out[k + "top1"] = f"{_pct(r['baseline_top1'])} → {_pct(r['ablated_top1'])}"
        if r.get("upper_bound_top1") is not None:
            out[k + "top1_upper"] = _pct(r["upper_bound_top1"])
        if r.get("metric") == "ce":
            out[k + "ce"] = f"{r['baseline_value']:.2f} to {r['ablated_value']:.2f}"
            out[k + "effect"] = f"{r['effect']:.2f} nats {_outward(r['effect_lo'], r['effect_hi'])}"
            out[k + "random_mean"] = f"{r['baseline_value'] + r['random_effect_mean']:.2f}"
            if r.get("upper_bound_value") is not None:
                out[k + "upper"] = f"{r['upper_bound_value']:.2f}"
        elif r.get("effect_lo") is not None and not math.isnan(r["effect_lo"]):
            out[k + "effect"] = (f"{100 * r['effect']:.1f} pp "
                                 f"[{math.floor(1000 * r['effect_lo']) / 10:.1f}, {math.ceil(1000 * r['effect_hi']) / 10:.1f}]")
        if r.get("n_distinct_draws") and not math.isnan(r["p_value"]):
            out[k + "p"] = _p(r)
            out[k + "sets"] = _sets(r)
        if r.get("boost") is not None and not math.isnan(r["boost"]):
            lo, hi = r["boost_lo"], r["boost_hi"]
            out[k + "boost"] = (f"{r['boost']:.2f} nats {_outward(lo, hi)}" if r.get("metric") == "ce" else
                                f"{100 * r['boost']:.1f} pp [{math.floor(1000 * lo) / 10:.1f}, {math.ceil(1000 * hi) / 10:.1f}]")
        if r.get("ablated_fraction") is not None and r.get("metric") == "ce":
            out[k + "share_left"] = (f"{100 * r['ablated_fraction']:.0f}% [{math.floor(100 * r['ablated_fraction_lo']):.0f}%, "
                                     f"{math.ceil(100 * r['ablated_fraction_hi']):.0f}%]")
        if r.get("second_method"):
            out[k + "second_verdict"] = f"{r['second_method']}: {r['second_verdict']}"
            if r.get("second_p_value") is not None:
                out[k + "second_p"] = fmt_p(r["second_p_value"])
    return out


def first_token_facts(f1: pl.DataFrame) -> dict[str, str]:
    """Per model, its first-token heads at its last revision: 'k of n (x%)'; of those, the heads with at
    least key0_mass of their attention on key 0: 'j of k' (where recorded); the largest first-token
    selectivity in layers 0-1 at any revision: '1.74×' (where recorded)."""
    out = {}
    for (model,), g in f1.group_by("model", maintain_order=True):
        last = g.filter(pl.col("tokens") == g["tokens"].max())
        k, n = int(last["n_first_token"].sum()), int(last["n_heads"].sum())
        out[f"{model}.first_token"] = f"{k} of {n} ({_pct(k / n)})"
        if "n_first_token_key0" in last.columns and not last["n_first_token_key0"].null_count():
            out[f"{model}.first_token_key0"] = f"{int(last['n_first_token_key0'].sum())} of {k}"
        floor = g.filter(pl.col("layer").is_in([0, 1]))
        if "max_sel_first_token" in floor.columns and floor["max_sel_first_token"].drop_nulls().len():
            out[f"{model}.floor_max_sel"] = f"{floor['max_sel_first_token'].max():.3g}×"
    return out


def circuit_size_facts(sizes: pl.DataFrame) -> dict[str, str]:
    """Per model, the induction circuit's size at every revision, in training order: '0, 0, 4, 7, 11'."""
    return {f"{model}.circuit_sizes": ", ".join(str(x) for x in g.sort("tokens")["n_induction_circuit"].to_list())
            for (model,), g in sizes.group_by("model", maintain_order=True)}


def text_sink_facts(over: pl.DataFrame) -> dict[str, str]:
    """Per model, the text probe's sink rate (the first eps) at its last revision with one."""
    out = {}
    over = over.filter(pl.col("eps") == over["eps"][0]).drop_nulls("text_sink_rate")
    for (model,), g in over.group_by("model", maintain_order=True):
        out[f"{model}.text_sink"] = _pct(g.sort("tokens")["text_sink_rate"][-1])
    return out


def facts(results: Path) -> dict[str, str]:
    """Every fact the pages may quote, from the tables of the run under ``results``."""
    results = Path(results)
    v = pl.concat([pl.read_parquet(p) for p in sorted(results.glob("cells/*/*/verdict.parquet"))],
                  how="diagonal_relaxed")
    out = verdict_facts(v)
    out.update(first_token_facts(pl.read_parquet(results / "findings" / "f1_bos_floor.parquet")))
    out.update(circuit_size_facts(pl.read_parquet(results / "findings" / "circuit_size.parquet")))
    over = results / "findings" / "measures" / "measures_over_training.parquet"
    if over.exists():
        out.update(text_sink_facts(pl.read_parquet(over)))
    return dict(sorted(out.items()))


def marks(text: str) -> list[tuple[str, str]]:
    """(key, quoted value) of every marked figure of a page."""
    return [(m.group(1), m.group(2)) for m in MARK.finditer(text)]


def rewrite(text: str, known: dict[str, str]) -> str:
    """The page with every marked figure replaced by its fact (a key without a fact is left as it is)."""
    return MARK.sub(lambda m: f"<!-- demo:{m.group(1)} -->{known.get(m.group(1), m.group(2))}<!-- /demo -->", text)


def problems(pages: list[Path], known: dict[str, str]) -> list[str]:
    """Every marked figure that names no fact or differs from it, as 'page: key: quoted ≠ fact'."""
    out = []
    for page in pages:
        for key, quoted in marks(page.read_text()):
            if key not in known:
                out.append(f"{page.relative_to(ROOT)}: {key}: names no fact of {FACTS.name}")
            elif quoted != known[key]:
                out.append(f"{page.relative_to(ROOT)}: {key}: quotes '{quoted}', the run gave '{known[key]}'")
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="the facts of a run into docs/demo-facts.json and the pages")
    w.add_argument("results", nargs="?", default="results")
    sub.add_parser("check", help="exit 1 when a page quotes a figure the json does not hold")
    v = sub.add_parser("verify", help="exit 1 when a fresh run's facts differ from the json the pages quote")
    v.add_argument("results", nargs="?", default="results")
    args = ap.parse_args(argv)
    if args.cmd == "verify":
        fresh, quoted = facts(Path(args.results)), json.loads(FACTS.read_text())["facts"]
        diff = [f"{k}: the pages quote '{quoted.get(k, '(no fact)')}', the fresh run gave '{fresh.get(k, '(no fact)')}'"
                for k in sorted(set(fresh) | set(quoted)) if fresh.get(k) != quoted.get(k)]
        for line in diff:
            print(line, file=sys.stderr)
        if diff:
            print(f"{len(diff)} quoted figure(s) differ from the fresh run: run `make pages` after `make demo` "
                  "and commit", file=sys.stderr)
        else:
            print(f"{len(fresh)} facts of the fresh run match {FACTS.relative_to(ROOT)}")
        return 1 if diff else 0
    if args.cmd == "write":
        known = facts(Path(args.results))
        FACTS.write_text(json.dumps({"run": {"commit": _commit(), "date": date.today().isoformat()},
                                     "facts": known}, indent=1, ensure_ascii=False) + "\n")
        for page in PAGES:
            text = page.read_text()
            new = rewrite(text, known)
            if new != text:
                page.write_text(new)
        print(f"{FACTS.relative_to(ROOT)}: {len(known)} facts; pages rewritten")
    known = json.loads(FACTS.read_text())["facts"]
    bad = problems(PAGES, known)
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
