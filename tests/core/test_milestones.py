"""One milestone type (headtrace.core.milestones): every name the findings build parses back to its
kind and level, reads its column at the right minimum, and is said in words; anything else is refused."""
from __future__ import annotations

import pytest

from headtrace.core import milestones
from headtrace.findings import trajectory
from headtrace.panel import refine
from headtrace.report.format import milestone_words


@pytest.mark.parametrize("name, kind, level, column, minimum, words", [
    ("induction_3_heads", "induction", 3, "n_induction_circuit", 3, "an induction circuit of at least 3 heads"),
    ("induction_1_heads", "induction", 1, "n_induction_circuit", 1, "an induction circuit of at least 1 head"),
    ("first_token_50pct", "first_token", 50, "bos_fraction", 0.5 - 1e-12, "first-token heads on at least 50% of the heads"),
    ("first_token_100pct", "first_token", 100, "bos_fraction", 1 - 1e-12, "first-token heads on at least 100% of the heads"),
    ("text_sink_25pct", "text_sink", 25, "text_sink_rate", 0.25 - 1e-12, "a text sink rate of at least 25%"),
    ("prefix_2_heads", "prefix", 2, "n_prefix_heads", 2, "at least 2 prefix-matching heads"),
])
def test_a_name_parses_to_its_kind_level_column_minimum_and_words(name, kind, level, column, minimum, words):
    m = milestones.parse(name)
    assert (m.kind, m.level, m.name, m.column, m.words()) == (kind, level, name, column, words)
    assert m.minimum == pytest.approx(minimum, abs=0)
    assert milestone_words(name) == words


@pytest.mark.parametrize("name", ["induction_0_heads", "first_token_150pct", "first_token_0pct", "bos_50pct",
                                  "induction_3", "induction_3_head", "text_sink_50", " induction_3_heads"])
def test_other_names_are_refused_and_said_with_spaces(name):
    with pytest.raises(ValueError, match="unknown milestone"):
        milestones.parse(name)
    assert milestone_words(name) == name.replace("_", " ")


def test_the_findings_names_and_specs_come_from_the_one_type():
    assert milestones.name_of("first_token", 0.1) == "first_token_10pct"  # 100 * 0.1 is not exactly 10
    assert milestones.name_of("induction", 5) == "induction_5_heads"
    specs = trajectory.milestone_specs((1, 3), (0.25, 0.5))
    assert specs == [("induction_1_heads", "n_induction_circuit", 1), ("induction_3_heads", "n_induction_circuit", 3),
                     ("first_token_25pct", "bos_fraction", 0.25 - 1e-12), ("first_token_50pct", "bos_fraction", 0.5 - 1e-12)]
    assert trajectory.milestone_spec("first_token_50pct") == ("f2_bos_fraction", "bos_fraction", 0.5 - 1e-12)
    assert trajectory.milestone_spec("text_sink_50pct") is None  # not an F3 milestone
    # refinement brackets the F3 milestones only
    assert refine.parse_milestone("first_token_50pct") == ("first_token", 50)
    with pytest.raises(ValueError, match="for refinement"):
        refine.parse_milestone("text_sink_50pct")
