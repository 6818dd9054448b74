"""measures: the published formulas on hand-built attention patterns and weights with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from headtrace.cell import measures


def _causal_uniform(t: int) -> np.ndarray:
    """Query i attends uniformly to keys 0..i: A[i, 0] = 1 / (i + 1)."""
    a = np.tril(np.ones((t, t)))
    return a / a.sum(1, keepdims=True)


def test_sink_alpha_is_the_mean_over_later_queries_of_the_attention_to_the_key():
    t = 4
    a = _causal_uniform(t)
    # Gu et al.: alpha_k = 1/(T - k + 1) sum_{i >= k} A[i, k] (1-based) = mean over the queries at or after k.
    assert measures.sink_alpha_of_pattern(a, key=0) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert measures.sink_alpha_of_pattern(a, key=2) == pytest.approx((1 / 3 + 1 / 4) / 2)
    # every query all on the first token: alpha = 1; nothing on it: 0
    sink = np.zeros((t, t))
    sink[:, 0] = 1
    assert measures.sink_alpha_of_pattern(sink) == 1.0
    assert measures.sink_alpha_of_pattern(np.eye(t)) == pytest.approx(1 / t)  # only query 0 (itself)


def test_sink_rate_is_the_share_of_heads_strictly_above_eps():
    alpha = np.array([[0.9, 0.3, 0.31], [0.0, 0.29, 0.5]])  # (layers, heads)
    assert measures.sink_rate(alpha) == pytest.approx(3 / 6)  # 0.3 itself is not a sink (alpha > eps)
    assert measures.sink_rates(alpha, [0.1, 0.3, 0.6]) == {0.1: pytest.approx(5 / 6), 0.3: pytest.approx(0.5),
                                                             0.6: pytest.approx(1 / 6)}
    with pytest.raises(ValueError, match="outside"):
        measures.sink_alpha(np.ones(3), key=3)


def _released_sink_rate(patterns: np.ndarray, eps: float) -> float:
    """The authors' released computation, restated: every key k's score is the sum over the queries of
    A[i, k] / (T - k) (0-based k), thresholded strictly per sequence, layer and head, averaged over all
    three; the first key's share."""
    t = patterns.shape[-1]
    score = (patterns / np.arange(t, 0, -1)[None, :]).sum(-2)  # (n, L, H, T)
    return float((score > eps).mean(axis=(0, 1, 2))[0])


def test_published_sink_rate_thresholds_each_sequence_then_averages():
    # One head, T = 4, two sequences; A[i, 0] over queries i = 0..3:
    #   sequence 1: 1, 0.2, 0.2, 0.2 -> alpha = 1.6 / 4 = 0.4 (a sink at 0.3)
    #   sequence 2: 1, 0, 0, 0     -> alpha = 1 / 4 = 0.25 (not one)
    # published: 1 of 2 sequences -> 0.5; of the mean alpha 0.325 -> 1.0; at eps 0.35: 0.5 against 0.0.
    a = np.zeros((2, 1, 1, 4, 4))
    for n, col in enumerate(([1, 0.2, 0.2, 0.2], [1, 0, 0, 0])):
        for i, v in enumerate(col):
            a[n, 0, 0, i, 0] = v
            a[n, 0, 0, i, i] += 1 - v if i else 0  # the rest on the query itself: rows sum to 1
    alpha = measures.sink_alpha_of_pattern(a)  # (2, 1, 1)
    np.testing.assert_allclose(alpha.ravel(), [0.4, 0.25])
    assert measures.sink_rate_per_sequence(alpha, 0.3) == pytest.approx(0.5)
    assert measures.sink_rate(alpha.mean(0), 0.3) == 1.0
    assert measures.sink_rate_per_sequence(alpha, 0.35) == pytest.approx(0.5)
    assert measures.sink_rate(alpha.mean(0), 0.35) == 0.0
    np.testing.assert_allclose(measures.sink_share(alpha, 0.3), [[0.5]])
    for eps in (0.2, 0.3, 0.35, 0.5):
        assert measures.sink_rate_per_sequence(alpha, eps) == pytest.approx(_released_sink_rate(a, eps))


def test_published_sink_rate_matches_the_released_computation_on_random_patterns():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, 3, 5, 16, 16)) * 2
    logits[..., 0] += rng.normal(size=(7, 3, 5, 1)) * 2  # heads that lean on the first key, differently per sequence
    logits = np.where(np.tril(np.ones((16, 16), bool)), logits, -np.inf)
    a = np.exp(logits - logits.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    alpha = measures.sink_alpha_of_pattern(a)
    differ = 0
    for eps in (0.1, 0.2, 0.3, 0.5):
        assert measures.sink_rate_per_sequence(alpha, eps) == pytest.approx(_released_sink_rate(a, eps))
        differ += measures.sink_rate_per_sequence(alpha, eps) != measures.sink_rate(alpha.mean(0), eps)
    assert differ  # the two readings are different numbers here


def test_prefix_matching_of_a_perfect_induction_head_is_one_and_of_a_previous_token_head_zero():
    seg = np.array([5, 9, 7, 3])
    tokens = np.concatenate([[0], seg, seg, seg])[None, :]  # BOS + 3 repeats of L = 4
    t = tokens.shape[1]
    w = measures.prefix_targets(tokens)[0]
    # query at the second repeat's "9" (position 6): its earlier occurrence is 2, the token after it is 3
    assert np.flatnonzero(w[6]).tolist() == [3]
    # query at the third repeat's "9" (position 10): earlier occurrences at 2 and 6 -> keys 3 and 7
    assert np.flatnonzero(w[10]).tolist() == [3, 7]
    # the scored queries are the later repeats' positions exactly
    assert np.flatnonzero(measures.prefix_queries(tokens)[0]).tolist() == list(range(5, t))
    induction = np.zeros((t, t))
    for i in range(t):  # all weight on the most recent target (or on BOS where there is none)
        keys = np.flatnonzero(w[i])
        induction[i, keys[-1] if keys.size else 0] = 1
    assert measures.prefix_matching(induction[None], tokens)[0] == pytest.approx(1.0)
    prev = np.zeros((t, t))
    prev[0, 0] = 1
    prev[np.arange(1, t), np.arange(t - 1)] = 1
    assert measures.prefix_matching(prev[None], tokens)[0] == pytest.approx(0.0)
    # uniform causal attention: per scored query, (#targets) / (i + 1), averaged over the scored queries
    uni = _causal_uniform(t)
    expected = np.mean([w[i].sum() / (i + 1) for i in range(5, t)])
    assert measures.prefix_matching(uni[None, None], tokens)[0, 0] == pytest.approx(expected)


def test_prefix_matching_without_a_repeat_is_nan():
    tokens = np.arange(6)[None, :]
    assert np.isnan(measures.prefix_matching(_causal_uniform(6)[None], tokens)[0])


def _dense_copying(w_e, w_v, w_o, w_u):
    full = w_e @ w_v @ w_o @ w_u  # (vocab, vocab): the dense definition
    ev = np.linalg.eigvals(full)
    return measures.positive_share(ev), measures.eigenvalue_ratio(ev)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copying_score_equals_its_dense_definition_on_a_tiny_vocabulary(seed):
    rng = np.random.default_rng(seed)
    vocab, d_model, d_head = 24, 8, 3
    w_e, w_v = rng.normal(size=(vocab, d_model)), rng.normal(size=(d_model, d_head))
    w_o, w_u = rng.normal(size=(d_head, d_model)), rng.normal(size=(d_model, vocab))
    share, ratio = _dense_copying(w_e, w_v, w_o, w_u)
    ev = measures.ov_eigenvalues(w_e, w_v, w_o, w_u)
    assert ev.shape == (d_head,)
    assert measures.copying_score(w_e, w_v, w_o, w_u) == pytest.approx(share, abs=1e-9)
    assert measures.eigenvalue_ratio(ev) == pytest.approx(ratio, abs=1e-9)


def test_copying_score_of_a_pure_copying_and_a_pure_anti_copying_head():
    rng = np.random.default_rng(3)
    vocab, d = 10, 4
    w_e = rng.normal(size=(vocab, d))
    w_v, w_o = np.eye(d), np.eye(d)
    # W_U = W_E^T: the OV circuit is W_E W_E^T, positive semidefinite: every eigenvalue >= 0
    assert measures.copying_score(w_e, w_v, w_o, w_e.T) == pytest.approx(1.0)
    assert measures.eigenvalue_ratio(measures.ov_eigenvalues(w_e, w_v, w_o, w_e.T)) == pytest.approx(1.0)
    assert measures.copying_score(w_e, w_v, -w_o, w_e.T) == pytest.approx(0.0)  # attending lowers the logit
    assert measures.eigenvalue_ratio(measures.ov_eigenvalues(w_e, w_v, -w_o, w_e.T)) == pytest.approx(-1.0)


def _one_head(matrix):
    """``copying_readings_of_product`` of one head whose d_head x d_head OV product is ``matrix``
    (W_U W_E = identity, W_V = identity, W_O = matrix)."""
    d = len(matrix)
    share, ratio = measures.copying_readings_of_product(np.eye(d), np.eye(d)[None, None], np.asarray(matrix)[None, None])
    return float(share[0, 0]), float(ratio[0, 0])


def test_the_two_copying_readings_on_hand_built_spectra():
    # a real spectrum {3, -1}: share 3 / 4, Elhage's ratio (3 - 1) / 4 = 1/2, and share = (1 + ratio) / 2
    assert _one_head(np.diag([3.0, -1.0])) == pytest.approx((0.75, 0.5))
    # a rotation-scaling block (eigenvalues 1 +- i) and -0.5: sum |l| = 2 sqrt(2) + 0.5; the share counts the pair's
    # real parts 1 + 1 = 2, the ratio the trace 2 - 0.5 = 1.5: the two readings part
    m = np.zeros((3, 3))
    m[:2, :2] = [[1.0, -1.0], [1.0, 1.0]]
    m[2, 2] = -0.5
    total = 2 * np.sqrt(2) + 0.5
    share, ratio = _one_head(m)
    assert (share, ratio) == (pytest.approx(2 / total), pytest.approx(1.5 / total))
    assert share != pytest.approx((1 + ratio) / 2)
    # a mostly rotating head (0.1 +- i): the ratio is positive, the share far below one half: it does not copy
    share, ratio = _one_head([[0.1, -1.0], [1.0, 0.1]])
    assert ratio > 0 and share == pytest.approx(0.2 / (2 * np.hypot(0.1, 1.0)))
    assert not measures.copies(share)
    # no eigenvalue mass: NaN, which does not copy; the threshold is strict
    share, ratio = _one_head(np.zeros((2, 2)))
    assert np.isnan(share) and np.isnan(ratio) and not measures.copies(share)
    assert not measures.copies(0.5) and measures.copies(0.5 + 1e-9)
    assert measures.COPYING_THRESHOLD == 0.5


@pytest.mark.parametrize("seed", [0, 1])
def test_share_above_one_half_implies_a_positive_ratio_and_equals_it_on_real_spectra(seed):
    rng = np.random.default_rng(seed)
    d_model, d_head = 6, 4
    m = rng.normal(size=(d_model, d_model))
    w_v, w_o = rng.normal(size=(8, 16, d_model, d_head)), rng.normal(size=(8, 16, d_head, d_model))
    share, ratio = measures.copying_readings_of_product(m, w_v, w_o)
    assert share.shape == ratio.shape == (8, 16)
    assert np.all(ratio[share > 0.5] > 0)
    assert np.array_equal(share, measures.copying_scores_of_product(m, w_v, w_o))
    ev = np.linalg.eigvals(w_o[2, 3] @ m @ w_v[2, 3])
    assert ratio[2, 3] == pytest.approx(measures.eigenvalue_ratio(ev)) and share[2, 3] == pytest.approx(
        measures.positive_share(ev))
    # symmetric OV products have real spectra: share = (1 + ratio) / 2 exactly
    sym = m + m.T
    w_o_sym = np.swapaxes(w_v, -1, -2)  # W_O = W_V^T: W_V^T (M + M^T) W_V is symmetric
    share, ratio = measures.copying_readings_of_product(sym, w_v, w_o_sym)
    assert share == pytest.approx((1 + ratio) / 2)
