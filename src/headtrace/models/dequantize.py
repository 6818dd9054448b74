"""A GGUF checkpoint read once through transformers' GGUF support, then kept as a safetensors folder.

transformers reads a GGUF file (``from_pretrained(folder, gguf_file=name)``) by dequantizing every
tensor and converting its tokenizer, which costs far more than the forward passes of a small cell
(SmolLM2-135M: ~15 s on one CPU core against ~1 s for the same weights from safetensors). So the
first job that loads a GGUF file writes what transformers made of it -- ``config.json``
(without the GGUF ``quantization_config``), ``model.safetensors`` (float32) and the tokenizer files --
to ``{cache}/{sha256 of the GGUF}/``, with ``headtrace-gguf.json`` (the file, its sha256, its
quantization types, the transformers and gguf versions), and every later load reads that folder
like any local safetensors checkpoint (loading report checked). The folder is written under a
temporary name and renamed, so an interrupted job leaves none half-written; two jobs racing keep
the first. ``cache`` is ``$HEADTRACE_GGUF_CACHE`` or ``resources/gguf-cache`` (git-ignored); each
cell's provenance row names the folder it ran.
"""
from __future__ import annotations

import json
import os
from importlib.metadata import PackageNotFoundError, version
import shutil
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file

from headtrace.models import families, gguf
from headtrace.models.weights import CheckpointError, sha256_file

__all__ = ["MANIFEST", "dequantized"]

MANIFEST = "headtrace-gguf.json"


def dequantized(file: str | Path, what: str, root: str | Path | None = None, sha256: str | None = None) -> Path:
    """The safetensors folder of the GGUF ``file`` (module docstring), written on first use. ``what``
    names the model and revision in errors; the refusals of :func:`headtrace.models.gguf.check` come
    first, then transformers' own errors as :class:`CheckpointError`."""
    file = Path(file)
    head = gguf.check(file, what)
    digest = sha256 or sha256_file(file)
    dest = gguf.cached_folder(digest, root)
    if (dest / MANIFEST).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=dest.parent))
    try:
        _convert(file, head, tmp, what)
        (tmp / MANIFEST).write_text(json.dumps({
            "gguf_file": str(file.resolve()), "gguf_sha256": digest, "architecture": head.architecture,
            "quantization": list(head.quantization), "dtype": "float32",
            "transformers": transformers.__version__, "gguf": _gguf_version(),
        }, indent=1) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the copy is read like any checkpoint folder
        try:
            os.rename(tmp, dest)
        except OSError:  # another job wrote it first: keep theirs
            if not (dest / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _convert(file: Path, head: gguf.Header, out: Path, what: str) -> None:
    folder, kwargs = str(file.parent), {"gguf_file": file.name}
    try:
        fam = families.from_model_type(head.model_type)
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{what}: {file.name} is a '{head.model_type}' model, which no headtrace family "
                              f"adapter reads ({e})") from e
    cls = getattr(transformers, fam.model_class)
    try:
        model = cls.from_pretrained(folder, dtype=torch.float32, trust_remote_code=False, local_files_only=True,
                                    **kwargs)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=False, **kwargs)
    except (OSError, ValueError, RuntimeError, NotImplementedError, KeyError) as e:
        raise CheckpointError(f"{what}: transformers cannot read {file}: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from e
    # the copy is plain float32 weights: no GGUF quantization config, which would send the next load
    # back to the GGUF loader (transformers' save_pretrained refuses a model loaded from GGUF, so the
    # config and the tensors are written here; a tensor tied to an earlier one -- the output
    # embedding of a tied model -- is written once, as save_pretrained does)
    model.config.__dict__.pop("quantization_config", None)
    model.config.save_pretrained(out)
    seen, state = set(), {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        state[name] = tensor.detach().contiguous()
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(out)


def _gguf_version() -> str | None:
    try:
        return version("gguf")
    except PackageNotFoundError:
        return None
