"""The config check of a ``local`` model's GGUF revisions and of the package that ships them, before any
job (torch-free: :mod:`headtrace.models.gguf` reads the headers)."""
from __future__ import annotations

from headtrace.core.errors import ConfigError
from headtrace.models import gguf
from headtrace.models.layout import local_checkpoint_path


def check(spec: dict, where: str) -> None:
    """A local model's ``package`` is installed, and each revision that is a GGUF checkpoint passes
    :func:`headtrace.models.gguf.check` (readable, an architecture transformers maps, quantization types
    it can dequantize), before any job. A revision not there yet is left to the job (as for folders)."""
    if spec.get("package"):
        if spec["source"] != "local":
            raise ConfigError(f"{where}.package: only a local model reads its path inside a package")
        gguf.package_folder(spec["package"], where)
    if spec["source"] != "local":
        return
    for revision in spec["revisions"]:
        try:
            file = gguf.locate(local_checkpoint_path(spec, revision))
            if file is not None:
                gguf.check(file, f"{where} revision '{revision}'")
        except gguf.CheckpointError as e:
            raise ConfigError(str(e) if str(e).startswith(where) else f"{where} revision '{revision}': {e}") from None
