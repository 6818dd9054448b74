"""Fingerprints (headtrace.models.fingerprint): the CountSketch's known answers, its estimator of
distances (unbiased, with the documented spread at 64 buckets), its independence of process and
chunking, tensor digests, and the fingerprint table of a checkpoint in both weight formats."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
import torch
from helpers.checkpoints import save_pickle_copy
from tiny import tiny_model

from headtrace.core import tables
from headtrace.models import fingerprint as fp
from headtrace.models import provenance, weights

M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """The reference mixer, in Python integers (an independent implementation of the module's)."""
    z = x & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def reference_projection(name: str, numel: int, seed: int = fp.SEED) -> tuple[np.ndarray, np.ndarray]:
    key = int.from_bytes(hashlib.sha256(f"{seed}/{name}/{numel}".encode()).digest()[:8], "little")
    z = [splitmix64(key + i * 0x9E3779B97F4A7C15) for i in range(numel)]
    return np.array([v & 63 for v in z]), np.array([-1.0 if v >> 6 & 1 else 1.0 for v in z])


def test_sketch_known_answer_matches_the_documented_projection():
    """One-hot vectors land at +-1 in bucket h(i); a random vector is the signed bucket sums."""
    n = 300
    h, s = reference_projection("layer.w", n)
    for i in (0, 1, 77, n - 1):
        e = np.zeros(n)
        e[i] = 1.0
        want = np.zeros(fp.SKETCH_DIM)
        want[h[i]] = s[i]
        np.testing.assert_array_equal(fp.sketch(e, "layer.w"), want)
    x = np.random.default_rng(0).normal(size=n)
    want = np.zeros(fp.SKETCH_DIM)
    np.add.at(want, h, s * x)
    np.testing.assert_allclose(fp.sketch(x, "layer.w"), want, rtol=1e-12, atol=1e-12)
    assert len(set(h)) > 50 and 0.35 < (s > 0).mean() < 0.65  # buckets and signs are spread


def test_identical_tensors_identical_sketch_and_linear():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 50)), rng.normal(size=(40, 50))
    np.testing.assert_array_equal(fp.sketch(a, "w"), fp.sketch(a.copy(), "w"))
    np.testing.assert_array_equal(fp.sketch(torch.from_numpy(a), "w"), fp.sketch(a, "w"))
    np.testing.assert_allclose(fp.sketch(a, "w") - fp.sketch(b, "w"), fp.sketch(a - b, "w"), atol=1e-10)
    assert not np.allclose(fp.sketch(a, "w"), fp.sketch(a, "v"))  # the name picks the projection
    padded = np.append(a.reshape(-1), 0.0)  # same values, one more element: another projection
    assert not np.allclose(fp.sketch(a, "w"), fp.sketch(padded, "w"))


def test_sketch_does_not_depend_on_chunking_or_dtype_path(monkeypatch):
    t = torch.randn(3, 1000).to(torch.bfloat16)
    whole = fp.sketch(t, "x")
    monkeypatch.setattr(fp, "CHUNK", 97)
    np.testing.assert_allclose(fp.sketch(t, "x"), whole, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fp.sketch(t.float().numpy(), "x"), whole, rtol=1e-12, atol=1e-12)
    assert fp._norm(t) == pytest.approx(float(torch.linalg.norm(t.double())), rel=1e-12)


def test_same_name_and_size_same_projection_in_another_process():
    code = ("import numpy as np; from headtrace.models import fingerprint as fp; "
            "print(repr(fp.sketch(np.arange(1000.0) % 7 - 3, 'gpt_neox.layers.3.mlp').tolist()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    theirs = np.array(eval(out))  # a list of floats printed by repr
    np.testing.assert_array_equal(theirs, fp.sketch(np.arange(1000.0) % 7 - 3, "gpt_neox.layers.3.mlp"))


def test_estimator_unbiased_with_the_documented_spread():
    """Over 600 projections (seeds), ||S(a) - S(b)||^2 / ||a - b||^2 averages 1 and its standard
    deviation is sqrt(2/k (1 - ||v||_4^4 / ||v||_2^4)) (the module docstring's bound, ~0.177)."""
    rng = np.random.default_rng(7)
    a = rng.normal(size=2000)
    b = a + rng.normal(scale=0.1, size=2000)
    v = a - b
    ratios = np.array([np.sum((fp.sketch(a, "w", seed=s) - fp.sketch(b, "w", seed=s)) ** 2) / (v @ v)
                       for s in range(600)])
    sd = np.sqrt(2 / fp.SKETCH_DIM * (1 - np.sum(v ** 4) / (v @ v) ** 2))
    assert abs(ratios.mean() - 1) < 4 * sd / np.sqrt(len(ratios))
    assert 0.8 * sd < ratios.std() < 1.2 * sd


def test_tensor_digest_covers_dtype_shape_and_bytes():
    t = torch.arange(12, dtype=torch.float32)
    assert fp.tensor_digest(t) == fp.tensor_digest(t.clone())
    assert fp.tensor_digest(t) != fp.tensor_digest(t.reshape(3, 4))
    assert fp.tensor_digest(t) != fp.tensor_digest(t.to(torch.int32).view(torch.float32))  # other bytes
    assert fp.tensor_digest(t.view(torch.int32)) != fp.tensor_digest(t)  # same bytes, other dtype
    assert fp.tensor_digest(t) == fp.tensor_digest(t.numpy())
    want = hashlib.sha256(b"float32 [12]\n" + t.numpy().tobytes()).hexdigest()
    assert fp.tensor_digest(t) == want
    assert fp.tensor_digest(torch.arange(24.0).reshape(4, 6)[:, ::2]) == fp.tensor_digest(
        torch.arange(24.0).reshape(4, 6)[:, ::2].contiguous())


@pytest.fixture(scope="module")
def two_formats(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp")
    m = tiny_model("gpt2", seed=3)  # tied embeddings: the pickle stores lm_head.weight, safetensors not
    m.save_pretrained(root / "st")
    save_pickle_copy(root / "st", root / "pk", shards=2)
    return root


def test_fingerprint_table_in_both_formats(two_formats):
    root = two_formats
    out = {}
    for fmt_dir in ("st", "pk"):
        fmt, files = weights.weight_files(root / fmt_dir)
        df = tables.conform(fp.fingerprint_rows(files, "m", fmt_dir, fmt), "fingerprint")
        out[fmt_dir] = df
        rows = df.filter(pl.col("kind") == "file")
        assert rows["name"].to_list() == [f.name for f in files]
        assert rows["sha256"].to_list() == [provenance.sha256_file(f) for f in files]
        assert rows.select("dtype", "shape", "numel", "norm", "sketch").null_count().row(0) == (len(files),) * 5
        assert set(df["format"]) == {fmt}
    st, pk = (out[k].filter(pl.col("kind") == "tensor").sort("name") for k in ("st", "pk"))
    assert set(st["name"]) <= set(pk["name"])  # the pickle copy holds every stored tensor
    joined = st.join(pk, on="name", suffix="_pk")
    assert joined.height == st.height
    for col in ("sha256", "dtype", "shape", "numel", "norm", "sketch"):
        assert joined[col].to_list() == joined[f"{col}_pk"].to_list(), col
    from safetensors.torch import load_file
    sd = load_file(next((root / "st").glob("*.safetensors")))
    row = st.filter(pl.col("name") == "transformer.h.0.attn.c_attn.weight").row(0, named=True)
    t = sd["transformer.h.0.attn.c_attn.weight"]
    assert row["shape"] == list(t.shape) and row["numel"] == t.numel() and row["dtype"] == "float32"
    assert row["norm"] == pytest.approx(float(t.double().norm()), rel=1e-12)
    np.testing.assert_array_equal(row["sketch"], fp.sketch(t, "transformer.h.0.attn.c_attn.weight"))


def test_fingerprint_refuses_a_payload_pickle(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"w": torch.zeros(2), "e": Evil()}, tmp_path / weights.PICKLE_SINGLE)
    with pytest.raises(weights.CheckpointError, match="builtins.print"):
        fp.fingerprint_rows([tmp_path / weights.PICKLE_SINGLE], "m", "r")
