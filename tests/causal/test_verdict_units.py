"""The intervals (headtrace.causal.intervals, re-exported by headtrace.causal.verdict), the no-boost reason and the
composition checks of the verdict on hand-built inputs. The boost share left (boost_share_interval) on
hand-built resamples whose shares are known: 0, 1/4, 1/2, 3/4 and 1, whose percentiles numpy's linear
rule puts at 1/4 and 3/4 (level 0.5) or 0.025 and 0.975 (level 0.95)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from helpers.ablation import hand_table

from headtrace.causal import verdict as V
from headtrace.core import tables

FIVE = np.ones(5)


def test_the_share_left_of_the_boost_on_each_resample():
    # logit of B: the baseline 3, the copy-null 1 (a boost of 2); the condition 1 .. 3 leaves 0 .. 1 of it
    boot = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    args = ("logit_b", boot, 3 * FIVE, 1 * FIVE)
    assert V.boost_share_interval(*args, np.array([2.0]), np.array([3.0]), np.array([1.0]), 0.5) == (0.25, 0.75)
    assert V.boost_share_interval(*args, np.array([2.0]), np.array([3.0]), np.array([1.0])) == pytest.approx(
        (0.025, 0.975))  # the default level, 0.95
    # widened to contain the point estimate (the whole batch leaves all of the boost)
    assert V.boost_share_interval(*args, np.array([3.0]), np.array([3.0]), np.array([1.0]), 0.5) == (0.25, 1.0)
    assert V.boost_share_interval(*args, np.array([1.0]), np.array([3.0]), np.array([1.0]), 0.5) == (0.0, 0.75)


def test_the_cross_entropy_counts_the_other_way():
    # cross-entropy of B: lower is better; the baseline 1, the copy-null 3, the condition 1 .. 3
    boot = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    got = V.boost_share_interval("ce", boot, 1 * FIVE, 3 * FIVE, np.array([2.0]), np.array([1.0]), np.array([3.0]), 0.5)
    assert got == (0.25, 0.75)  # shares 1, 3/4, 1/2, 1/4, 0


def test_resamples_without_a_boost_are_left_out():
    base = 3 * np.ones(7)
    null = np.array([1, 1, 1, 1, 1, 3, 4.0])  # no boost on the last two resamples (equal, and reversed)
    boot = np.array([1.0, 1.5, 2.0, 2.5, 3.0, -100.0, -100.0])
    got = V.boost_share_interval("logit_b", boot, base, null, np.array([2.0]), np.array([3.0]), np.array([1.0]), 0.5)
    assert got == (0.25, 0.75)


def test_no_boost_no_interval():
    boot = np.array([1.0, 2.0])
    none = V.boost_share_interval("logit_b", boot, 3 * np.ones(2), 3 * np.ones(2), np.array([2.0]), np.array([3.0]),
                                  np.array([1.0]))
    assert all(math.isnan(x) for x in none)  # no resample with a boost
    whole = V.boost_share_interval("logit_b", boot, 3 * np.ones(2), np.ones(2), np.array([2.0]), np.array([1.0]),
                                   np.array([2.0]))
    assert all(math.isnan(x) for x in whole)  # resamples with a boost, but none on the whole batch
    single = V.boost_share_interval("logit_b", np.array([2.0]), np.array([3.0]), np.array([2.0, 4.0])[:1],
                                    np.array([2.0]), np.array([3.0]), np.array([1.0]))
    assert single == (0.0, 0.5)  # one resample with a boost of 1, left at 0; the batch's estimate 1/2


# ---- the percentile intervals, the resamples, composition: known answers --------------------------

def test_percentile_interval_widened_to_the_estimate():
    samples = np.arange(101.0)  # 0 .. 100: the q-quantile is 100 q
    assert V.percentile_interval(samples, 50.0) == pytest.approx((2.5, 97.5))  # the default level, 0.95
    assert V.percentile_interval(samples, 50.0, 0.5) == (25.0, 75.0)
    assert V.percentile_interval(samples, -1.0, 0.5) == (-1.0, 75.0)
    assert V.percentile_interval(samples, 200.0, 0.5) == (25.0, 200.0)


def test_fraction_interval_over_the_resamples_with_a_baseline():
    boot = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 7.0])
    base_boot = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 0.0])  # the last resample has no baseline: left out
    # ratios 0.5, 1, 1.5, 2, 2.5: the 0.025 and 0.975 quantiles 0.55 and 2.45; at level 0.5, 1 and 2
    assert V.fraction_interval(boot, base_boot, np.array([3.0]), np.array([2.0])) == pytest.approx((0.55, 2.45))
    assert V.fraction_interval(boot, base_boot, np.array([3.0]), np.array([2.0]), 0.5) == (1.0, 2.0)
    assert V.fraction_interval(boot, base_boot, np.array([6.0]), np.array([2.0]), 0.5) == (1.0, 3.0)  # widened
    assert V.fraction_interval(boot, base_boot, np.array([3.0]), np.array([1.0]), 0.5) == (1.0, 3.0)  # base 1
    # no baseline on the whole batch: the estimate is the resamples' median ratio
    assert V.fraction_interval(boot, base_boot, np.array([5.0]), np.array([0.0]), 0.5) == (1.0, 2.0)
    nothing = V.fraction_interval(boot, np.zeros(6), np.array([5.0]), np.array([1.0]))
    assert all(math.isnan(x) for x in nothing)


def test_bootstrap_counts_are_seeded_apart_from_the_screens():
    import zlib

    rng = np.random.default_rng([7, zlib.crc32(b"bootstrap")])  # the documented seed: (seed, crc32 'bootstrap')
    idx = rng.integers(0, 4, size=(3, 4))
    want = np.stack([np.bincount(row, minlength=4) for row in idx]).astype(float)
    np.testing.assert_array_equal(V.bootstrap_counts(4, 3, 7), want)
    np.testing.assert_array_equal(V.bootstrap_counts(4, 3, 7 + 2 ** 32), want)  # the seed's low 32 bits
    default = V.bootstrap_counts(4)
    assert default.shape == (1000, 4) and (default.sum(axis=1) == 4).all()
    np.testing.assert_array_equal(default, V.bootstrap_counts(4, 1000, 0))  # the defaults: 1000 resamples, seed 0


HALF = np.array([0.0, 0.0, 1.0, 1.0])  # resampled means binomial(4, 1/2) / 4: P(0) = P(1) = 1/16


def test_bootstrap_intervals_of_a_known_resampling_distribution():
    """Four sequences, two hits: the resampled mean is 0, 1/4, ... 1 with probabilities 1, 4, 6, 4, 1 in 16, so
    its 0.25 and 0.75 quantiles are 1/4 and 3/4 and its 0.025 and 0.975 quantiles 0 and 1 (1,000 resamples
    put them there with a margin of several standard errors)."""
    ones = np.ones(4)
    ps = [{"top1": ones, "logit_b": ones, "ce": ones}, {"top1": HALF, "logit_b": HALF, "ce": HALF}]
    half, wide = V.bootstrap_intervals(ps, 0, level=0.5), V.bootstrap_intervals(ps, 0)
    assert (half[1]["top1_lo"], half[1]["top1_hi"]) == (0.25, 0.75)
    assert (wide[1]["top1_lo"], wide[1]["top1_hi"]) == (0.0, 1.0)
    assert (half[1]["top1_effect_lo"], half[1]["top1_effect_hi"]) == (0.25, 0.75)  # 1 - the mean
    assert (half[1]["ce_effect_lo"], half[1]["ce_effect_hi"]) == (-0.75, -0.25)  # lower is better: negative
    assert (half[1]["top1_fraction_lo"], half[1]["top1_fraction_hi"]) == (0.25, 0.75)
    assert math.isnan(half[1]["logit_b_fraction_lo"])  # no copy-null: no boost to share
    assert (half[0]["top1_lo"], half[0]["top1_effect_lo"], half[0]["top1_effect_hi"]) == (1.0, 0.0, 0.0)
    assert wide == V.bootstrap_intervals(ps, 0, n_boot=1000, seed=0)  # the defaults: 1000 resamples, seed 0


def test_one_resample_is_widened_to_the_estimate():
    ps = [{"top1": np.ones(4), "logit_b": np.ones(4), "ce": np.ones(4)},
          {"top1": HALF, "logit_b": HALF, "ce": HALF}]
    for seed in range(3):
        (r, ) = V.bootstrap_counts(4, 1, seed) @ HALF[None].T / 4
        row = V.bootstrap_intervals(ps, 0, n_boot=1, seed=seed)[1]
        assert (row["top1_lo"], row["top1_hi"]) == (min(r[0], 0.5), max(r[0], 0.5))
        assert (row["top1_effect_lo"], row["top1_effect_hi"]) == (min(1 - r[0], 0.5), max(1 - r[0], 0.5))


def test_the_boost_share_against_the_copy_null():
    three, one, two = 3 * np.ones(4), np.ones(4), 2 * np.ones(4)
    ps = [{"top1": three, "logit_b": three, "ce": one}, {"top1": two, "logit_b": two, "ce": two},
          {"top1": one, "logit_b": one, "ce": three}]
    rows = V.bootstrap_intervals(ps, 0, n_boot=50, null_index=2)
    # the copy-null (index 2) takes logit_b from 3 to 1 and ce from 1 to 3: the condition leaves half of either
    assert (rows[1]["logit_b_fraction_lo"], rows[1]["logit_b_fraction_hi"]) == (0.5, 0.5)
    assert (rows[1]["ce_fraction_lo"], rows[1]["ce_fraction_hi"]) == (0.5, 0.5)
    assert (rows[1]["top1_fraction_lo"], rows[1]["top1_fraction_hi"]) == pytest.approx((2 / 3, 2 / 3))


def test_a_condition_with_another_number_of_sequences_is_refused():
    ps = [{"top1": np.ones(4), "logit_b": np.ones(4), "ce": np.ones(4)},
          {"top1": np.ones(3), "logit_b": np.ones(4), "ce": np.ones(4)}]
    with pytest.raises(ValueError) as e:
        V.bootstrap_intervals(ps, 0, n_boot=5)
    assert str(e.value) == "per-sequence top1 has shape (3,), expected (4,)"


def test_chance_and_induction_at_their_boundaries():
    assert V.chance_top1([100, 104]) == 0.25 and V.chance_top1((0, 1)) == 1.0
    with pytest.raises(ValueError) as e:
        V.chance_top1([5, 5])
    assert str(e.value) == "empty probe token range [5, 5]"
    assert V.induction_present(2.5, 0.25) and not V.induction_present(2.4, 0.25)  # 10 x chance, the default
    assert V.induction_present(0.5, 0.25, 2.0) and not V.induction_present(0.5, 0.25, 2.5)
    assert V.destroys_induction("causal", 2.5, 0.25) and not V.destroys_induction("causal", 2.5, 0.25, 20.0)
    assert not V.destroys_induction("not_causal", 2.5, 0.25)
    assert V._layers({3: 2, 1: 4}) == "L1: 4, L3: 2"


def test_the_boost_not_shown_in_words():
    tail = ("(the probe against the same sequences with B replaced), an interval that does not lie above 0, so an "
            "ablation could not tell removing induction from other damage")
    assert V.Boost("logit_b", 1.0, -0.1, -0.2, 0.05).reason() == (
        "the model shows no induction on this probe: the earlier B adds -0.1 [-0.2, 0.05] to the logit of B " + tail)
    assert V.Boost("top1", 0.5, 0.0123456, math.nan, math.nan).reason() == (
        "the model shows no induction on this probe: the earlier B adds 0.0123 to top-1 " + tail)
    assert V.Boost("some_metric", 0.5, 0.0, math.nan, math.nan).reason().endswith(" adds 0 to some_metric " + tail)


# ---- the verdict table on hand-built ablation tables: every column, both methods, the rules' settings -------

CIRCUIT = ["L1H0", "L1H1"]
SAMPLED = [0.38, 0.40, 0.42, 0.36, 0.40]  # top-1 of five distinct sets of the circuit's shape, each drawn 4 times


def _draws(condition, top1, n=20, **extra):
    """``n`` reference draws (draw 1..n) of two heads of layer 1 with top-1 ``top1(i)`` (i = 0 .. n-1); five
    distinct sets, L1H{2 + i % 5} and L1H{8 + i % 5}."""
    return [{"condition": condition, "draw": i + 1, "top1": top1(i), "heads": [f"L1H{2 + i % 5}", f"L1H{8 + i % 5}"],
             **extra} for i in range(n)]


def _cell(**circuit):
    """toy-neox step1000 (128 sequences): baseline top-1 0.40; the 2-head circuit 0.10 (effect 0.30 [0.25, 0.35],
    a quarter left, [0.15, 0.35]); 20 sampled draws of its reference set, effects 0.02, 0, -0.02, 0.04, 0 (mean
    0.008, none near 0.30: p = 1/21); a class-matched set of 10 draws from 84 sets, one with effect 0.10 (mean
    0.01, p = 1/11); its whole layer's 4 heads at 0.05 (effect 0.35); the copy-null at 0.10 (a boost of 0.30
    [0.25, 0.35])."""
    return [{"condition": "baseline", "top1": 0.40, "top1_control": 0.05, "top1_context": 0.20},
            {"condition": "circuit", "top1": 0.10, "heads": CIRCUIT, "top1_effect_lo": 0.25, "top1_effect_hi": 0.35,
             "top1_fraction_lo": 0.15, "top1_fraction_hi": 0.35, **circuit},
            *_draws("matched_random", lambda i: SAMPLED[i % 5]),
            *_draws("class_matched_random", lambda i: 0.30 if i == 0 else 0.40, n=10, n_matched_sets=84),
            {"condition": "upper_bound", "top1": 0.05, "heads": [f"L1H{h}" for h in range(4)]},
            {"condition": "copy_null", "top1": 0.10, "top1_effect_lo": 0.25, "top1_effect_hi": 0.35}]


def _row(table, circuit="circuit", **kw):
    return V.verdict(table, **kw).filter(pl.col("circuit") == circuit).row(0, named=True)


def test_every_column_of_a_causal_circuits_row():
    row = _row(hand_table(_cell()))
    approx = {"effect": 0.30, "random_effect_mean": 0.008, "effect_vs_random": 37.5, "excess_effect": 0.292,
              "p_value": 1 / 21, "min_p": 1 / 21, "random_top1_mean": 0.392, "class_p_value": 1 / 11,
              "class_random_effect_mean": 0.01, "upper_bound_effect": 0.35, "upper_bound_share": 0.30 / 0.35,
              "boost": 0.30, "ablated_fraction": 0.25}
    assert {k: row[k] for k in approx} == pytest.approx(approx)
    assert {k: v for k, v in row.items() if k not in approx} == {
        "model": "toy-neox", "revision": "step1000", "tokens": 1000, "circuit": "circuit", "n_heads": 2,
        "heads": CIRCUIT, "baseline_top1": 0.40, "ablated_top1": 0.10, "upper_bound_top1": 0.05,
        "upper_bound_saturates": False,  # 0.05 is more than 10% of 0.40
        "causal": True, "verdict": "causal", "metric": "top1", "baseline_value": 0.40, "ablated_value": 0.10,
        "effect_lo": 0.25, "effect_hi": 0.35,
        "n_matched_sets": None, "control_exact": None,  # sampled, the reference set's size not recorded
        "control": "matched_random", "upper_bound": "upper_bound", "n_random": 20, "n_distinct_draws": 5,
        "class_control": "class_matched_random", "n_class_matched_sets": 84,
        "underpowered_reason": None, "not_causal_reason": None, "control_sizes_match": True, "n_sequences": 128,
        "baseline_top1_control": 0.05, "baseline_top1_context": 0.20,
        "ablation_probe": None, "ablation_probe_seed": None, "ablation_probe_sha256": None,
        "ablation_probe_redrawn": None,
        "upper_bound_value": 0.05, "floor_reason": None,
        "ablated_fraction_lo": 0.15, "ablated_fraction_hi": 0.35, "half_baseline": "at_most_half",
        "partial_reason": None, "untested_reason": None,
        "upper_bound_share_note": None,  # two other heads in its layer beside its two: the share informs
        "alpha": 0.05, "method": "zero",  # the table's method null: the requested method
        "null_value": 0.10, "boost_lo": 0.25, "boost_hi": 0.35, "shows_behaviour": True,
        "second_method": None, "second_verdict": None, "second_p_value": None, "second_effect": None,
        "second_effect_lo": None, "second_effect_hi": None, "methods_agree": None}


def test_the_halving_line_alpha_and_the_saturation_share_are_the_callers():
    t = hand_table(_cell())
    # a line at 30%: the quarter left, interval [15%, 35%], reaches above it
    row = _row(t, max_ablated_fraction=0.3)
    assert (row["verdict"], row["half_baseline"]) == ("partial", "straddles_half")
    assert row["partial_reason"] == ("it beats its reference set, but top-1 after ablation is 25% of its baseline "
                                     "(interval 15% to 35%), which reaches above 30%: these heads are not shown "
                                     "to halve the behaviour in top-1")
    # the upper bound, 0.05 of 0.40, is at most 20% of the baseline: the share would repeat the relative drop
    row = _row(t, saturation_fraction=0.2)
    assert row["upper_bound_saturates"] and row["upper_bound_share_note"] == (
        "the whole layers take top-1 to at most 20% of its baseline, so the circuit's share of their effect would "
        "only repeat its relative drop")
    # one draw as damaging as the circuit: p = 2/21, decided only at a level above it
    second = _cell()
    second[2] = {**second[2], "top1": 0.05}
    assert _row(hand_table(second))["verdict"] == "not_causal"
    row = _row(hand_table(second), alpha=0.1)
    assert row["p_value"] == pytest.approx(2 / 21) and row["verdict"] == "causal" and row["alpha"] == 0.1
    assert V._saturates("top1", 0.5, 0.05, 0.1)  # at exactly 10% of the baseline: at most 10%


def _method(rows, method):
    return [{**r, "method": method} for r in rows]


def test_the_second_method_is_reported_beside_the_first_and_whether_they_agree():
    """Zero ablation: the circuit as in ``_cell`` (p = 1/21). Mean ablation: it takes top-1 to 0.15 only (effect
    0.25 [0.20, 0.30]), and one draw does more (p = 2/21): causal at alpha 0.1, not at 0.05."""
    zero = [r for r in _cell() if r["condition"] != "class_matched_random"]
    zero.append({"condition": "previous_token_circuit", "top1": 0.30, "heads": ["L0H1"]})  # zero ablation only
    mean = [{"condition": "baseline", "top1": 0.40},
            {"condition": "circuit", "top1": 0.15, "heads": CIRCUIT, "top1_effect_lo": 0.20, "top1_effect_hi": 0.30,
             "top1_fraction_lo": 0.25, "top1_fraction_hi": 0.45},
            *_draws("matched_random", lambda i: 0.10 if i == 0 else 0.40)]
    t = hand_table(_method(zero, "zero") + _method(mean, "mean"))
    row = _row(t)
    assert (row["method"], row["verdict"], row["p_value"]) == ("zero", "causal", pytest.approx(1 / 21))
    assert (row["second_method"], row["second_verdict"], row["methods_agree"]) == ("mean", "not_causal", False)
    assert (row["second_p_value"], row["second_effect"]) == pytest.approx((2 / 21, 0.25))
    assert (row["second_effect_lo"], row["second_effect_hi"]) == (0.20, 0.30)
    # the second method is judged under the same rules: at alpha 0.1 both methods call it causal
    row = _row(t, alpha=0.1)
    assert (row["verdict"], row["second_verdict"], row["methods_agree"]) == ("causal", "causal", True)
    # the primary method is the one asked for
    row = _row(t, method="mean")
    assert (row["method"], row["verdict"], row["p_value"]) == ("mean", "not_causal", pytest.approx(2 / 21))
    assert (row["second_method"], row["second_verdict"], row["methods_agree"]) == ("zero", "causal", False)
    assert (row["second_p_value"], row["second_effect"]) == pytest.approx((1 / 21, 0.30))
    # a circuit the second method did not ablate has nothing beside it
    prev = _row(t, "previous_token_circuit")
    assert prev["verdict"] == "untested" and prev["second_method"] is None and prev["methods_agree"] is None
    assert [prev[f"second_{c}"] for c in ("verdict", "p_value", "effect", "effect_lo", "effect_hi")] == [None] * 5


def test_a_table_without_a_method_column_is_of_the_method_asked_for():
    t = hand_table(_cell()).drop("method")
    assert _row(t)["method"] == "zero" and _row(t, method="mean")["method"] == "mean"
    assert _row(t, method="mean")["verdict"] == "causal"
    # an older table without the reference sets' records either: sampled, their sizes not recorded
    row = _row(t.drop("n_matched_sets", "reference_exact"))
    assert (row["verdict"], row["p_value"]) == ("causal", pytest.approx(1 / 21))
    assert (row["n_matched_sets"], row["n_class_matched_sets"], row["control_exact"]) == (None, None, None)


def test_a_table_without_the_method_asked_for_or_a_baseline_is_refused_naming_the_cell():
    t = hand_table(_method(_cell(), "mean"))
    with pytest.raises(ValueError) as e:
        V.verdict(t)
    assert str(e.value) == ("cell ('toy-neox', 'step1000', 1000): the ablation table holds method(s) ['mean'], not "
                            "ablation.method 'zero'")
    with pytest.raises(ValueError) as e:
        V.verdict(hand_table(_cell()[1:]))
    assert str(e.value) == "cell ('toy-neox', 'step1000', 1000): expected one baseline row, found 0"
    # the second method's rows without their baseline
    with pytest.raises(ValueError) as e:
        V.verdict(hand_table(_method(_cell(), "zero") + _method(_cell()[1:], "mean")))
    assert str(e.value) == "cell ('toy-neox', 'step1000', 1000): expected one baseline row, found 0"


def test_cells_in_the_tables_order_and_an_empty_table():
    # six revisions, written latest first: their rows come out in that order, neither sorted nor hashed
    steps = [f"step{k}000" for k in range(6, 0, -1)]
    v = V.verdict(hand_table([{**r, "revision": s, "tokens": int(s[4:])} for s in steps for r in _cell()]))
    assert v.filter(pl.col("circuit") == "circuit")["revision"].to_list() == steps
    empty = V.verdict(pl.DataFrame(schema=tables.SCHEMAS["ablation"]))
    assert empty.height == 0 and empty.schema == pl.Schema(tables.SCHEMAS["verdict"])


def test_an_empty_circuit_is_not_causal_with_nothing_to_judge():
    """The placeholder reference set of an empty circuit (``conditions._control``: one row, draw 0, 0 sets)."""
    rows = [{"condition": "baseline", "top1": 0.40}, {"condition": "circuit", "top1": 0.40},
            {"condition": "matched_random", "top1": 0.40, "n_matched_sets": 0},
            {"condition": "class_matched_random", "top1": 0.40, "n_matched_sets": 0}]
    row = _row(hand_table(rows))
    assert (row["verdict"], row["n_heads"], row["effect"], row["n_random"], row["n_matched_sets"]) == (
        "not_causal", 0, 0.0, 0, 0)
    assert math.isnan(row["p_value"]) and math.isnan(row["class_p_value"]) and math.isnan(row["min_p"])
    for c in ("half_baseline", "underpowered_reason", "not_causal_reason", "control_sizes_match", "control_exact"):
        assert row[c] is None, c


def test_a_circuit_without_a_reference_set_has_no_reference_numbers():
    row = _row(hand_table([r for r in _cell() if "matched_random" not in r["condition"]]))
    assert row["verdict"] == "untested" and row["control"] is None and row["class_control"] is None
    assert (row["n_random"], row["n_distinct_draws"], row["excess_effect"], row["effect_vs_random"]) == (0, 0, None,
                                                                                                        None)
    assert math.isnan(row["p_value"]) and math.isnan(row["min_p"]) and math.isnan(row["random_effect_mean"])
    assert row["control_sizes_match"] is None and row["control_exact"] is None  # no sets to compare


def test_a_sampled_reference_set_too_small_says_how_it_was_drawn():
    few = [r for r in _cell() if r["condition"] != "matched_random" or r["draw"] <= 5]
    few = [{**r, "n_matched_sets": 3024, "reference_exact": False} if r["condition"] == "matched_random" else r
           for r in few]
    row = _row(hand_table(few))
    assert row["verdict"] == "underpowered" and row["min_p"] == pytest.approx(1 / 6) and not row["control_exact"]
    assert row["underpowered_reason"] == ("its reference set allows p >= 1/6 > alpha = 0.05 (5 draws from 3,024 sets "
                                          "of its layers (sampled))")
    one = [r for r in _cell() if r["condition"] != "matched_random" or r["draw"] == 1]
    assert _row(hand_table(one))["underpowered_reason"] == (
        "its reference set allows p >= 1/2 > alpha = 0.05 (1 draw from a reference set whose size is not recorded "
        "(sampled))")


def _space_of_20(exact):
    """20 draws from a space of 20 sets, the circuit's own set as draw 20 (its effect, 0.30), the others 0."""
    rows = [r for r in _cell() if r["condition"] != "matched_random"]
    return rows + [{"condition": "matched_random", "draw": i + 1, "top1": 0.10 if i == 19 else 0.40,
                    "heads": CIRCUIT if i == 19 else [f"L1H{2 + i % 5}", f"L1H{8 + i % 5}"], "n_matched_sets": 20,
                    "reference_exact": exact(i)} for i in range(20)]


def test_a_reference_set_is_exact_only_when_every_set_says_so():
    # every set evaluated once: p = 1/20, exactly alpha, which decides
    row = _row(hand_table(_space_of_20(lambda i: True)))
    assert row["control_exact"] and row["p_value"] == 0.05 and row["min_p"] == 0.05 and row["verdict"] == "causal"
    # as many draws as sets, but drawn (with replacement), or one set's record missing: sampled, p = 2/21
    for exact in (lambda i: False, lambda i: None if i == 0 else True):
        row = _row(hand_table(_space_of_20(exact)))
        assert row["control_exact"] is False and row["p_value"] == pytest.approx(2 / 21)
        assert row["verdict"] == "not_causal"


def test_reference_sets_of_other_sizes_from_the_first_draw_on():
    rows = [r for r in _cell() if r["condition"] != "matched_random"]
    rows += [{"condition": "matched_random", "draw": 1, "top1": 0.40, "heads": ["L0H2", "L1H3", "L1H4"]},
             *({"condition": "matched_random", "draw": i + 2, "top1": 0.40, "heads": ["L1H2", "L1H3"]}
               for i in range(19))]
    row = _row(hand_table(rows))
    assert row["verdict"] == "underpowered" and row["control_sizes_match"] is False
    assert row["underpowered_reason"] == ("reference matched_random has sets of other per-layer sizes (L0: 1, L1: 2) "
                                          "than the circuit (L1: 2)")
    assert V.reference_mismatch(hand_table(rows), "matched_random", []) is None  # an empty circuit has no sizes


def test_a_continuous_metric_is_halved_on_the_share_of_the_boost():
    """Cross-entropy of B: baseline 2 nats, the copy-null 3 (the earlier B takes 1 nat off), the circuit 2.4:
    60% of the boost left, interval [45%, 75%], across the line: necessary in part, and said so."""
    rows = [{"condition": "baseline", "top1": 0.40, "ce": 2.0},
            {"condition": "circuit", "top1": 0.40, "ce": 2.4, "heads": CIRCUIT, "ce_fraction_lo": 0.45,
             "ce_fraction_hi": 0.75},
            *_draws("matched_random", lambda i: 0.40, ce=2.0),
            {"condition": "copy_null", "top1": 0.10, "ce": 3.0}]
    row = _row(hand_table(rows), metric="ce")
    assert (row["verdict"], row["half_baseline"]) == ("partial", "straddles_half")
    assert row["ablated_fraction"] == pytest.approx(0.6) and row["boost"] == 1.0
    assert row["partial_reason"] == ("it beats its reference set, but ablation leaves 60% of the in-context boost in "
                                     "the cross-entropy of B (interval 45% to 75%), which reaches above 50%: these "
                                     "heads are not shown to halve the behaviour in the cross-entropy of B")
    # without the copy-null there is no boost to share: no share left, the halving rule cannot apply
    row = _row(hand_table(rows[:-1]), metric="ce")
    assert row["verdict"] == "partial" and row["ablated_fraction"] is None and row["half_baseline"] is None
    assert row["partial_reason"] == ("it beats its reference set, but the halving rule cannot apply: the "
                                     "cross-entropy of B has no in-context boost to halve (no copy-null was run)")


def test_no_boost_on_the_copy_null_leaves_the_cell_untested_saying_on_which_metric():
    rows = [{**r, "top1": 0.40, "top1_effect_lo": -0.05} if r["condition"] == "copy_null" else r for r in _cell()]
    row = _row(hand_table(rows))
    assert row["verdict"] == "untested" and row["shows_behaviour"] is False
    assert row["untested_reason"].startswith("the model shows no induction on this probe: the earlier B adds 0 "
                                             "[-0.05, 0.35] to top-1 (")


# ---- the rules as functions: defaults, boundaries, words ----------------------------------------------

def test_decide_at_its_defaults_and_boundaries():
    # top-1 by default: 0.1 of 0.5 left, p at alpha
    assert V.decide(n_heads=2, effect=0.4, baseline=0.5, ablated=0.1, p_value=0.05, min_p_value=0.05) == "causal"
    assert V.decide(n_heads=0, effect=0.4, baseline=0.5, ablated=0.1, p_value=0.01, min_p_value=0.01) == "not_causal"
    # the caller's alpha and halving line
    assert V.decide(n_heads=2, effect=0.4, baseline=0.5, ablated=0.1, p_value=0.08, min_p_value=0.01,
                    alpha=0.1) == "causal"
    assert V.decide(n_heads=2, effect=0.3, baseline=0.5, ablated=0.2, p_value=0.01, min_p_value=0.01,
                    max_ablated_fraction=0.3) == "partial"
    # the logit of B without a copy-null: no share of the boost, so at most partial (ablated / baseline is 1/3)
    assert V.decide(n_heads=2, effect=2.0, baseline=3.0, ablated=1.0, p_value=0.01, min_p_value=0.01,
                    metric="logit_b") == "partial"
    assert V.min_p(20) == pytest.approx(1 / 21)  # draws unless said exact


def test_missed_criteria_at_their_boundaries():
    crit = dict(effect=0.4, baseline=0.5, ablated=0.1, p_value=0.01)
    assert V.missed_criteria(**crit) == () and V.missed_criteria(**crit, metric="top1") == ()
    assert V.missed_criteria(**crit, effect_lo=0.0) == ("effect",)  # an interval that starts at 0 reaches 0
    assert V.missed_criteria(**crit, max_ablated_fraction=0.2) == ()  # 0.1 of 0.5: 20% left, on the line
    assert V.missed_criteria(**crit, max_ablated_fraction=0.19) == ("ablated",)
    assert V.missed_criteria(**{**crit, "p_value": 0.05}) == ()


def test_half_baseline_with_half_an_interval_or_a_share_given():
    assert V.half_baseline("top1", 0.5, 0.1, 0.05, math.nan) == "at_most_half"  # one end only: the point decides
    assert V.half_baseline("top1", 0.5, 0.3, math.nan, 0.4) == "above_half"
    assert V.half_baseline("top1", 0.5, 0.3, 0.5, 0.7) == "straddles_half"  # starts on the line, not above it
    assert V.half_baseline("top1", 0.5, 0.4, fraction=0.3) == "at_most_half"  # a share given is the share


def test_the_share_left_in_words_at_its_limits():
    ce = "the cross-entropy of B"
    assert V.fraction_text("ce", 2.0, 2.4, 0.6) == (
        f"ablation leaves 60% of the in-context boost in {ce} (60%; no interval: the point estimate decides)")
    assert V.fraction_text("ce", 2.0, 2.4, 0.6, 0.45, math.nan).endswith("(60%; no interval: the point estimate decides)")
    assert V.fraction_text("ce", 2.0, 2.4, 0.6, 0.45, 0.75) == (
        f"ablation leaves 60% of the in-context boost in {ce} (interval 45% to 75%)")
    assert V.fraction_text("ce", 2.0, 2.4, 5.0, 4.0, 5.0) == (
        f"ablation leaves 500% of the in-context boost in {ce} (interval 400% to 500%)")  # at ±500%: printed
    assert V.fraction_text("ce", 2.0, 2.4, 0.6, -6.0, 2.0) == (
        f"ablation leaves 60% of the in-context boost in {ce} (its interval reaches beyond ±500%)")
    assert V.fraction_text("ce", 2.0, 9.0, 6.0) == (
        f"ablation leaves more than 500% of the in-context boost in {ce} (a boost near 0)")
    assert V.fraction_text("logit_b", 3.0, 9.0, -6.0) == (
        "ablation leaves less than 500% of the in-context boost in the logit of B (a boost near 0)")


def test_the_missed_criteria_in_words_on_a_continuous_metric():
    words = V.not_causal_reason(("ablated", "p"), effect=0.4, baseline=2.0, ablated=2.4, p_value=math.nan,
                                metric="ce", fraction=0.6)
    assert words == ("ablation leaves 60% of the in-context boost in the cross-entropy of B (60%; no interval: the "
                     "point estimate decides), not at most 50% and p undefined")


def test_induction_of_a_missing_baseline_is_not_present():
    np.testing.assert_array_equal(V.induction_present([0.3, None], 0.025), [True, False])
