"""Small GGUF files written with the ``gguf`` package's writer, for the GGUF unit tests
(tests/test_gguf_units.py, tests/test_dequantize_units.py): the header keys and tensors a test names,
no model and no tokenizer unless asked, so every expected value is what was written."""
from __future__ import annotations

from pathlib import Path

import gguf as gguf_format
import numpy as np
from gguf import quants

Q = gguf_format.GGMLQuantizationType


def write(path: Path, arch: str = "llama", tensors=(), **keys) -> Path:
    """A GGUF file at ``path``: ``keys`` are GGUFWriter ``add_*`` calls (``context_length=128`` calls
    ``add_context_length(128)``; a tuple value is ``(method, key, value)`` for a raw typed key), ``tensors``
    ``(name, float32 array, stored type)`` triples (a quantized type is quantized with the ``gguf`` package)."""
    w = gguf_format.GGUFWriter(str(path), arch)
    for name, value in keys.items():
        if isinstance(value, tuple):
            getattr(w, value[0])(value[1], value[2])
        else:
            getattr(w, f"add_{name}")(value)
    for name, values, kind in tensors:
        if kind in ("F32", "F16"):
            w.add_tensor(name, values.astype(np.float32 if kind == "F32" else np.float16))
        elif kind in ("Q8_1", "Q8_K"):  # llama.cpp's activation types: bytes only, no dequantizer exists
            block, size = gguf_format.GGML_QUANT_SIZES[Q[kind]]
            w.add_tensor(name, np.zeros((values.shape[0], values.shape[1] // block * size), np.uint8), raw_dtype=Q[kind])
        else:
            w.add_tensor(name, quants.quantize(values, Q[kind]), raw_dtype=Q[kind])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# Exact in Q8_0: every block of 32 holds q / 16 with max |q| = 127, so its scale is 1/16 (exact in f16)
# and each weight is q * 1/16 again.
EXACT = (np.arange(128, dtype=np.float32).reshape(4, 32) % 255 - 127) / 16
EXACT[:, 0] = -127 / 16


def llama(path: Path, **extra) -> Path:
    keys = dict(context_length=128, embedding_length=32, block_count=2, head_count=4, head_count_kv=2,
                vocab_size=300, bos_token_id=1)
    return write(path, tensors=[("token_embd.weight", EXACT, "Q8_0"),
                                ("output_norm.weight", np.ones(32, np.float32), "F32")], **{**keys, **extra})


def byte_tokens() -> list[str]:
    """GPT-2's byte-level alphabet: the 256 characters its BPE writes the bytes 0-255 as."""
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = dict(zip(shown, shown)), 0
    for b in range(256):
        if b not in chars:
            chars[b], extra = 256 + extra, extra + 1
    return [chr(chars[b]) for b in range(256)]


def tiny_llama(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """A one-layer llama (d 32, 2 heads, ff 64) with a byte-level BPE of 258 tokens (two merges) as an F32
    GGUF that transformers reads; returns the tensors written, by GGUF name (no output.weight: tied)."""
    rng = np.random.default_rng(seed)
    v, d, ff = 258, 32, 64

    def r(*shape):
        return (rng.normal(size=shape) / 8).astype(np.float32)

    tensors = {"token_embd.weight": r(v, d), "blk.0.attn_norm.weight": np.ones(d, np.float32),
               "blk.0.attn_q.weight": r(d, d), "blk.0.attn_k.weight": r(d, d), "blk.0.attn_v.weight": r(d, d),
               "blk.0.attn_output.weight": r(d, d), "blk.0.ffn_norm.weight": np.ones(d, np.float32),
               "blk.0.ffn_gate.weight": r(ff, d), "blk.0.ffn_up.weight": r(ff, d), "blk.0.ffn_down.weight": r(d, ff),
               "output_norm.weight": np.full(d, 0.5, np.float32)}
    write(path, tensors=[(n, t, "F32") for n, t in tensors.items()], context_length=64, embedding_length=d,
          block_count=1, feed_forward_length=ff, head_count=2, head_count_kv=2, layer_norm_rms_eps=1e-5,
          rope_dimension_count=16, vocab_size=v, tokenizer_model="gpt2", tokenizer_pre="default",
          token_list=byte_tokens() + ["Ġt", "he"], token_types=[1] * v, token_merges=["Ġ t", "h e"],
          bos_token_id=1, eos_token_id=2)
    return tensors
