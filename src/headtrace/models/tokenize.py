"""The text probe's tokenizer and sequences (docs/measures.md).

The text probe is tokenised with the checkpoint's own tokenizer (the files its revision holds, read with
``transformers.AutoTokenizer``), or with ``text_probe.tokenizer``: a tokenizer folder, or ``bytes``, the
byte-level tokenizer of the toy models (token id = UTF-8 byte value; the toys were trained on bytes and
ship no tokenizer files). BOS is what the tokenizer adds itself: the special tokens it puts before a text
are put before every sequence. The sequences are the first window of each document (Gu et al. 2025), or
every consecutive window (``text_probe.windows``), the documents visited in a seeded pseudo-random order.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from headtrace.core import tables
from headtrace.models import gguf
from headtrace.probe import texts

BYTES = "bytes"
WINDOWS = ("start", "consecutive")  # text_probe.windows: each document's first window, or every window
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


class Windows(NamedTuple):
    """The text probe's sequences and where each came from (:func:`text_sequences`)."""

    tokens: np.ndarray  # (n, seq_len) int64, each led by the tokenizer's prefix
    document: np.ndarray  # (n,) the index of its document among those read (file order)
    offset: np.ndarray  # (n,) the token where its window starts in its document (0: the document's start)
    n_short: int  # documents visited that were shorter than one window (none of their tokens used)


def text_sequences(documents: list[str], tokenizer, seq_len: int, n_sequences: int, windows: str = "start",
                   seed: int | None = 0, source: str = "the text") -> Windows:
    """The ``n_sequences`` sequences of ``seq_len`` tokens of the text probe. A window is
    ``seq_len - len(prefix)`` tokens of a document (tokenised without special tokens) led by the
    tokenizer's own prefix (its BOS, or nothing). ``windows``: ``start`` takes each document's first window
    (Gu et al. 2025: the first tokens of each sample), ``consecutive`` every consecutive window of a
    document (all but its first start mid-document). The documents are visited in a seeded pseudo-random
    order (:func:`visit_order`; ``seed`` None: file order) until ``n_sequences`` windows are taken (the
    last document's windows in order), so two tokenizers visit the same documents; a document shorter
    than one window gives none and is counted. The sequences are returned in file order. Fewer than
    ``n_sequences`` windows in all the documents is an error naming ``source`` and the counts."""
    if windows not in WINDOWS:
        raise ValueError(f"text_probe.windows: '{windows}' is not one of {', '.join(WINDOWS)}")
    prefix = _prefix(tokenizer)
    body = seq_len - len(prefix)
    if body < 1:
        raise ValueError(f"text_probe.seq_len {seq_len} leaves no room after the tokenizer's prefix {prefix}")
    order = visit_order(documents, seed)
    rows: list[tuple[int, int, list[int]]] = []  # (document, offset, body tokens)
    n_short = 0
    for d in order:
        ids = list(tokenizer(documents[d], add_special_tokens=False)["input_ids"])
        n_windows = len(ids) // body
        n_short += n_windows == 0
        for w in range(min(n_windows, 1) if windows == "start" else n_windows):
            rows.append((int(d), w * body, ids[w * body:(w + 1) * body]))
            if len(rows) == n_sequences:
                break
        if len(rows) == n_sequences:
            break
    if len(rows) < n_sequences:
        raise ValueError(
            f"text_probe: {source} gives {len(rows)} windows of {body} tokens ({windows}: "
            f"{'one per document' if windows == 'start' else 'every consecutive window'}), fewer than "
            f"text_probe.n_sequences {n_sequences}: {len(documents)} documents, {n_short} of them shorter than "
            "one window (text_probe.seq_len less the tokenizer's prefix); split the text finer "
            "(text_probe.split), lower text_probe.n_sequences or text_probe.seq_len, or give more text")
    rows.sort(key=lambda r: r[:2])
    return Windows(np.asarray([prefix + ids for _, _, ids in rows], np.int64).reshape(n_sequences, seq_len),
                   np.asarray([d for d, _, _ in rows], np.int64), np.asarray([o for _, o, _ in rows], np.int64),
                   int(n_short))


def visit_order(documents: list[str], seed: int | None) -> list[int]:
    """The order the text probe visits ``documents`` in: by the SHA-256 of ``seed`` and each document's
    text (ties, identical documents, in file order), so a document's place depends on no other document
    (editing or adding one moves none of the others); ``seed`` None: file order."""
    if seed is None:
        return list(range(len(documents)))
    key = [hashlib.sha256(f"{seed}\0{doc}".encode("utf-8")).digest() for doc in documents]
    return sorted(range(len(documents)), key=lambda d: (key[d], d))


# ---- the text probe table (results/probes/{model}/text_batch.parquet) ------------------------------

def build(settings: dict, tokenizer_spec: str | None, folder: str | Path | None, what: str,
          model: str = "model") -> pl.DataFrame:
    """The text probe of ``settings`` (the ``text_probe`` block) for ``model`` with the tokenizer of
    ``tokenizer_spec`` / the checkpoint ``folder`` (:func:`load`; ``what`` names the revision in errors),
    as a table (schema ``text_probe``): per sequence its tokens, its document, where in it the window
    starts and its first token as text (``key0``); per table the file pattern, the split, how the windows
    were taken, the documents read, those too short, those the sequences came from, the tokenizer and the
    special tokens it puts before a text (``n_prefix``: 1 for a BOS, 0 when key 0 is the text's own)."""
    tok = load(tokenizer_spec, folder, what)
    docs = texts.read_documents(settings["file"], settings["column"], settings["split"])
    source = f"'{settings['file']}' (split: {settings['split']})"
    w = text_sequences(docs, tok, settings["seq_len"], settings["n_sequences"], settings["windows"],
                       settings["seed"], source)
    name = BYTES if isinstance(tok, ByteTokenizer) else str(tokenizer_spec or folder)
    n = w.tokens.shape[0]
    key0 = [token_text(tok, int(t)) for t in w.tokens[:, 0]]
    return tables.conform(pl.DataFrame({
        "model": [model] * n, "seq": np.arange(n, dtype=np.int32), "tokens": w.tokens.tolist(),
        "document": w.document.astype(np.int32), "offset": w.offset.astype(np.int32),
        "file": [str(settings["file"])] * n, "split": [settings["split"]] * n,
        "windows": [settings["windows"]] * n, "seed": pl.Series([settings["seed"]] * n, dtype=pl.Int64),
        "n_documents_read": np.full(n, len(docs), np.int32), "n_short": np.full(n, w.n_short, np.int32),
        "n_documents": np.full(n, len(set(w.document.tolist())), np.int32),
        "tokenizer": [name] * n, "tokenizer_sha256": [fingerprint(tok)] * n,
        "n_prefix": np.full(n, len(_prefix(tok)), np.int32), "key0": key0}), "text_probe")


def token_text(tokenizer, token: int) -> str:
    """One token id as the text it stands for: a byte as its character (U+FFFD for a byte that is no
    character alone), a tokenizer's token decoded (a special token, BOS, as its name)."""
    if isinstance(tokenizer, ByteTokenizer):
        return bytes([token]).decode("utf-8", errors="replace")
    return tokenizer.decode([token])


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
