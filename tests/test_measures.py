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
