"""The intervals (headtrace.causal.intervals, re-exported by headtrace.causal.verdict), the no-boost reason and the
composition checks of the verdict on hand-built inputs. The boost share left (boost_share_interval) on
hand-built resamples whose shares are known: 0, 1/4, 1/2, 3/4 and 1, whose percentiles numpy's linear
rule puts at 1/4 and 3/4 (level 0.5) or 0.025 and 0.975 (level 0.95)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from headtrace.causal import verdict as V

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
