"""The field's own per-head measures, as published, over attention patterns and weights (docs/measures.md).

Pure functions over arrays; the capture pass (``headtrace.cell.patterns``) computes the same numbers
from the model's own attention without materialising ``output_attentions``, and tests check the two
agree on every family.

* **Sink rate** (Gu et al. 2025, "When Attention Sink Emerges in Language Models"): for head (l, h) and
  key position k, ``alpha = 1 / (T - k) * sum_{i >= k} A[i, k]`` (0-based positions; the paper's
  ``1 / (T - k + 1)`` with 1-based ones): the mean attention every query at or after k gives to key k.
  A head is a sink on a sequence at ``eps`` when its ``alpha > eps`` there; the **sink rate** is the share
  of (sequence, layer, head) triples that are (:func:`sink_rate_per_sequence`), as the authors' released
  ``compute_attention_sink`` (sail-sg/Attention-Sink) thresholds each sequence and then averages over
  sequences, heads and layers. The paper: k = the first token, eps = 0.3, T = 64, 100 natural-text
  sequences. :func:`sink_rate` thresholds whatever alpha it is given (e.g. the heads' mean over the
  sequences: another number, named for what it is where the findings report it; docs/measures.md).
* **Prefix-matching score** (Olsson et al. 2022): on random tokens repeated, the attention a query gives
  to the tokens that *followed* its own token's earlier occurrences, averaged over the queries that have
  an earlier occurrence (the positions of the later repeats).
* **Copying** (Elhage et al. 2021; Olsson et al. 2022 ask it of an induction head beside prefix
  matching): the eigenvalues l of a head's OV circuit ``W_E W_V W_O W_U`` (vocab x vocab). Its nonzero
  eigenvalues are those of the d_head x d_head ``(W_O W_U)(W_E W_V)``, which is all we form. Two
  readings, both kept: **Elhage et al.'s eigenvalue ratio** ``sum l / sum |l|`` in [-1, 1]
  (:func:`eigenvalue_ratio`; ``sum l`` is the trace, real), and the **positive-eigenvalue share**
  ``sum max(Re l, 0) / sum |l|`` in [0, 1] (:func:`positive_share`; :func:`copying_score`, the
  ``copying`` column). On a real spectrum share = (1 + ratio) / 2; complex pairs pull the share down
  (their |Re l| < |l|), so at random init the share sits near 1/pi (~0.3) while the ratio sits near 0.
  A head *copies* at share > :data:`COPYING_THRESHOLD` (0.5, headtrace's convention): that implies
  ratio > 0 and equals it on a real spectrum (:func:`copies`).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

SINK_EPS = 0.3  # Gu et al. 2025's threshold
COPYING_THRESHOLD = 0.5  # positive-eigenvalue share above which a head copies (headtrace's convention)
SINK_KEY = 0  # the first token


# ---- sink rate ----------------------------------------------------------------------------------

def sink_alpha(to_key: np.ndarray, key: int = SINK_KEY) -> np.ndarray:
    """``alpha`` from the attention every query gives to key ``key``: ``to_key[..., i] = A[i, key]``
    (queries along the last axis, T of them) -> ``(...)``, the mean over the queries ``i >= key``."""
    to_key = np.asarray(to_key, dtype=np.float64)
    t = to_key.shape[-1]
    if not 0 <= key < t:
        raise ValueError(f"sink key {key} is outside a {t}-token sequence")
    return to_key[..., key:].mean(-1)


def sink_alpha_of_pattern(pattern: np.ndarray, key: int = SINK_KEY) -> np.ndarray:
    """``alpha`` of full attention patterns ``(..., T_query, T_key)`` -> ``(...)``."""
    pattern = np.asarray(pattern)
    return sink_alpha(pattern[..., :, key], key)


def is_sink(alpha: np.ndarray, eps: float = SINK_EPS) -> np.ndarray:
    """Per head: a sink at ``eps`` when ``alpha > eps`` (strictly, as published)."""
    return np.asarray(alpha) > eps


def sink_rate(alpha: np.ndarray, eps: float = SINK_EPS) -> float:
    """The share of all heads (every entry of ``alpha``, e.g. ``(n_layers, n_heads)``) that are sinks at ``eps``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.size == 0:
        raise ValueError("sink_rate of no heads")
    return float(is_sink(alpha, eps).mean())


def sink_rates(alpha: np.ndarray, eps: Iterable[float]) -> dict[float, float]:
    """``{eps: sink_rate(alpha, eps)}`` for every threshold."""
    return {float(e): sink_rate(alpha, e) for e in eps}


def sink_share(alpha_seq: np.ndarray, eps: float = SINK_EPS) -> np.ndarray:
    """Per head, the share of sequences on which it is a sink at ``eps``: ``alpha_seq`` (n_sequences, ...)
    -> (...), the mean over the first axis of ``alpha > eps``."""
    alpha_seq = np.asarray(alpha_seq, dtype=np.float64)
    if alpha_seq.ndim < 1 or alpha_seq.shape[0] == 0:
        raise ValueError("sink_share of no sequences")
    return is_sink(alpha_seq, eps).mean(0)


def sink_rate_per_sequence(alpha_seq: np.ndarray, eps: float = SINK_EPS) -> float:
    """The published sink rate: ``alpha_seq`` (n_sequences, n_layers, n_heads) thresholded per sequence,
    layer and head, then averaged over all three (Gu et al.'s ``compute_attention_sink``; the mean over the
    heads of :func:`sink_share`, every head having the same sequences)."""
    alpha_seq = np.asarray(alpha_seq, dtype=np.float64)
    if alpha_seq.size == 0:
        raise ValueError("sink_rate_per_sequence of no heads")
    return float(is_sink(alpha_seq, eps).mean())


# ---- prefix matching ----------------------------------------------------------------------------

def prefix_targets(tokens: np.ndarray) -> np.ndarray:
    """``(n, T, T)`` 0/1 weights: ``W[n, i, j] = 1`` when key ``j <= i`` follows an earlier occurrence of
    query ``i``'s token (``tokens[n, j - 1] == tokens[n, i]`` with ``j - 1 < i``)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"prefix_targets takes (n, T) token ids, got shape {tokens.shape}")
    n, t = tokens.shape
    same = tokens[:, :, None] == tokens[:, None, :]  # (n, i, p): token at p equals query i's
    earlier = np.tril(np.ones((t, t), bool), k=-1)  # p < i
    prev = same & earlier  # (n, i, p)
    w = np.zeros((n, t, t))
    w[:, :, 1:] = prev[:, :, :-1]  # key j = p + 1
    return w


def prefix_queries(tokens: np.ndarray) -> np.ndarray:
    """``(n, T)`` bool: the queries scored, those whose token occurred earlier in the sequence."""
    return prefix_targets(tokens).any(-1)


def prefix_matching(pattern: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Per sequence and head: the prefix-matching score of patterns ``(n, ..., T, T)`` on ``tokens``
    ``(n, T)`` -> ``(n, ...)``: for each scored query the attention summed over its target keys
    (:func:`prefix_targets`), averaged over the scored queries. NaN for a sequence with none."""
    pattern = np.asarray(pattern, dtype=np.float64)
    w = prefix_targets(tokens)
    n, t = w.shape[:2]
    extra = pattern.ndim - 3
    w_b = w.reshape(n, *([1] * extra), t, t)
    per_query = (pattern * w_b).sum(-1)  # (n, ..., T)
    scored = w.any(-1).reshape(n, *([1] * extra), t)
    count = scored.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (per_query * scored).sum(-1) / np.maximum(count, 1), np.nan)


# ---- copying ------------------------------------------------------------------------------------

def ov_eigenvalues(w_e: np.ndarray, w_v: np.ndarray, w_o: np.ndarray, w_u: np.ndarray) -> np.ndarray:
    """The nonzero eigenvalues (and d_head - rank zeros) of one head's OV circuit ``W_E W_V W_O W_U``
    (row-vector convention: ``W_E`` (vocab, d_model), ``W_V`` (d_model, d_head), ``W_O`` (d_head, d_model),
    ``W_U`` (d_model, vocab)), from the d_head x d_head product ``(W_O W_U)(W_E W_V)``; the vocab x vocab
    matrix is never formed."""
    left = np.asarray(w_e, np.float64) @ np.asarray(w_v, np.float64)  # (vocab, d_head)
    right = np.asarray(w_o, np.float64) @ np.asarray(w_u, np.float64)  # (d_head, vocab)
    return np.linalg.eigvals(right @ left)  # (d_head,)


def positive_share(eigenvalues: np.ndarray) -> float:
    """``sum max(Re l, 0) / sum |l|``: the share of eigenvalue mass that is positive, in [0, 1]."""
    ev = np.asarray(eigenvalues)
    total = np.abs(ev).sum()
    return float(np.maximum(ev.real, 0).sum() / total) if total > 0 else float("nan")


def eigenvalue_ratio(eigenvalues: np.ndarray) -> float:
    """Elhage et al.'s summary ``sum l / sum |l|`` (real part), in [-1, 1]."""
    ev = np.asarray(eigenvalues)
    total = np.abs(ev).sum()
    return float(ev.sum().real / total) if total > 0 else float("nan")


def copying_score(w_e, w_v, w_o, w_u) -> float:
    """One head's copying score: :func:`positive_share` of its OV circuit's eigenvalues."""
    return positive_share(ov_eigenvalues(w_e, w_v, w_o, w_u))


def copying_scores(w_e: np.ndarray, w_v: np.ndarray, w_o: np.ndarray, w_u: np.ndarray) -> np.ndarray:
    """:func:`copying_score` of every head at once: ``w_v`` (L, H, d_model, d_head), ``w_o`` (L, H, d_head,
    d_model) -> (L, H). ``(W_O W_U)(W_E W_V) = W_O (W_U W_E) W_V``: the d_model x d_model ``W_U W_E`` is formed
    once, then a d_head x d_head product per head."""
    return copying_scores_of_product(np.asarray(w_u, np.float64) @ np.asarray(w_e, np.float64), w_v, w_o)


def copying_scores_of_product(m: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """:func:`copying_scores` given ``m = W_U W_E`` (d_model, d_model), e.g. formed on the model's device."""
    return copying_readings_of_product(m, w_v, w_o)[0]


def copying_readings_of_product(m: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both readings of every head's OV eigenvalues from one eigendecomposition per head, given ``m = W_U W_E``:
    (positive-eigenvalue share, Elhage et al.'s eigenvalue ratio), each (L, H); NaN for a head with no
    eigenvalue mass."""
    m = np.asarray(m, np.float64)
    w_v, w_o = np.asarray(w_v, np.float64), np.asarray(w_o, np.float64)
    per_head = (w_o @ m) @ w_v  # (L, H, d_head, d_model) @ (L, H, d_model, d_head) -> (L, H, d_head, d_head)
    ev = np.linalg.eigvals(per_head)  # (L, H, d_head)
    total = np.abs(ev).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, np.maximum(ev.real, 0).sum(-1) / total, np.nan)
        ratio = np.where(total > 0, ev.sum(-1).real / total, np.nan)
    return share, ratio


def copies(share, threshold: float = COPYING_THRESHOLD):
    """Whether a head copies: its positive-eigenvalue share above ``threshold`` (strictly). At 0.5 this
    implies Elhage et al.'s ratio > 0 (share > 1/2 leaves less negative real mass than positive) and is
    the same test on a real spectrum; NaN (no eigenvalue mass) does not copy."""
    return np.asarray(share, np.float64) > threshold
