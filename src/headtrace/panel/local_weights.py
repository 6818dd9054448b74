"""Every ``local`` revision is a checkpoint headtrace reads, checked when the DAG is built.

A listed folder that is not there, a ``config.json`` that does not parse (cut short by a copy or a
full disk) or a folder without loadable weights would otherwise pass the config check and fail in
its capture job, behind the job's traceback and Snakemake's report of the failed job, after the
other cells started. Here each local revision's folder is looked up, its ``config.json`` parsed and
its listing read (:func:`headtrace.models.weights.weight_files`: ``*.safetensors``, else
``pytorch_model.bin`` or the shards its index lists; nothing is opened but the index), and every
such revision is named in one ``ConfigError`` before any job, in step order, a missing one with the
nearest folder name that is there. A live run whose checkpoints are still being written lists them
with ``revisions: {glob: ...}``, which takes the folders present when the DAG is built.
"""
from __future__ import annotations

import difflib
import glob
from pathlib import Path

from headtrace.core import revisions as revs
from headtrace.core.errors import ConfigError
from headtrace.models import gguf, weights
from headtrace.models.layout import local_checkpoint_path

MISSING, UNREADABLE, NO_WEIGHTS = "missing", "unreadable", "no weights"
FIXES = {
    MISSING: "name a folder that is there in models.NAME.revisions (or fix models.NAME.path), or leave the "
             "revision out",
    UNREADABLE: "copy or save the checkpoint again (save_pretrained writes config.json and model.safetensors), "
                "or leave the revision out",
    NO_WEIGHTS: "save each checkpoint with its weights (save_pretrained writes model.safetensors), or leave the "
                "revision out of models.NAME.revisions",
}


def problems(config: dict) -> list[tuple[str, str, str]]:
    """``(model, kind, line)`` per local revision that is not a checkpoint headtrace reads: its folder is not
    there (``missing``), its ``config.json`` is not a JSON object (``unreadable``) or it holds no
    weights headtrace loads (``no weights``); model by model, each model's revisions in step order."""
    out = []
    for model, spec in (config.get("models") or {}).items():
        if spec.get("source") != "local" or "path" not in spec or not isinstance(spec.get("revisions"), list):
            continue
        for revision in revs.sort_revisions(spec["revisions"]):
            try:
                folder = local_checkpoint_path(spec, revision)
            except ConfigError:
                break  # a package that is not installed: refused by the config check, naming its key
            where = f"models.{model} revision '{revision}'"
            kind, why = _problem(spec, revision, folder)
            if kind:
                out.append((model, kind, f"{where}: {why}"))
    return out


def check(config: dict, shown: int = 8) -> None:
    """Raise one ``ConfigError`` naming every local revision that is not a readable checkpoint, and the fix."""
    found = problems(config)
    if not found:
        return
    lines = [line for _, _, line in found]
    more = f"\n  … and {len(lines) - shown} more" if len(lines) > shown else ""
    kinds = [k for k in FIXES if any(kind == k for _, kind, _ in found)]
    models = {model for model, _, _ in found}
    name = models.pop() if len(models) == 1 else "NAME"
    fixes = "".join(f"\nFix ({k}): {FIXES[k].replace('NAME', name)}." for k in kinds)
    raise ConfigError(
        f"{len(lines)} local revision(s) are not checkpoints headtrace reads; no job has started:\n  "
        + "\n  ".join(lines[:shown]) + more + fixes)


def nearest(spec: dict, revision: str) -> str | None:
    """The name of an existing revision folder closest to ``revision`` (difflib), or None."""
    names = existing_names(spec)
    if revision in names:
        return None
    close = difflib.get_close_matches(revision, names, n=1, cutoff=0.5)
    return close[0] if close else None


def existing_names(spec: dict) -> list[str]:
    """Revision names with a folder (or file) there now, as ``path`` would place them."""
    base = str(spec["path"])
    if spec.get("single_checkpoint"):
        return []
    if "{revision}" in base:
        before, _, after = base.partition("{revision}")
        if "{revision}" in after:
            return []
        found = glob.glob(glob.escape(before) + "*" + glob.escape(after))
        return sorted({f[len(before):len(f) - len(after)] for f in found if "/" not in f[len(before):len(f) - len(after)]})
    root = Path(base)
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def _problem(spec: dict, revision: str, folder: str) -> tuple[str | None, str]:
    path = Path(folder)
    try:
        gguf_file = gguf.locate(path)
    except gguf.CheckpointError:
        return None, ""  # several GGUF files in one folder: refused by panel.local_gguf.check
    if not path.exists():
        near = nearest(spec, revision)
        return MISSING, f"no folder {folder}" + (f" (nearest there: '{near}')" if near else " (nothing like it there)")
    if gguf_file is not None:
        return None, ""  # a GGUF file carries its own configuration (checked by panel.local_gguf)
    problem = revs.config_json_problem(path)
    if problem:
        return UNREADABLE, problem
    try:
        weights.weight_files(path)
    except weights.CheckpointError as err:
        return NO_WEIGHTS, str(err)
    return None, ""
