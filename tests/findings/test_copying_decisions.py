"""findings.measures.head_decisions: one cell's prefix-matching and copying decided from its measures rows, on
hand-built rows whose answers are worked out by hand (the console's circuit line only words them)."""
from __future__ import annotations

import polars as pl

from headtrace.core.tables import SCHEMAS
from headtrace.findings.measures import head_decisions
from headtrace.report import copying as C


def _cell(prefix, share, probes=("repeated", "text")):
    return pl.DataFrame([dict(probe=probe, layer=0, head=h, prefix_matching=prefix[h] if probe == "repeated" else None,
                              copying=share[h]) for probe in probes for h in range(len(share))],
                        schema_overrides={"prefix_matching": pl.Float64, "copying": pl.Float64})


def test_head_decisions_known_answers():
    # scores 0.41 / 0.40 / None against 0.4 (strictly above); shares 0.51 / 0.5 / None against 0.5
    d = head_decisions(_cell([0.41, 0.40, None], [0.51, 0.5, None]), prefix_threshold=0.4, copying_threshold=0.5)
    assert d.height == 3 and set(d["probe"]) == {"repeated"}  # the repeated probe's rows
    assert d["prefix_matches"].to_list() == [True, False, False]
    assert d["copies"].to_list() == [True, False, False]  # no score: neither
    assert d["prefix_threshold"].to_list() == [0.4] * 3 and d["copying_threshold"].to_list() == [0.5] * 3
    stricter = head_decisions(_cell([0.41, 0.40, None], [0.51, 0.5, None]), prefix_threshold=0.3,
                              copying_threshold=0.505)
    assert stricter["prefix_matches"].to_list() == [True, True, False]
    assert stricter["copies"].to_list() == [True, False, False]


def test_head_decisions_without_the_repeated_probe_judge_copying_only():
    d = head_decisions(_cell([0.9, 0.9], [0.7, 0.2], probes=("text",)), prefix_threshold=0.4, copying_threshold=0.5)
    assert d.height == 2 and d["prefix_matching"].null_count() == 2
    assert d["prefix_matches"].to_list() == [False, False] and d["copies"].to_list() == [True, False]


def test_circuit_text_words_the_decisions_it_is_given():
    # decided at other thresholds than the defaults: the line says those, and counts the decisions as given
    d = head_decisions(_cell([0.35, 0.2], [0.6, 0.4]), prefix_threshold=0.3, copying_threshold=0.55)
    assert C.circuit_text(["L0H0", "L0H1"], d) == (
        "prefix-matching (> 0.3) and copying (OV positive-eigenvalue share > 0.55): 1 of 2 heads "
        "(prefix-matching 1, copying 1)")
    assert C.circuit_text(["L0H1"], d.with_columns(copies=pl.lit(True))).endswith("0 of 1 heads (prefix-matching 0, "
                                                                                "copying 1)")


def test_the_section_names_no_threshold_its_table_does_not_record():
    empty = pl.DataFrame(schema=SCHEMAS["measures_circuit_copying"])  # no circuit anywhere: no head judged
    text = C.markdown({"measures_circuit_copying": empty}, models=["a"])
    assert "(prefix-matching above its threshold, headtrace's" in text and "(copying above its threshold)" in text
    assert "0.4" not in text
