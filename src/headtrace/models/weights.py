"""Which weight files a checkpoint folder holds, and reading pickle weights without running them.

A revision's weights are ``*.safetensors`` files (read as raw bytes, nothing executed) or, for a
revision that has none, PyTorch pickles: ``pytorch_model.bin``, or shards
``pytorch_model-0000k-of-0000n.bin`` listed by ``pytorch_model.bin.index.json``. Safetensors win
whenever a folder has both (:func:`weight_files`).

A pickle can name any Python callable and have the unpickler call it, so a pickle is never opened
by a full unpickler here. :func:`check_pickle` first reads the pickle's opcodes statically (the
stdlib's ``pickletools``: nothing is imported, constructed or called) and refuses, by name, every
global that is not a tensor-rebuild function, a storage or dtype, ``torch.Size``/``torch.device``
or a plain container (:data:`ALLOWED_GLOBALS`, :func:`allowed_global`); only then does
:func:`load_pickle` read it with ``torch.load(weights_only=True)``, torch's restricted unpickler,
whose own refusals are also turned into a :class:`CheckpointError` naming the file and the global.
``weights_only=True`` is passed explicitly, so ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it
off (torch >= 2.4 honours that variable only where the caller did not pass ``weights_only``).

Nothing here imports torch at module level: :mod:`headtrace.models.provenance` lists weight files
for the summary, which reads provenance tables without torch.
"""
from __future__ import annotations

import _compat_pickle
import io
import json
import pickle
import pickletools
import re
import zipfile
from pathlib import Path

__all__ = [
    "CheckpointError", "SAFETENSORS", "PICKLE", "PICKLE_INDEX", "weight_files", "weights_format",
    "allowed_global", "pickle_globals", "check_pickle", "load_pickle",
]

SAFETENSORS = "safetensors"
PICKLE = "pickle"
GGUF = "gguf"  # one quantized file (headtrace.models.gguf), read through transformers' GGUF support
PICKLE_SINGLE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"
MIN_TORCH = (2, 6)  # weights_only before 2.6 could be bypassed (CVE-2025-32434); transformers requires it too
_SHARD = re.compile(r"^pytorch_model-\d+-of-\d+\.bin$")


class CheckpointError(RuntimeError):
    """A checkpoint (model, revision) that cannot be fetched or loaded, or that is refused."""


def _pickle_files(folder: Path) -> list[Path]:
    index = folder / PICKLE_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{index}: not a readable shard index ({type(e).__name__}: {e})") from e
        names = sorted(set(weight_map.values()))
        bad = [n for n in names if not _SHARD.match(n) and n != PICKLE_SINGLE]
        if bad:
            raise CheckpointError(f"{index}: names shard files headtrace does not load: {bad[:3]} "
                                  "(expected pytorch_model-0000k-of-0000n.bin)")
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise CheckpointError(f"{index}: lists shard files missing from {folder}: {missing[:3]}")
        return [folder / n for n in names]
    if (folder / PICKLE_SINGLE).is_file():
        return [folder / PICKLE_SINGLE]
    shards = sorted(p for p in folder.glob("pytorch_model-*.bin") if _SHARD.match(p.name))
    if shards:
        raise CheckpointError(f"{folder}: sharded pickle weights ({shards[0].name}, ...) without "
                              f"{PICKLE_INDEX}; headtrace loads shards only through their index")
    return []


def weight_files(folder: str | Path) -> tuple[str, list[Path]]:
    """``(format, files)`` of the weights in a checkpoint folder: every ``*.safetensors`` file
    (format ``"safetensors"``) if there is one, else ``pytorch_model.bin`` or the shards its
    ``pytorch_model.bin.index.json`` lists (format ``"pickle"``). Files sorted by name; symlinks (as in
    the Hugging Face cache) are kept as paths. Raises :class:`CheckpointError` when there is neither.
    Other pickle names (``*.pt``, ``*.pth``, ``training_args.bin``) are never weights here.
    A ``.gguf`` file, or a folder without ``config.json`` holding exactly one, is format ``"gguf"``
    (:func:`headtrace.models.gguf.locate`, which also refuses a folder holding several)."""
    folder = Path(folder)
    if folder.suffix == ".gguf" and folder.is_file():
        return GGUF, [folder]
    st = sorted(folder.glob("*.safetensors"))
    if st:
        return SAFETENSORS, st
    pk = _pickle_files(folder)
    if pk:
        return PICKLE, pk
    gg = sorted(folder.glob("*.gguf")) if not (folder / "config.json").is_file() else []
    if len(gg) == 1:
        return GGUF, gg
    other = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth")) \
        if folder.is_dir() else []
    raise CheckpointError(
        f"no weights in {folder}: neither *.safetensors nor {PICKLE_SINGLE} (or shards with "
        f"{PICKLE_INDEX})" + (f"; found {', '.join(other[:3])}, which headtrace does not load as weights"
                              if other else ""))


def weights_format(folder: str | Path) -> str:
    return weight_files(folder)[0]


# ---- the pickle policy -------------------------------------------------------------------------
# Globals a state-dict pickle may name: tensor rebuild functions, storages, dtypes and a few plain
# containers. Everything else (os.system, builtins.eval, any class with __reduce__, numpy arrays,
# tensor subclasses, ...) is refused by name before torch.load runs.
ALLOWED_GLOBALS = frozenset({
    "collections.OrderedDict",
    "torch.Size",
    "torch.device",
    "torch.nn.parameter.Parameter",
    "torch._tensor._rebuild_from_type_v2",  # a plain Tensor/Parameter; a subclass names its class too
    "torch.serialization._get_layout",
    "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
    "_codecs.encode",  # bytes in protocol 2
    "builtins.set", "builtins.frozenset", "builtins.bytearray", "builtins.complex",
})
_REBUILD = re.compile(r"^torch\._utils\._rebuild_(tensor|tensor_v2|tensor_v3|parameter|parameter_with_state|"
                      r"meta_tensor_no_storage|device_tensor_from_cpu_tensor)$")
_STORAGE = re.compile(r"^torch\.(cuda\.)?[A-Z][A-Za-z0-9]*Storage$")
_DTYPES = frozenset(
    f"torch.{n}" for n in (
        "float64 float32 float16 bfloat16 complex64 complex128 complex32 int64 int32 int16 int8 uint8 "
        "uint16 uint32 uint64 bool float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz "
        "float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32 quint4x2 quint2x4").split())


def allowed_global(name: str) -> bool:
    """Whether a pickle global ``module.qualname`` is one a weights pickle may name."""
    return name in ALLOWED_GLOBALS or name in _DTYPES or bool(_REBUILD.match(name) or _STORAGE.match(name))


_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING",
               "BINSTRING", "STRING"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}


def _name(module: str, qual: str) -> str:
    """``module.qual`` with Python 2's names mapped as the unpickler maps them (``__builtin__`` ->
    ``builtins``, ...; ``fix_imports`` of protocols < 3, as torch's weights_only reader does too)."""
    if (module, qual) in _compat_pickle.NAME_MAPPING:
        module, qual = _compat_pickle.NAME_MAPPING[(module, qual)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{qual}"


def _globals_in(stream) -> list[str]:
    """Every global a pickle stream names (``GLOBAL``/``INST`` arguments; ``STACK_GLOBAL`` from the
    two strings pushed before it, through the memo), read statically. A ``STACK_GLOBAL`` whose
    operands are not literal strings is reported as ``<dynamic global>`` (and so refused)."""
    found: list[str] = []
    memo: dict[int, str | None] = {}
    pushed: list[str | None] = []  # the value of each pushing opcode (None: not a string)
    for op, arg, _pos in pickletools.genops(stream):
        name = op.name
        if name in ("GLOBAL", "INST"):
            module, _, qual = str(arg).partition(" ")
            found.append(_name(module, qual))
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            mod, qual = (pushed[-2], pushed[-1]) if len(pushed) >= 2 else (None, None)
            found.append(_name(mod, qual) if mod is not None and qual is not None else "<dynamic global>")
            pushed.append(None)
        elif name in _STRING_OPS:
            pushed.append(arg.decode("latin-1") if isinstance(arg, bytes) else str(arg))
        elif name in _GET_OPS:
            pushed.append(memo.get(arg))
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in _PUT_OPS:
            memo[arg] = pushed[-1] if pushed else None
        elif name == "STOP":
            break
        else:
            pushed.append(None)
    return found


def pickle_globals(path: str | Path) -> list[str]:
    """The globals a ``torch.save`` file names, in order of appearance, read without unpickling:
    the ``data.pkl`` of the zip format, or the first four pickles of torch's legacy format (magic
    number, protocol, system info, the object; what follows are storage keys and raw bytes)."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
                if len(pkls) != 1:
                    raise CheckpointError(f"pickle weights {path}: expected one data.pkl in the archive, "
                                          f"found {len(pkls)}")
                return _globals_in(io.BytesIO(zf.read(pkls[0])))
        with open(path, "rb") as fh:
            found: list[str] = []
            for _ in range(4):
                if not fh.peek(1):  # fewer pickles: torch.load will fail; what was named is reported
                    break
                found += _globals_in(fh)
            return found
    except CheckpointError:
        raise
    except Exception as e:  # a malformed archive or opcode stream: refuse rather than guess
        raise CheckpointError(f"pickle weights {path}: not a readable torch.save file "
                              f"({type(e).__name__}: {e})") from e


def check_pickle(path: str | Path) -> None:
    """Refuse a pickle that names anything but tensors and plain containers: a
    :class:`CheckpointError` naming the file and the first refused globals. Runs nothing."""
    refused = list(dict.fromkeys(g for g in pickle_globals(path) if not allowed_global(g)))
    if refused:
        raise CheckpointError(
            f"pickle weights {path} refused: it asks for {', '.join(refused[:5])}"
            + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
            + ", not a tensor or plain container (docs/integrity.md); nothing was loaded or run")


def load_pickle(path: str | Path, map_location="cpu", mmap: bool = True) -> dict:
    """The state dict in a pickle weight file: :func:`check_pickle`, then
    ``torch.load(path, weights_only=True, map_location=..., mmap=...)``. Anything torch's restricted
    unpickler still refuses becomes a :class:`CheckpointError` naming the file and torch's reason."""
    import torch  # only where a pickle is read (see the module docstring)

    if tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2]) < MIN_TORCH:
        raise CheckpointError(f"pickle weights {path}: torch {torch.__version__} is too old to read pickles "
                              f"safely (weights_only needs torch >= {'.'.join(map(str, MIN_TORCH))}: "
                              "CVE-2025-32434); requirements.txt pins the version headtrace is tested with")
    check_pickle(path)
    mmap = mmap and zipfile.is_zipfile(path)  # the legacy format cannot be memory-mapped
    try:
        sd = torch.load(str(path), weights_only=True, map_location=map_location, mmap=mmap)
    except pickle.UnpicklingError as e:
        reason = next((ln.strip() for ln in str(e).splitlines() if "global" in ln.lower()),
                      str(e).splitlines()[0] if str(e) else type(e).__name__)
        raise CheckpointError(f"pickle weights {path} refused by torch's weights_only unpickler: {reason}") from e
    except (RuntimeError, OSError, EOFError) as e:
        raise CheckpointError(f"pickle weights {path}: cannot be read ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''})") from e
    if not isinstance(sd, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                           for k, v in sd.items()):
        raise CheckpointError(f"pickle weights {path}: not a state dict of named tensors "
                              f"(got {type(sd).__name__})")
    return sd
