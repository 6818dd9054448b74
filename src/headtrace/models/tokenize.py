"""The text probe's tokenizer and sequences (docs/measures.md).

The text probe is tokenised with the checkpoint's own tokenizer (the files its revision holds, read with
``transformers.AutoTokenizer``), or with ``text_probe.tokenizer``: a tokenizer folder, or ``bytes``, the
byte-level tokenizer of the toy models (token id = UTF-8 byte value; the toys were trained on bytes and
ship no tokenizer files). BOS is what the tokenizer adds itself: the special tokens it puts before a text
are put before every sequence.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl

from headtrace.core import tables, texts
from headtrace.models import gguf

BYTES = "bytes"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


class ByteTokenizer:
    """Token id = UTF-8 byte value; no special tokens (the toys train on bytes without a BOS)."""

    name = BYTES

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": list(text.encode("utf-8"))}


def has_tokenizer(folder: str | Path) -> bool:
    """Whether a checkpoint folder holds tokenizer files, or is a GGUF checkpoint (whose file holds its
    tokenizer: :func:`headtrace.models.gguf.tokenizer_source`)."""
    return any((Path(folder) / f).is_file() for f in TOKENIZER_FILES) or gguf.is_gguf(folder)


def load(spec: str | None, folder: str | Path | None, what: str):
    """The tokenizer of ``what`` (a model revision, for the message): ``spec`` ``bytes`` or a tokenizer
    folder, or (``spec`` None) the one in the checkpoint ``folder``; an error naming ``what`` and the folder
    when it has none."""
    if spec == BYTES:
        return ByteTokenizer()
    where = spec if spec is not None else folder
    if where is None or not has_tokenizer(where):
        raise ValueError(f"{what}: no tokenizer in {where} (none of {', '.join(TOKENIZER_FILES)}): the text probe "
                         "tokenises with the checkpoint's own tokenizer; set text_probe.tokenizer to a tokenizer "
                         "folder (or 'bytes' for a byte-level model)")
    from transformers import AutoTokenizer  # heavy, and only for a text probe

    if gguf.is_gguf(where):
        folder, kwargs = gguf.tokenizer_source(where)
        return AutoTokenizer.from_pretrained(folder, **kwargs)
    return AutoTokenizer.from_pretrained(str(where))


def fingerprint(tokenizer) -> str:
    """SHA-256 (hex) of what decides the token ids: ``bytes``, or the tokenizer's vocabulary, its
    special tokens and its class; two revisions with equal fingerprints tokenise alike."""
    if isinstance(tokenizer, ByteTokenizer):
        return hashlib.sha256(b"bytes").hexdigest()
    vocab = sorted(tokenizer.get_vocab().items())
    blob = repr((type(tokenizer).__name__, vocab, tokenizer.all_special_ids, _prefix(tokenizer)))
    return hashlib.sha256(blob.encode()).hexdigest()


def _prefix(tokenizer) -> list[int]:
    """The special tokens the tokenizer puts before a text (its BOS, or nothing)."""
    sample = "The text probe."
    full = list(tokenizer(sample)["input_ids"])
    plain = list(tokenizer(sample, add_special_tokens=False)["input_ids"])
    for i in range(len(full) - len(plain) + 1):
        if full[i:i + len(plain)] == plain:
            return full[:i]
    return []


def text_sequences(documents: list[str], tokenizer, seq_len: int, n_sequences: int) -> tuple[np.ndarray, int]:
    """``(tokens (n, seq_len) int64, n_documents used)``: each document tokenised without special tokens
    and cut into consecutive windows of ``seq_len - len(prefix)`` tokens, each window led by the
    tokenizer's own prefix (its BOS); documents in order, windows in order, the first ``n_sequences``. A
    document shorter than one window gives none. An error when no window comes out."""
    prefix = _prefix(tokenizer)
    body = seq_len - len(prefix)
    if body < 1:
        raise ValueError(f"text_probe.seq_len {seq_len} leaves no room after the tokenizer's prefix {prefix}")
    rows: list[list[int]] = []
    used = 0
    for doc in documents:
        ids = list(tokenizer(doc, add_special_tokens=False)["input_ids"])
        n_windows = len(ids) // body
        if n_windows:
            used += 1
        for w in range(n_windows):
            rows.append(prefix + ids[w * body:(w + 1) * body])
            if len(rows) == n_sequences:
                return np.asarray(rows, np.int64), used
    if not rows:
        raise ValueError(f"text_probe: no document has {body} tokens (text_probe.seq_len {seq_len} less the "
                         f"tokenizer's prefix): the text is too short")
    return np.asarray(rows, np.int64), used


# ---- the text probe table (results/probes/{model}/text_batch.parquet) ------------------------------

def build(settings: dict, tokenizer_spec: str | None, folder: str | Path | None, what: str) -> pl.DataFrame:
    """The text probe of ``settings`` (the ``text_probe`` block) with the tokenizer of ``tokenizer_spec`` /
    the checkpoint ``folder`` (:func:`load`; ``what`` names the revision in errors), as a table (schema
    ``text_probe``) recording the file pattern, the tokenizer and how many documents gave sequences."""
    tok = load(tokenizer_spec, folder, what)
    docs = texts.read_documents(settings["file"], settings["column"])
    ids, used = text_sequences(docs, tok, settings["seq_len"], settings["n_sequences"])
    name = BYTES if isinstance(tok, ByteTokenizer) else str(tokenizer_spec or folder)
    n = ids.shape[0]
    return tables.conform(pl.DataFrame({
        "seq": np.arange(n, dtype=np.int32), "tokens": ids.tolist(), "file": [str(settings["file"])] * n,
        "tokenizer": [name] * n, "tokenizer_sha256": [fingerprint(tok)] * n,
        "n_documents": np.full(n, used, np.int32)}), "text_probe")


def tokens_of(table: pl.DataFrame) -> np.ndarray:
    """``(n, T)`` token ids of a ``text_probe`` table."""
    return np.asarray(table.sort("seq")["tokens"].to_list(), dtype=np.int64)


def check_revision(table: pl.DataFrame, tokenizer_spec: str | None, folder: str | Path, what: str) -> None:
    """A revision tokenises like the probe was built (built once per tokenizer, not per revision): with
    the checkpoint's own tokenizer (``tokenizer_spec`` None), the revision must have one and its
    fingerprint must be the probe's; an error naming ``what`` otherwise."""
    if tokenizer_spec is not None:
        return
    mine = fingerprint(load(None, folder, what))
    built = table["tokenizer_sha256"][0]
    if mine != built:
        raise ValueError(f"{what}: its tokenizer ({folder}) differs from the one the text probe was built with "
                         f"({table['tokenizer'][0]}): a text probe is built once per tokenizer; give the revisions "
                         "with another tokenizer their own model entry, or set text_probe.tokenizer")
