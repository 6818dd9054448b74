"""Fingerprints of a checkpoint's weights: per file and per stored tensor.

The ``fingerprint`` table (``results/cells/{model}/{revision}/fingerprint.parquet``, schema
``fingerprint`` in :mod:`headtrace.core.tables`, written by the capture job) has one row per weight
file (``kind = "file"``: the sha256 of its bytes) and one per tensor as stored in those files
(``kind = "tensor"``): its dtype, shape, numel, a digest of its bytes (:func:`tensor_digest`), its L2
norm in float64 and a 64-number random-projection sketch (:func:`sketch`), so that the distance
between two revisions' weights can be estimated from their tables without loading either again.

The sketch
----------
A CountSketch ``S`` with ``k = SKETCH_DIM = 64`` buckets: element ``i`` of the flattened tensor (in
float64) is added, with sign ``s(i)`` in {+1, -1}, to bucket ``h(i)`` in [0, 64)::

    S(x)[b] = sum over i with h(i) = b of s(i) * x[i]

``h`` and ``s`` are bits of ``splitmix64(key + i * 0x9E3779B97F4A7C15)`` (bucket: the low 6 bits,
sign: bit 6, set meaning -1), where ``key`` is the first 8 bytes of sha256 of ``"{SEED}/{name}/{numel}"``. So the
projection depends only on the tensor's name, its size and the fixed seed ``SEED``: the same tensor
name and size use the same projection in every revision, process and machine, and the sketch is
linear, ``S(a) - S(b) = S(a - b)``.

The estimator. With ``s`` drawn independently of ``h`` and with zero mean, the cross terms of
``||S(v)||^2 = sum_b (sum_{h(i)=b} s(i) v[i])^2`` vanish in expectation, so::

    E ||S(a) - S(b)||^2 = ||a - b||^2

and, for fully random ``h`` and ``s``, ``Var ||S(v)||^2 = (2/k) (||v||_2^4 - ||v||_4^4)
<= (2/k) ||v||^4``. At ``k = 64`` the squared distance has a relative standard deviation of at most
``sqrt(2/64) = 0.18``, so the distance itself (its square root) is within about 9 % (one standard
deviation) of the true one for a single tensor; summing squared sketch distances over the ``n``
tensors of a model averages these errors (roughly ``0.18 / sqrt(n_eff)`` for the squared total,
where ``n_eff`` counts tensors of comparable contribution). The relative error is tested in
``tests/models/test_fingerprint.py`` (unbiasedness over many seeds, spread against ``sqrt(2/k)``).
``||a||`` is recorded exactly (``norm``), so relative distances ``||a - b|| / ||a||`` can be formed.

A GGUF file's tensors are fingerprinted as dequantized (float32, :func:`headtrace.models.gguf.tensors`):
digest, norm and sketch are of the values the model runs with, under the file's own tensor names;
``dtype`` names the stored quantization type (``Q4_1``, ``F32``, ...). Two GGUF revisions compare as
any two checkpoints do; a GGUF and a safetensors checkpoint of one model do not (other names).

Cost: one pass over each file for its sha256, one over each tensor's bytes for its digest, and the
sketch's hashing (about 10 vectorised integer operations per element, in chunks of ``CHUNK``
elements, so memory stays bounded for any tensor size). Measured against the capture pass in
``docs/performance.md`` (``benchmarks/fingerprint.py``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
from safetensors import safe_open

from headtrace.models import gguf, weights
from headtrace.models.provenance import sha256_file as file_sha256

__all__ = ["SKETCH_DIM", "SEED", "CHUNK", "sketch", "sketch_and_norm", "tensor_digest", "fingerprint_rows", "file_sha256"]

SKETCH_DIM = 64
SEED = 20240607  # fixed forever: changing it changes every sketch, and old tables stop comparing
CHUNK = 1 << 16  # elements per vectorised step (its uint64 hashes stay in cache)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = (np.uint64(n) for n in (30, 27, 31))
_MASK2 = np.uint64(2 * SKETCH_DIM - 1)


def sketch_and_norm(tensor, name: str, *, seed: int = SEED) -> tuple[np.ndarray, float]:
    """``(sketch, L2 norm in float64)`` in one pass over the tensor."""
    key = _key(name, _numel(tensor), seed)
    bins = np.zeros(2 * SKETCH_DIM, dtype=np.float64)
    sq = 0.0
    for start, x in _chunks(tensor):
        z = _hash(start, start + x.size, key)
        # bucket h = the low 6 bits, sign s = bit 6 (0: +1, 1: -1): one bincount over 128 bins
        z &= _MASK2
        bins += np.bincount(z.astype(np.intp), weights=x, minlength=2 * SKETCH_DIM)
        sq += float(np.square(x).sum())  # not np.dot: no BLAS threads in a one-thread job
    return bins[:SKETCH_DIM] - bins[SKETCH_DIM:], float(np.sqrt(sq))


def sketch(tensor, name: str, *, seed: int = SEED) -> np.ndarray:
    """The CountSketch (length ``SKETCH_DIM``, float64) of a tensor (torch or numpy, any real dtype),
    with the projection fixed by ``(name, numel, seed)`` (module docstring)."""
    return sketch_and_norm(tensor, name, seed=seed)[0]


def _norm(tensor) -> float:
    return float(np.sqrt(sum(float(np.square(x).sum()) for _, x in _chunks(tensor))))


def _dtype_name(tensor) -> str:
    if isinstance(tensor, np.ndarray):
        return str(tensor.dtype)
    return str(tensor.dtype).removeprefix("torch.")


def _raw_bytes(tensor) -> memoryview:
    """The tensor's values as little-endian bytes in row-major order (its storage bytes for a
    contiguous tensor, as safetensors stores them)."""
    if isinstance(tensor, np.ndarray):
        return memoryview(np.ascontiguousarray(tensor).reshape(-1).view(np.uint8))
    import torch  # a torch tensor was passed, so torch is already imported

    t = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(t.view(torch.uint8).numpy())


def tensor_digest(tensor) -> str:
    """sha256 of ``"{dtype} {shape}\\n"`` followed by the tensor's bytes (row-major, little-endian):
    the same values in another dtype or shape give another digest; the same stored tensor gives the
    same digest whether it was read from safetensors or a pickle."""
    shape = list(tensor.shape)
    h = hashlib.sha256(f"{_dtype_name(tensor)} {shape}\n".encode())
    h.update(_raw_bytes(tensor))
    return h.hexdigest()


def _tensors(path: Path, fmt: str):
    """``(key, tensor)`` for every tensor stored in one weight file, in the file's order, as stored
    (dtype and shape untouched). Safetensors: ``safe_open`` (memory-mapped, one tensor at a time);
    pickle: :func:`headtrace.models.weights.load_pickle` (checked, then ``weights_only``, mmap)."""
    if fmt == weights.SAFETENSORS:
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                yield key, f.get_tensor(key)
    elif fmt == weights.GGUF:  # the dequantized values (float32), one tensor at a time
        for key, values, _stored in gguf.tensors(path):
            yield key, values
    else:
        yield from weights.load_pickle(path).items()


FILE_COLUMNS = ["model", "revision", "kind", "name", "file", "format", "sha256", "dtype", "shape",
                "numel", "norm", "sketch"]


def fingerprint_rows(files: list[Path], model: str, revision: str, fmt: str | None = None,
                     file_hashes: dict[str, str] | None = None) -> pl.DataFrame:
    """The ``fingerprint`` table of one checkpoint: a file row per weight file (in the order given),
    then a tensor row per stored tensor of each file (in the file's order). ``fmt`` (``"safetensors"`` or
    ``"pickle"``) defaults to the files' suffix; ``file_hashes`` (file name -> sha256) reuses file hashes
    already computed (e.g. by :mod:`headtrace.models.provenance`)."""
    files = [Path(f) for f in files]
    if fmt is None:
        fmt = (weights.SAFETENSORS if all(f.suffix == ".safetensors" for f in files)
               else weights.GGUF if all(f.suffix == gguf.SUFFIX for f in files) else weights.PICKLE)
    stored = {}  # a GGUF tensor's stored (quantization) type: its rows' dtype
    for f in files if fmt == weights.GGUF else ():
        stored.update(gguf.read(f).tensor_types)
    file_hashes = dict(file_hashes or {})
    rows: dict[str, list] = {c: [] for c in FILE_COLUMNS}

    def add(**kw):
        for c in FILE_COLUMNS:
            rows[c].append(kw.get(c))

    for f in files:
        digest = file_hashes.get(f.name) or file_sha256(f)
        add(model=model, revision=revision, kind="file", name=f.name, file=f.name, format=fmt, sha256=digest)
    for f in files:
        for key, t in _tensors(f, fmt):
            sk, norm = sketch_and_norm(t, key)
            add(model=model, revision=revision, kind="tensor", name=key, file=f.name, format=fmt,
                sha256=tensor_digest(t), dtype=stored.get(key) or _dtype_name(t), shape=[int(s) for s in t.shape],
                numel=_numel(t), norm=norm, sketch=sk.tolist())
    return pl.DataFrame(rows, schema={
        "model": pl.String, "revision": pl.String, "kind": pl.String, "name": pl.String, "file": pl.String,
        "format": pl.String, "sha256": pl.String, "dtype": pl.String, "shape": pl.List(pl.Int64),
        "numel": pl.Int64, "norm": pl.Float64, "sketch": pl.List(pl.Float64)})


def _key(name: str, numel: int, seed: int) -> np.uint64:
    digest = hashlib.sha256(f"{seed}/{name}/{numel}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


def _hash(start: int, stop: int, key: np.uint64) -> np.ndarray:
    """splitmix64 of ``key + i * GOLDEN`` for i in [start, stop) (uint64, wrapping)."""
    z = np.arange(start, stop, dtype=np.uint64)
    z *= _GOLDEN
    z += key
    z ^= z >> _S30
    z *= _C1
    z ^= z >> _S27
    z *= _C2
    z ^= z >> _S31
    return z


def _numpy_source(tensor):
    """``(flat array, to_float64)``: a flat numpy view of the tensor's values as stored (no copy for a
    contiguous CPU tensor) and a function turning a slice of it into float64. bfloat16, which numpy
    lacks, is read as its 16 bit patterns and widened exactly (bf16 is the top half of a float32)."""
    if isinstance(tensor, np.ndarray):
        flat = np.ascontiguousarray(tensor).reshape(-1)
        if flat.dtype.kind == "c":
            raise TypeError("complex tensors have no sketch")
        return flat, lambda a: a.astype(np.float64)
    import torch  # a torch tensor was passed, so torch is already imported

    t = tensor.detach().to("cpu").contiguous().reshape(-1)
    if t.is_complex():
        raise TypeError("complex tensors have no sketch")
    if t.dtype == torch.bfloat16:
        bits = t.view(torch.int16).numpy().view(np.uint16)
        return bits, lambda a: (a.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    try:
        return t.numpy(), lambda a: a.astype(np.float64)
    except TypeError:  # float8 and other dtypes numpy lacks: widen through torch, slice by slice
        return t, lambda a: a.to(torch.float64).numpy()


def _numel(tensor) -> int:
    return int(tensor.size) if isinstance(tensor, np.ndarray) else int(tensor.numel())


def _chunks(tensor):
    """``(start, float64 chunk)`` over the flattened tensor, ``CHUNK`` elements at a time."""
    flat, widen = _numpy_source(tensor)
    n = _numel(tensor)
    for start in range(0, n, CHUNK):
        yield start, widen(flat[start:start + CHUNK])
