"""The summary of a run where nothing formed reads as sentences: no placeholder, no empty table
without a note, no ranking of zeros (headtrace.report.empty_case and where summary, answers and html
call it). Built on a hand-made trajectory: 3 layers x 2 heads, 3 revisions below 1B tokens, every
selectivity 1x (no circuit, no sink)."""
from __future__ import annotations

import re

import polars as pl

from headtrace.core import tables
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.findings.compute import all_findings
from headtrace.report import answers as A
from headtrace.report import empty_case as EC
from headtrace.report import headline, html, summary
from helpers.trajectories import RENDER_SETTINGS


def _traj() -> pl.DataFrame:
    rows = []
    for i, (rev, tokens) in enumerate((("step100", 52_400_000), ("step400", 210_000_000), ("step1500", 786_000_000))):
        for layer in range(3):
            for head in range(2):
                sel = {c: 1.0 for c in CLASS_COLUMNS}
                rows.append(dict(model="my-run", revision=rev, tokens=tokens, layer=layer, head=head,
                                 pr=1.5 + i + 0.1 * (2 * layer + head), **{f"sel_{c}": v for c, v in sel.items()},
                                 best_class="induction", best_selectivity=1.0, classification="unclassified",
                                 in_induction_circuit=False))
    return tables.conform(pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64}), "trajectory")


TRAJ = _traj()
F = all_findings(TRAJ)
MD = summary.render(TRAJ, F, **RENDER_SETTINGS)


def _section(title: str) -> str:
    start = MD.index(title)
    end = MD.find("\n## ", start + 1)
    return MD[start:end if end > 0 else None]


def test_no_placeholder_in_the_layer_spread_and_the_gaps():
    for title in ("## Finding 2b", "## Finding 3"):
        text = _section(title)
        assert "| ? |" not in text and " at ?" not in text, title
    f2b = _section("## Finding 2b")
    assert "no first-token head in any layer above the floor (L2)" in f2b
    assert "The floor layers (L0, L1: Finding 1)" in f2b
    assert "First sink in no layer" not in f2b


def test_f4_says_there_is_no_final_circuit():
    f4 = _section("## Finding 4")
    assert "0-head circuit" not in f4 and "my-run (no final circuit: nothing to recall)" in f4


def test_f5_says_why_it_has_no_table():
    f5 = _section("## Finding 5")
    assert "| model | head | PR rises" not in f5
    assert "No head's induction selectivity reaches 50×" in f5


def test_the_pr_integral_is_not_ranked_when_every_author_integral_is_zero():
    pr = _section("## PR integral")
    assert "| rank (author) |" not in pr
    assert "every head's author integral is 0" in pr and "786M tokens" in pr
    assert re.search(r"largest are L\dH\d \(\d+\.\d\)", pr)


def test_the_run_statements_are_sentences():
    rows = headline.headline_rows(F, None)
    sents = headline.sentences(rows)
    formation = sents[0]
    assert "0 of them" not in formation and "no model formed an induction circuit" in formation
    undecided = [s for s in sents if s.startswith("It could not decide")]
    assert undecided and "; nor the order of sink and circuit in my-run" in undecided[0]


def test_phrases():
    assert EC.formed_clause(2, 3, "an induction circuit of at least 3 heads") == (
        "2 of the 3 models formed an induction circuit of at least 3 heads")
    assert EC.formed_clause(1, 1, "x") == "the model formed x"
    assert EC.could_not_decide(["whether a"]) == "It could not decide whether a."
    assert EC.tokens_or_dash(None) == "—"


def test_captions_keep_a_glob_in_code():
    out = html.rst_to_html("Tables: ``results/cells/*/*/verdict.parquet``; *italic*")
    assert "<code>results/cells/*/*/verdict.parquet</code>" in out and "<i>italic</i>" in out


def test_the_ablation_table_says_the_chance_level():
    v = pl.DataFrame({"model": ["my-run"], "revision": ["step1500"], "tokens": [786_000_000], "circuit": ["circuit"],
                      "baseline_top1": [0.004], "baseline_top1_control": [0.003]})
    note = EC.chance_note(v)
    assert "0.4%" in note and "0.3%" in note and "by chance" in note
    assert EC.chance_note(v.drop("baseline_top1_control")) == ""
    assert A.run_answer([]).statements  # the module loads beside answers (no cycle)
