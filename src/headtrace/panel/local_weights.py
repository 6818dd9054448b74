"""Every ``local`` revision holds weights headtrace loads, checked when the DAG is built.

The config check already reads each local revision's ``config.json``; a folder without loadable
weights would otherwise pass it and fail in its capture job, behind the job's traceback and
Snakemake's report of the failed job, after the other cells started. Here the folder listing is
read (:func:`headtrace.models.weights.weight_files`: ``*.safetensors``, else ``pytorch_model.bin``
or the shards its index lists; nothing is opened but the index), every such revision named in one
``ConfigError`` before any job. A folder that is not there at all is warned about instead
(:func:`headtrace.panel.config.missing_local_revisions`): a live run may not have written it yet.
"""
from __future__ import annotations

from pathlib import Path

from headtrace.core.errors import ConfigError
from headtrace.models import weights
from headtrace.models.layout import local_checkpoint_path


def problems(config: dict) -> list[str]:
    """One line per local revision whose folder is there but holds no weights headtrace loads."""
    out = []
    for model, spec in (config.get("models") or {}).items():
        if spec.get("source") != "local" or "path" not in spec:
            continue
        for revision in spec.get("revisions") or []:
            folder = local_checkpoint_path(spec, revision)
            if not Path(folder).is_dir():
                continue
            try:
                weights.weight_files(folder)
            except weights.CheckpointError as err:
                out.append(f"models.{model} revision '{revision}': {err}")
    return out


def check(config: dict, shown: int = 6) -> None:
    """Raise one ``ConfigError`` naming every local revision without loadable weights, and what to do."""
    lines = problems(config)
    if not lines:
        return
    more = f"\n  … and {len(lines) - shown} more" if len(lines) > shown else ""
    raise ConfigError(
        f"{len(lines)} local revision(s) have no weights headtrace loads:\n  " + "\n  ".join(lines[:shown]) + more
        + "\nSave each checkpoint with its weights (save_pretrained writes model.safetensors), or leave the "
          "revision out of models.NAME.revisions; no job has started.")
