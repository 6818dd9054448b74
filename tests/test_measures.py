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
