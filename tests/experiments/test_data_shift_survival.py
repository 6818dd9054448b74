"""What survives the data shift is decided in the ``data_shift`` table (experiments.data_shift.survival_columns),
not on the page: each decision column against hand-built rows whose answers are worked out by hand."""
from __future__ import annotations

import math

import polars as pl
import pytest

from headtrace import experiments as E
from headtrace.core import tables
from headtrace.experiments.data_shift import raises_top1, survival_columns


def _traj(model, revs, circuits, sel=80.0):
    """2 layers x 2 heads; circuit heads at ``sel`` induction selectivity, the others at 2x."""
    return pl.DataFrame([{"model": model, "revision": rev, "tokens": tok, "layer": l, "head": h,
                          "sel_induction": sel if (l, h) in circ else 2.0, "pr": 1.0,
                          "in_induction_circuit": (l, h) in circ}
                         for (rev, tok), circ in zip(revs, circuits) for l in range(2) for h in range(2)])


def test_survival_columns_known_answers():
    before = {"baseline_top1": 0.5, "baseline_top1_lo": 0.40, "baseline_top1_hi": 0.60}
    row = {"jaccard_to_pre_shift": 1.0, "jaccard_p_value": 0.2, "pre_shift_heads_sel_induction": 49.9,
           "baseline_top1": 0.2, "baseline_top1_lo": 0.13, "baseline_top1_hi": 0.29,
           "circuit_n_heads": 2, "circuit_metric": "top1", "circuit_effect_hi": 0.05,
           "previous_token_n_heads": 1, "previous_token_metric": "top1", "previous_token_effect_hi": -0.05}
    got = survival_columns(row, before, True, 50.0, 0.05)
    # J = 1: the same heads; P 0.2 > 0.05: chance gives that overlap; 49.9 < 50: selectivity lost;
    # 0.29 < 0.40: the intervals apart, top-1 fell; the previous-token interval ends at -0.05 < 0: raised
    assert got == {"induction_threshold": 50.0, "heads_kept": True, "heads_overlap_by_chance": True,
                   "selectivity_kept": False, "behaviour_change": "fell", "circuit_raises_top1": False,
                   "previous_token_raises_top1": True}
    # at the threshold counts as kept (>=); P exactly alpha is beyond chance (p <= alpha); J < 1: heads lost
    edge = survival_columns({**row, "jaccard_to_pre_shift": 0.5, "jaccard_p_value": 0.05,
                             "pre_shift_heads_sel_induction": 50.0}, before, True, 50.0, 0.05)
    assert (edge["heads_kept"], edge["heads_overlap_by_chance"], edge["selectivity_kept"]) == (False, False, True)
    # before the shift, and with nothing to decide: null
    empty = survival_columns({"jaccard_to_pre_shift": 0.0, "jaccard_p_value": None,
                              "pre_shift_heads_sel_induction": math.nan}, None, False, 50.0, 0.05)
    assert empty == {"induction_threshold": 50.0, "heads_kept": None, "heads_overlap_by_chance": None,
                     "selectivity_kept": None, "behaviour_change": None, "circuit_raises_top1": None,
                     "previous_token_raises_top1": None}


def test_raises_top1_needs_top1_and_the_whole_interval_below_zero():
    assert raises_top1({"circuit_n_heads": 2, "circuit_metric": "top1", "circuit_effect_hi": -1e-9}, "circuit") is True
    assert raises_top1({"circuit_n_heads": 2, "circuit_metric": "top1", "circuit_effect_hi": 0.0}, "circuit") is False
    # another decision metric: its effect's sign says nothing of top-1
    assert raises_top1({"circuit_n_heads": 2, "circuit_metric": "logit_diff", "circuit_effect_hi": -0.3},
                       "circuit") is False
    assert raises_top1({"circuit_n_heads": 0, "circuit_metric": "top1", "circuit_effect_hi": None}, "circuit") is False
    assert raises_top1({}, "circuit") is None  # not ablated


def test_data_shift_table_decides_at_the_given_threshold_and_alpha():
    # pre-shift circuit {L1H0, L1H1} at 80x; after the shift one head left: the pre-shift heads' mean
    # selectivity (80 + 2) / 2 = 41x
    base = _traj("b", [("step0", 0), ("step100", 1000)], [set(), {(1, 0), (1, 1)}])
    shifted = _traj("b-shift", [("step0", 0), ("step10", 100)], [{(1, 0), (1, 1)}, {(1, 0)}])
    df = tables.conform(E.data_shift_table(base, shifted), "data_shift")
    assert df["induction_threshold"].to_list() == [50.0] * 4  # the screen's default
    assert df["heads_kept"].to_list() == [False, True, True, False]
    # the pre-shift heads' mean: 2x at the base's step0, 80x, 80x, then 41x
    assert df["selectivity_kept"].to_list() == [False, True, True, False]
    # the within-layer null: the circuit fills layer 1, so every P is 1 (test_experiments' table)
    assert df["heads_overlap_by_chance"].to_list() == [True] * 4
    assert df["behaviour_change"].null_count() == 4 and df["previous_token_raises_top1"].null_count() == 4
    low = E.data_shift_table(base, shifted, induction_threshold=40.0, alpha=1.0)
    assert low["selectivity_kept"].to_list() == [False, True, True, True]  # 41 >= 40
    assert low["heads_overlap_by_chance"].to_list() == [False] * 4  # P = 1 is not above alpha 1
    assert low["induction_threshold"].to_list() == [40.0] * 4


def test_data_shift_table_behaviour_change_against_the_last_pre_shift_revision():
    base = _traj("b", [("step0", 0), ("step100", 1000)], [set(), {(1, 0)}])
    shifted = _traj("b-shift", [("step10", 100), ("step20", 200)], [{(1, 0)}, {(1, 0)}])
    common = {"metric": "top1", "n_sequences": 100, "n_heads": 1, "ablated_top1": 0.0, "effect": 0.1,
              "effect_lo": 0.05, "effect_hi": 0.15, "verdict": "causal"}
    # top-1 of 100 sequences: 10% at step0 (ignored: not the last pre-shift), 50% at step100, then 45% and 80%
    v = pl.DataFrame([{"model": m, "revision": r, "baseline_top1": b, "circuit": c, **common}
                      for m, r, b in (("b", "step0", 0.1), ("b", "step100", 0.5), ("b-shift", "step10", 0.45),
                                      ("b-shift", "step20", 0.8))
                      for c in ("circuit", "previous_token_circuit")])
    df = E.data_shift_table(base, shifted, verdicts=v)
    # Wilson 95% of 50/100 = [0.404, 0.596]; 45/100 = [0.355, 0.548] overlaps it; 80/100 = [0.711, 0.867] lies above
    assert df["behaviour_change"].to_list() == [None, None, "overlap", "rose"]
    assert df["circuit_raises_top1"].to_list() == [False] * 4  # effect interval (0.05, 0.15) above zero
    assert df["baseline_top1_lo"][1] == pytest.approx(0.40383, abs=1e-5)
