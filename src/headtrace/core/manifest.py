"""The panel a results folder holds: ``RESULTS/panel.json``, written by the workflow's ``panel`` job.

Every reader of a finished run (``headtrace summary``, ``headtrace compare``) reads only the models
named here and, of each, only the revisions its trajectory holds, so that a cell of another panel left
in the same folder (an earlier config run into it) never enters this panel's answers. A results folder
written before this file existed has none: the readers then take every model they find and say so.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from headtrace.core import durable, paths

__all__ = ["Panel", "write", "read"]


@dataclass(frozen=True)
class Panel:
    """A panel as its config named it: each model's source and configured revisions (refinement may
    add revisions, which the model's trajectory holds), the seed groups and each model's family as the
    headline names it."""
    models: dict[str, list[str]]
    sources: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # model -> the family its headline row names

    @property
    def names(self) -> list[str]:
        return list(self.models)


def write(path: str | os.PathLike, models: dict[str, list[str]], sources: dict[str, str] | None = None,
          groups=(), families: dict[str, str] | None = None) -> None:
    """Write a panel's manifest atomically (``models``: name -> configured revisions, in config order)."""
    record = {"models": {m: list(r) for m, r in models.items()}, "sources": dict(sources or {}),
              "groups": list(groups), "families": dict(families or {})}
    durable.write_text(json.dumps(record, indent=1) + "\n", path)


def read(results: str | os.PathLike) -> Panel | None:
    """The manifest of a results folder; None where there is none (a folder written before it existed)."""
    p = Path(results) / paths.MANIFEST
    if not p.is_file():
        return None
    record = json.loads(p.read_text(encoding="utf-8"))
    return Panel(models={m: list(r) for m, r in record["models"].items()}, sources=record.get("sources", {}),
                 groups=list(record.get("groups", [])), families=dict(record.get("families", {})))
