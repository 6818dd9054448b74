"""report.copying: prefix matching and copying beside the circuit, on hand-built findings tables."""
from __future__ import annotations

import html
import re

import polars as pl

from headtrace.core import tables
from headtrace.report import console
from headtrace.report import copying as C


def _row(model, rev, tok, head, sel, prefix, share, ratio, n_heads=8, n_prefix=2, n_copy=5):
    return dict(model=model, revision=rev, tokens=tok, layer=1, head=head, sel_induction=sel, prefix_matching=prefix,
                copying=share, copying_eigenvalue_ratio=ratio, prefix_matches=prefix is not None and prefix > 0.4,
                copies=share > 0.5, both=(prefix is not None and prefix > 0.4) and share > 0.5, n_heads=n_heads,
                n_heads_prefix=n_prefix, n_heads_copying=n_copy, prefix_threshold=0.4, copying_threshold=0.5)


def _findings(ratio=True):
    r = (lambda x: x) if ratio else (lambda x: None)
    rows = [_row("a", "step1", 10, 0, 60.0, 0.7, 0.8, r(0.6)),  # step1: one head, both
            # step2 (final): L1H0 both, L1H1 prefix only (share 0.40), L1H2 copying only (prefix 0.20)
            _row("a", "step2", 20, 0, 120.0, 0.85, 0.75, r(0.5)), _row("a", "step2", 20, 1, 80.0, 0.6, 0.40, r(-0.1)),
            _row("a", "step2", 20, 2, 55.0, 0.2, 0.9, r(0.85)),
            _row("b", "step0", 0, 3, 70.0, 0.5, 0.6, r(0.2))]  # b's final revision (step1) has no circuit
    table = pl.DataFrame(rows)
    for c in ("n_circuit", "n_both"):
        table = table.with_columns(pl.lit(0).alias(c))
    n = table.group_by("model", "revision").agg(n_circuit=pl.len(), n_both=pl.col("both").sum())
    table = table.drop("n_circuit", "n_both").join(n, on=["model", "revision"])
    table = tables.conform(table, "measures_circuit_copying")
    over = pl.DataFrame({"model": ["a", "a", "b", "b"], "revision": ["step1", "step2", "step0", "step1"],
                         "tokens": [10, 20, 0, 10]})
    return {"measures_circuit_copying": table, "measures_over_training": over}


def test_facts_count_the_final_circuit_and_every_revision():
    f = C.facts(_findings(), models=["a", "b", "pub"])
    a, b = f.models
    assert (a.model, a.revision, len(a.heads), a.n_both) == ("a", "step2", 3, 1)
    assert [h.passes for h in a.heads] == ["both", "prefix matching only", "copying only"]
    assert (a.count("prefix_matches"), a.count("copies")) == (2, 2)
    assert a.over_training == (("step1", 1, 1), ("step2", 1, 3))
    assert (b.revision, b.heads) == ("step1", ())  # the final revision has no circuit: not step0's
    assert f.unmeasured == ("pub",) and f.ratio_stored and (f.prefix_threshold, f.copying_threshold) == (0.4, 0.5)
    assert C.facts({}) is None and C.markdown({}) == "" and C.html({}) == ""


def test_markdown_says_both_readings_the_counts_and_the_heads_that_miss():
    text = C.markdown(_findings(), models=["a", "b", "pub"])
    assert text.startswith("## Prefix matching and copying of the induction circuit")
    for words in ("Olsson et al. (2022)", "Elhage et al. (2021)'s ratio Σ λ / Σ |λ|",
                  "positive-eigenvalue share Σ max(Re λ, 0) / Σ |λ| in [0, 1], which decides (copying above 0.5)",
                  "prefix-matching above 0.4"):
        assert words in text
    assert ("| a | step2 | 3 heads | 2 of 3 (score 0.20–0.85) | 2 of 3 (share 0.40–0.90; Elhage ratio −0.10–+0.85) "
            .replace("−", "-") in text)
    assert "| 1 of 3 | L1H1 (copying share 0.40); L1H2 (prefix-matching 0.20) | 2 / 5 of 8 |" in text
    assert "| b | step1 | no induction circuit |" in text
    assert "| a | L1H1 | 80× | 0.60 | 0.40 | -0.10 | prefix matching only |" in text
    assert "a: step1 1 of 1, step2 1 of 3" in text
    assert "No prefix-matching or copying scores for pub" in text
    assert "not stored" not in text
    old = C.markdown(_findings(ratio=False), models=["a"])
    assert "Elhage et al.'s ratio is not stored by these cells" in old and "Elhage ratio" not in old.split("|---")[1]


def _cells_md(text):
    return [c.strip() for line in text.splitlines() if line.startswith("| ") for c in line.strip("|").split("|")]


def test_html_carries_the_same_facts_as_markdown():
    F = _findings()
    md, page = C.markdown(F, ["a", "b", "pub"]), C.html(F, ["a", "b", "pub"])
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", page)]
    assert [html.unescape(c) for c in cells] == _cells_md(md)
    prose = [p for p in md.split("\n\n") if p and not p.startswith(("|", "#", "<"))]
    for p in prose:
        assert html.escape(p.strip()) in page
    assert page.startswith('<section id="copying">') and page.endswith("</section>")


def _decided(prefix, share):
    """One cell's heads as findings.measures.head_decisions decides them at 0.4 and 0.5, decided here by hand."""
    return pl.DataFrame([dict(probe="repeated", layer=1, head=h, prefix_matching=p, copying=c, prefix_matches=p > 0.4,
                              copies=c > 0.5, prefix_threshold=0.4, copying_threshold=0.5)
                         for h, (p, c) in enumerate(zip(prefix, share))])


def test_console_circuit_line_counts_prefix_matching_and_copying():
    m = _decided([0.9, 0.8, 0.1], [0.7, 0.45, 0.6])
    assert C.circuit_text(["L1H0", "L1H1", "L1H2"], m) == (
        "prefix-matching (> 0.4) and copying (OV positive-eigenvalue share > 0.5): 1 of 3 heads "
        "(prefix-matching 2, copying 2)")
    assert C.circuit_text(["L1H0"], None) == "" and C.circuit_text([], m) == ""
    v = {"circuit": "circuit", "heads": ["L1H0", "L1H1"], "metric": "top1", "effect": 0.3, "effect_lo": 0.2,
         "effect_hi": 0.4, "baseline_value": 0.5, "baseline_top1": 0.5, "n_distinct_draws": 0,
         "verdict": "underpowered", "underpowered_reason": "no matched set"}
    line = console.circuit_line(v, m)
    assert line.endswith("; prefix-matching (> 0.4) and copying (OV positive-eigenvalue share > 0.5): 1 of 2 heads "
                         "(prefix-matching 2, copying 1)")
    assert "prefix-matching" not in console.circuit_line(v)  # no measures: the line as before
    prev = {**v, "circuit": "previous_token_circuit"}
    assert "copying" not in console.circuit_line(prev, m)  # not an induction circuit
