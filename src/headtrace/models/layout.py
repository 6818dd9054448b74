"""Where a model's revision lives, as the config says: a ``local`` model's folder on disk, a ``hub``
model's repository and revision in it (torch-free: the workflow resolves both when it builds the DAG)."""
from __future__ import annotations

import os
import re

from headtrace.models import gguf


def local_checkpoint_path(spec: dict, revision: str) -> str:
    """The folder (or GGUF file) a ``local`` model's revision is read from, as the config says:
    ``path`` with ``{revision}`` filled in, ``path`` itself with ``single_checkpoint: true``, else
    ``path/{revision}``; with ``package``, ``path`` is inside that installed package's folder
    (:func:`headtrace.models.gguf.package_folder`). Never a fallback: ``headtrace.models.hub``
    fails the cell when it is missing."""
    base = str(spec["path"])
    if spec.get("package"):
        base = os.path.join(gguf.package_folder(spec["package"]), base)
    if "{revision}" in base:
        return base.replace("{revision}", revision)
    if spec.get("single_checkpoint"):
        return base
    return f"{base.rstrip('/')}/{revision}"


# A hub repository id (``owner/name``), optionally pinned to a revision in it (``owner/name@rev``:
# a branch, tag, commit or a ``refs/pr/N`` conversion pull request).
REPO_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[^\s@]+)?$"


def parse_repo(ref: str) -> tuple[str, str]:
    """``"owner/name"`` -> ``("owner/name", "main")``; ``"owner/name@rev"`` -> ``("owner/name", "rev")``.
    Anything else is a ``ValueError``."""
    if not isinstance(ref, str) or not re.fullmatch(REPO_PATTERN, ref):
        raise ValueError(f"'{ref}' is not a hub repository id 'owner/name' (optionally 'owner/name@revision')")
    repo, _, pin = ref.partition("@")
    return repo, pin or "main"


def hub_checkpoint(spec: dict, revision: str) -> tuple[str, str]:
    """``(repository id, revision in that repository)`` a ``hub`` model's revision is fetched from.

    A suite that publishes checkpoints as separate repositories (TinyLlama:
    ``TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T``) lists them in the model's ``repos``
    map, panel revision name -> ``owner/name`` (read at ``main``) or ``owner/name@rev`` (pinned);
    every other revision is the branch, tag or commit of that name in ``hf_id``. The panel keeps
    the revision's own name (its order, its tokens); only where the weights come from changes.
    A revision in neither is a ``ValueError``."""
    repos = spec.get("repos") or {}
    if revision in repos:
        return parse_repo(repos[revision])
    if spec.get("hf_id"):
        return str(spec["hf_id"]), revision
    raise ValueError(f"revision '{revision}' is not in repos and the model has no hf_id to read it from")
