"""The headline's gap is f3_gaps' row as the findings job wrote it (issue 50, "answers are data"): the same
case, interval, order and basis for every kind of gap, on trajectories with known milestones; and the one
input where the report's own computation (before this) and the table disagreed."""
from __future__ import annotations

import polars as pl
import pytest
from helpers.trajectories import one_layer_trajectory

from headtrace.findings.compute import all_findings
from headtrace.report import answers as A

I3, F50 = "induction_3_heads", "first_token_50pct"
REVS = [("step0", 0), ("step1", 100), ("step2", 200), ("step3", 400)]
# model: (induction heads per revision, first-token heads of 8 per revision)
CASES = {
    "interval": ({"step1": 3, "step2": 3, "step3": 3}, {"step3": 4}),
    "at_first": ({"step0": 3, "step1": 3, "step2": 3, "step3": 3}, {"step2": 4, "step3": 4}),
    "no_sink": ({"step2": 3, "step3": 3}, {}),
    "no_circuit": ({}, {"step2": 4, "step3": 4}),
    "same": ({"step2": 3, "step3": 3}, {"step2": 4, "step3": 4}),
    "same_after_zero": ({"step1": 3, "step2": 3, "step3": 3}, {"step1": 4, "step2": 4, "step3": 4}),
}


@pytest.fixture(scope="module")
def F():
    traj = pl.concat([one_layer_trajectory(m, REVS, n, bos) for m, (n, bos) in CASES.items()])
    return all_findings(traj, spread_permutations=10, gaps=[(F50, I3)])


def test_the_headline_gap_is_the_f3_gaps_row(F):
    rows = {r["model"]: r for r in F["f3_gaps"].iter_rows(named=True)}
    answers = {a.model: a.gap50 for a in A.model_answers(F)}
    states = {m: g.state for m, g in answers.items()}
    assert states == {"interval": "interval", "at_first": "circuit_at_first", "no_sink": "no_sink",
                      "no_circuit": "no_circuit", "same": "same_revision", "same_after_zero": "same_revision"}
    for m, g in answers.items():
        r = rows[m]
        assert (g.order, g.basis, g.ratio, g.lo, g.hi) == (r["order"], r["order_basis"], r["gap_ratio"],
                                                          r["gap_lo"], r["gap_hi"]), m
    # what each rests on: both brackets; the last revision where the sink never came; nothing without a circuit
    assert answers["interval"].rests_on == ("step0", "step1", "step2", "step3")
    assert answers["no_sink"].rests_on == ("step1", "step2", "step3")
    assert answers["at_first"].rests_on == ("step0", "step1", "step2")
    assert answers["no_circuit"].rests_on == ()
    # by hand: circuit in (0, 100], sink in (200, 400]: (200/100, 400/0 -> unbounded), circuit first, seen
    assert (answers["interval"].lo, answers["interval"].hi, answers["interval"].order) == (2.0, None, "earlier first")
    assert answers["no_sink"].lo == 400 / 200 and answers["no_sink"].basis == "censoring"


def test_a_pair_without_an_f3_gaps_row_is_unknown(F):
    a = A.model_answers({**F, "f3_gaps": F["f3_gaps"].filter(pl.col("model") != "interval")})
    gap = next(x for x in a if x.model == "interval").gap50
    assert (gap.state, gap.order, gap.lo, gap.hi, gap.text()) == ("unknown", "absent", None, None, "—")


def test_both_first_met_after_a_zero_token_revision_have_no_bound(F):
    """Circuit and sink both first met at step1, after step0 at 0 tokens: each crossing lies in (0, 100], so
    the ratio is only known to lie in (0, ∞). The findings table says so with null bounds (f3_gaps: no bound
    against, or of, 0 tokens; gap_bound "unknown"); the report used to fill the lower end in itself, from the
    brackets, as 0 / 100 = 0 ("between 0× and ∞"). The table is right: a ratio of positive token counts is
    above 0 whatever the checkpoints say, so 0× is no bound, and the table is what every other reader of the
    gap (the seed groups, docs) reads. The headline now words the table's row."""
    row = F["f3_gaps"].filter(pl.col("model") == "same_after_zero").row(0, named=True)
    assert (row["gap_case"], row["gap_lo"], row["gap_hi"], row["gap_bound"], row["order"]) == \
        ("same revision", None, None, "unknown", "undecided")
    gap = next(a for a in A.model_answers(F) if a.model == "same_after_zero").gap50
    assert (gap.state, gap.lo, gap.hi) == ("same_revision", None, None)
    assert gap.text() == "not separated: same revision (no bound either way)"
    assert gap.why_undecided() == "both first seen at one revision: the checkpoint spacing does not order them"
    # a same-revision gap with bounds keeps its interval
    same = next(a for a in A.model_answers(F) if a.model == "same").gap50
    assert same.text() == "not separated: same revision (between 0.50× and 2.0×)"
