"""Participation ratio (entropy effective rank) of each head's outputs at the query.

For a head, M is the (N x d_head) matrix of its outputs over the N probe sequences (Xu 2026,
arXiv:2605.24059, step 1 of the recipe). With singular values sigma_i of M,

    p_i = sigma_i^2 / sum_j sigma_j^2,    PR = exp(-sum_i p_i log p_i),

so PR = 1 for a rank-1 M and PR = k for k equal non-zero singular values. As in the author's
``compute_pr``: the matrix is *uncentred* by default, the log is taken as ``log(p + 1e-12)`` and the
denominator is clamped at 1e-12 - so an all-zero matrix has PR = 1 (every p_i = 0, entropy 0), and
an empty matrix (N = 0) has PR = NaN. ``center=True`` subtracts each column's mean over the N
sequences first (the PR of the covariance spectrum instead of the second-moment spectrum; not the
author's choice, offered for comparison).

``participation_ratio`` is the author's computation (fp32 SVD). ``pr_per_head`` computes all heads
at once from the eigenvalues of each head's Gram matrix in float64 (sigma_i^2 are the eigenvalues of
M^T M, or of M M^T when N < d_head) - the same quantity, faster and no less accurate; the tests
check it against the SVD path.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from headtrace.core import tables

# torch is imported only by the fp32-SVD paths (the author's check): the default Gram method is
# numpy, so the per-cell `pr` job does not pay torch's import.

EPS = 1e-12  # the author's epsilon, inside the log and as the floor of sum(sigma^2)


def participation_ratio(matrix, center: bool = False) -> float:
    """Entropy effective rank of an (N x d) matrix, fp32 SVD (the author's ``compute_pr``).

    Uncentred by default, as the author; ``center=True`` subtracts the column means first.
    All-zero matrix -> 1.0; N = 0 -> NaN.
    """
    import torch  # the float64 SVD; the eig path and the tables need numpy only

    m = matrix if isinstance(matrix, torch.Tensor) else torch.from_numpy(np.asarray(matrix, np.float32))
    if m.dim() != 2:
        raise ValueError(f"participation_ratio needs a 2-D matrix, got shape {tuple(m.shape)}")
    if m.shape[0] == 0 or m.shape[1] == 0:
        return float("nan")
    m = m.detach().to("cpu", torch.float32)
    if center:
        m = m - m.mean(dim=0, keepdim=True)
    s = torch.linalg.svdvals(m).double().numpy()
    return float(_entropy_rank(s * s))


def pr_per_head(head_outputs: np.ndarray, center: bool = False, method: str = "gram",
                n_sequences: int | None = None) -> np.ndarray:
    """PR of every head: ``head_outputs`` (N, L, H, D) -> (L, H) float64.

    ``n_sequences``: use only the first n probe sequences (the paper's PR pass used 500 of the
    batch; None, the default, uses all N as the author's screen does).

    ``method="gram"`` (default): eigenvalues of each head's Gram matrix in float64, batched per layer.
    ``method="svd"``: the author's fp32 SVD, batched over heads (slower; for checking).
    """
    x = np.asarray(head_outputs)
    if n_sequences is not None:
        x = x[:n_sequences]
    if x.ndim != 4:
        raise ValueError(f"head_outputs must be (n_sequences, n_layers, n_heads, d_head), got {x.shape}")
    n, n_layers, n_heads, d = x.shape
    if n == 0 or d == 0:
        return np.full((n_layers, n_heads), np.nan)
    if method not in ("gram", "svd"):
        raise ValueError(f"unknown method '{method}' (gram or svd)")
    out = np.empty((n_layers, n_heads), np.float64)
    for layer in range(n_layers):  # one layer at a time bounds memory (H x N x D in float64)
        if method == "svd":
            import torch  # as above: only the SVD path needs it

            m = torch.from_numpy(np.ascontiguousarray(x[:, layer].transpose(1, 0, 2), dtype=np.float32))
            if center:
                m = m - m.mean(dim=1, keepdim=True)
            s = torch.linalg.svdvals(m).double().numpy()  # (H, min(N, D))
            out[layer] = _entropy_rank(s * s)
            continue
        m = np.ascontiguousarray(x[:, layer].transpose(1, 0, 2), dtype=np.float64)  # (H, N, D)
        if center:
            m = m - m.mean(axis=1, keepdims=True)
        gram = m.transpose(0, 2, 1) @ m if n >= d else m @ m.transpose(0, 2, 1)  # (H, k, k), k = min(N, D)
        out[layer] = _entropy_rank(np.linalg.eigvalsh(gram))
    return out


def pr_table(pr: np.ndarray, model_name: str, revision: str, tokens: int) -> pl.DataFrame:
    """One row per (layer, head), conforming to ``tables.SCHEMAS["pr"]``."""
    pr = np.asarray(pr, np.float64)
    if pr.ndim != 2:
        raise ValueError(f"pr must be (n_layers, n_heads), got {pr.shape}")
    df = pl.DataFrame({**tables.head_key_columns(model_name, revision, tokens, *pr.shape), "pr": pr.ravel()})
    return tables.conform(df, "pr")


def _entropy_rank(s2: np.ndarray) -> np.ndarray:
    """PR from squared singular values along the last axis (the author's formula)."""
    s2 = np.maximum(s2, 0.0)  # Gram eigenvalues can come out slightly negative
    p = s2 / np.maximum(s2.sum(axis=-1, keepdims=True), EPS)
    return np.exp(-(p * np.log(p + EPS)).sum(axis=-1))
