"""spectral: participation ratio on matrices of known spectrum, Gram vs SVD, the PR table."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from headtrace.cell import spectral
from headtrace.core import tables


def _with_spectrum(sigmas, n=40, d=16, seed=0) -> np.ndarray:
    """An (n x d) matrix with exactly the given singular values (random orthonormal factors)."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((n, len(sigmas))))
    v, _ = np.linalg.qr(rng.standard_normal((d, len(sigmas))))
    return (u * np.asarray(sigmas, float)) @ v.T


def test_rank_one_is_one():
    rng = np.random.default_rng(1)
    m = np.outer(rng.standard_normal(50), rng.standard_normal(8))
    assert spectral.participation_ratio(m) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_equal_singular_values_give_k(k):
    m = _with_spectrum([3.0] * k)
    assert spectral.participation_ratio(m) == pytest.approx(k, rel=1e-4)


def test_two_value_spectrum_closed_form():
    s = np.array([2.0, 1.0])
    p = s**2 / (s**2).sum()  # 0.8, 0.2
    expected = float(np.exp(-(p * np.log(p)).sum()))  # ~1.649
    assert spectral.participation_ratio(_with_spectrum(s)) == pytest.approx(expected, rel=1e-5)
    assert 1.0 < expected < 2.0


def test_scale_invariant_and_bounded():
    m = np.random.default_rng(2).standard_normal((30, 8))
    pr = spectral.participation_ratio(m)
    assert 1.0 <= pr <= 8.0
    assert spectral.participation_ratio(1e3 * m) == pytest.approx(pr, rel=1e-5)
    assert spectral.participation_ratio(torch.from_numpy(m)) == pytest.approx(pr, rel=1e-6)


def test_degenerate_matrices_match_author():
    assert spectral.participation_ratio(np.zeros((10, 4))) == 1.0  # p = 0 everywhere -> exp(0)
    assert np.isnan(spectral.participation_ratio(np.zeros((0, 4))))
    with pytest.raises(ValueError):
        spectral.participation_ratio(np.zeros(4))


def test_centering():
    rng = np.random.default_rng(3)
    # A large common offset plus isotropic noise: uncentred sees ~one direction, centred sees d.
    m = 50.0 + rng.standard_normal((2000, 4))
    assert spectral.participation_ratio(m) < 1.1
    assert spectral.participation_ratio(m, center=True) == pytest.approx(4.0, rel=0.02)
    # Centring a matrix whose columns already have zero mean changes nothing.
    z = m - m.mean(axis=0)
    assert spectral.participation_ratio(z, center=True) == pytest.approx(spectral.participation_ratio(z), rel=1e-4)
    # A constant matrix is rank 1 uncentred and all-zero (PR 1 by the author's convention) centred.
    c = np.ones((10, 3))
    assert spectral.participation_ratio(c) == pytest.approx(1.0, abs=1e-5)
    assert spectral.participation_ratio(c, center=True) == pytest.approx(1.0, abs=1e-5)


def _random_heads(n=64, layers=3, heads=4, d=16, seed=4):
    rng = np.random.default_rng(seed)
    # Per-head different effective ranks: scale the columns by a head-specific decay.
    decay = rng.uniform(0.1, 1.0, size=(layers, heads, 1)) ** np.arange(d)
    x = rng.standard_normal((n, layers, heads, d)) * decay + rng.standard_normal((1, layers, heads, d))
    return x.astype(np.float32)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("n", [64, 10])  # N >= d and N < d (the Gram matrix switches side)
def test_gram_matches_svd_and_loop(center, n):
    x = _random_heads(n=n)
    gram = spectral.pr_per_head(x, center=center)
    svd = spectral.pr_per_head(x, center=center, method="svd")
    loop = np.array([[spectral.participation_ratio(x[:, l, h], center=center) for h in range(x.shape[2])]
                     for l in range(x.shape[1])])
    assert gram.shape == (3, 4) and gram.dtype == np.float64
    np.testing.assert_allclose(gram, svd, rtol=1e-4)
    np.testing.assert_allclose(gram, loop, rtol=1e-4)
    assert gram.min() >= 1.0 and gram.max() <= min(n, 16)
    assert np.ptp(gram) > 0.5  # heads do differ, so the comparison is not trivial


def test_pr_per_head_degenerate():
    x = np.zeros((8, 2, 3, 4), np.float32)
    np.testing.assert_array_equal(spectral.pr_per_head(x), np.ones((2, 3)))
    assert np.isnan(spectral.pr_per_head(np.zeros((0, 2, 3, 4)))).all()
    with pytest.raises(ValueError):
        spectral.pr_per_head(np.zeros((8, 3, 4)))


def test_pr_table_schema():
    pr = np.arange(6, dtype=float).reshape(2, 3) + 1
    df = spectral.pr_table(pr, "m", "step1", 2_097_152)
    assert dict(zip(df.columns, df.dtypes)) == tables.SCHEMAS["pr"]
    assert df.height == 6
    assert df.filter((df["layer"] == 1) & (df["head"] == 2))["pr"].item() == 6.0
    assert df["tokens"].unique().to_list() == [2_097_152]


def test_pr_over_the_first_n_sequences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1, 2, 8)).astype(np.float32)
    assert np.allclose(spectral.pr_per_head(x, n_sequences=10), spectral.pr_per_head(x[:10]))
