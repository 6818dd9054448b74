"""findings.agreement: the Jaccard of two head sets beside the exact within-layer null, on hand-computed cases."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import polars as pl
import pytest

from headtrace.findings import agreement as ag


def test_eleven_and_ten_of_twelve_heads_agree_no_more_than_chance():
    # overlap 9 or 10: P(9) = C(11,9) C(1,1) / C(12,10) = 55/66, P(10) = C(11,10) C(1,0) / 66 = 11/66
    np.testing.assert_allclose(ag.hypergeom_pmf(12, 11, 10), [0] * 9 + [55 / 66, 11 / 66])
    a = [(1, h) for h in range(11)]
    b = [(1, h) for h in range(10)]  # shares 10: J = 10/11
    c = [(1, h) for h in range(2, 12)]  # shares 9: J = 9/12
    chance = 55 / 66 * 9 / 12 + 11 / 66 * 10 / 11  # 0.7765
    low = ag.jaccard_null(a, c, 12)
    assert low["jaccard"] == pytest.approx(0.75) and low["null_mean"] == pytest.approx(chance)
    assert (low["null_min"], low["null_max"]) == (pytest.approx(0.75), pytest.approx(10 / 11))
    assert low["p_value"] == pytest.approx(1.0) and low["beyond_chance"] is False
    high = ag.jaccard_null(a, b, {0: 12, 1: 12})
    assert high["jaccard"] == pytest.approx(10 / 11) and high["p_value"] == pytest.approx(1 / 6)
    assert high["beyond_chance"] is False  # the largest overlap possible, still 1 in 6 by placement
    assert "no more than chance" in ag.verdict(low) and "chance 0.78" in ag.verdict(low)


def test_two_identical_pairs_in_a_twelve_head_layer_agree_beyond_chance():
    # K ~ Hypergeometric(12, 2, 2): P(0) = 45/66, P(1) = 20/66, P(2) = 1/66; J = 0, 1/3, 1
    r = ag.jaccard_null(["L0H3", "L0H7"], ["L0H3", "L0H7"], 12)
    assert r["jaccard"] == 1.0 and r["p_value"] == pytest.approx(1 / 66)
    assert r["null_mean"] == pytest.approx(20 / 66 / 3 + 1 / 66) and r["beyond_chance"] is True
    assert "beyond chance" in ag.verdict(r)


def test_single_heads_and_sets_in_different_layers():
    same = ag.jaccard_null([(0, 1)], [(0, 1)], 4)
    assert same["jaccard"] == 1.0 and same["p_value"] == pytest.approx(0.25) and same["null_mean"] == pytest.approx(0.25)
    apart = ag.jaccard_null([(0, 1)], [(1, 1)], 4)  # no layer in common: overlap 0 is forced
    assert apart["jaccard"] == 0.0 and apart["null_mean"] == 0.0 and apart["p_value"] == 1.0
    assert ag.jaccard_null([], [], 4)["jaccard"] is None and ag.verdict(ag.jaccard_null([], [], 4)) == "—"
    with pytest.raises(ValueError, match="layer 2"):
        ag.jaccard_null([(2, 0)], [(2, 1)], {0: 4})


def test_exact_null_equals_enumerating_every_placement():
    n = {0: 4, 1: 3}
    a = [(0, 0), (0, 1), (1, 0)]
    b = [(0, 2), (1, 0), (1, 1)]
    counts: Counter = Counter()
    for b0 in itertools.combinations(range(4), 1):
        for b1 in itertools.combinations(range(3), 2):
            bb = {(0, h) for h in b0} | {(1, h) for h in b1}
            counts[len(set(a) & bb)] += 1
    total = sum(counts.values())
    pmf = ag.overlap_pmf([(4, 2, 1), (3, 1, 2)])
    np.testing.assert_allclose(pmf, [counts[k] / total for k in range(pmf.size)])
    r = ag.jaccard_null(a, b, n)
    assert r["jaccard"] == pytest.approx(1 / 5)
    assert r["p_value"] == pytest.approx(sum(v for k, v in counts.items() if k >= 1) / total)
    assert r["null_mean"] == pytest.approx(sum(v * k / (6 - k) for k, v in counts.items()) / total)
    assert math.isclose(sum(pmf), 1.0)


def test_subsets_must_fit_the_layer():
    np.testing.assert_allclose(ag.hypergeom_pmf(3, 3, 3), [0, 0, 0, 1])  # whole layers: overlap 3 for sure
    np.testing.assert_allclose(ag.hypergeom_pmf(3, 0, 3), [1])
    for a, b in ((4, 1), (1, 4), (-1, 1), (1, -1)):
        with pytest.raises(ValueError, match=rf"subsets of {a} and {b} do not fit 3 items"):
            ag.hypergeom_pmf(3, a, b)


def test_empty_sets_have_no_jaccard_and_every_layer_needs_a_head_count():
    assert ag.jaccard_null([], [], 4) == dict.fromkeys(
        ["jaccard", "null_mean", "null_min", "null_max", "p_value", "beyond_chance"])
    with pytest.raises(ValueError, match="layer 2"):  # a layer only one of the sets uses
        ag.jaccard_null([(2, 0)], [(0, 1)], {0: 4})


def test_verdict_words():
    low = ag.jaccard_null([(1, h) for h in range(11)], [(1, h) for h in range(2, 12)], 12)
    assert ag.verdict(low) == "0.75 (chance 0.78; no more than chance, P = 1)"
    pair = ag.jaccard_null(["L0H3", "L0H7"], ["L0H3", "L0H7"], 12)
    assert ag.verdict(pair) == "1.00 (chance 0.12; beyond chance, P = 0.016)"  # 1/66 rounded up; 20/66/3 + 1/66
    assert ag.verdict({"jaccard": 0.5, "null_mean": None}) == "0.50"  # no null: the Jaccard alone


def test_heads_per_layer_counts_one_revision_of_one_model():
    rows = [("m", r, layer, h) for r in ("r1", "r2") for layer, n in ((0, 2), (1, 3)) for h in range(n)]
    rows += [("other", "r1", 0, h) for h in range(5)]
    traj = pl.DataFrame(rows, schema=["model", "revision", "layer", "head"], orient="row")
    assert ag.heads_per_layer(traj, "m") == {0: 2, 1: 3}
    assert ag.heads_per_layer(traj.filter(pl.col("model") == "m")) == {0: 2, 1: 3}
    assert ag.heads_per_layer(traj, "other") == {0: 5}
    assert ag.heads_per_layer(traj, "absent") == {}
    one = pl.DataFrame({"model": ["m"], "revision": ["r1"], "layer": [0], "head": [0]})  # a one-head model
    assert ag.heads_per_layer(one) == {0: 1}


def test_p_is_capped_at_one_and_alpha_itself_is_beyond_chance():
    # no overlap in two 5-head layers: p = P(K >= 0) = 1, though the pmf's terms sum to 1 + 2e-16 in floats
    r = ag.jaccard_null([(0, 0), (1, 0)], [(0, 1), (1, 1)], 5)
    assert r["jaccard"] == 0.0 and r["p_value"] == 1.0
    # one shared head of 20: p = 1/20, exactly alpha: beyond chance (p <= alpha)
    r = ag.jaccard_null([(0, 0)], [(0, 0)], 20)
    assert r["p_value"] == ag.ALPHA == 0.05 and r["beyond_chance"] is True
