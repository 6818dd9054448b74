"""Where a ``local`` model's revision lives on disk, as the config says (torch-free: the workflow
checks the folders when it builds the DAG)."""
from __future__ import annotations


def local_checkpoint_path(spec: dict, revision: str) -> str:
    """The folder a ``local`` model's revision is read from, as the config says: ``path`` with
    ``{revision}`` filled in, ``path`` itself with ``single_checkpoint: true``, else
    ``path/{revision}``. Never a fallback: ``headtrace.models.hub`` fails the cell when it is missing."""
    base = str(spec["path"])
    if "{revision}" in base:
        return base.replace("{revision}", revision)
    if spec.get("single_checkpoint"):
        return base
    return f"{base.rstrip('/')}/{revision}"
