"""The verdict's interval of the boost share left (headtrace.causal.verdict.boost_share_interval) on
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
