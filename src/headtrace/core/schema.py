"""The workflow configuration's JSON schema (``config/schema.yaml``) as the one source of defaults:
the notebook API, the experiments and the panel read their defaults from it instead of keeping
copies."""
from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "config" / "schema.yaml"


@lru_cache(maxsize=1)
def schema() -> dict:
    """``config/schema.yaml`` of this checkout, parsed."""
    if not SCHEMA_PATH.exists():
        raise FileNotFoundError(f"the workflow's config schema is not at {SCHEMA_PATH}: headtrace reads its "
                                "defaults from it, so install the package from a checkout (pip install -e .)")
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _resolve(node: dict) -> dict:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = schema()
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


def _defaults(node: dict):
    node = _resolve(node)
    if "properties" in node:
        out = dict(copy.deepcopy(node.get("default") or {}))
        for key, child in node["properties"].items():
            value = _defaults(child)
            if value is not _NONE:
                out.setdefault(key, value)
        return out
    return copy.deepcopy(node["default"]) if "default" in node else _NONE


_NONE = object()


def defaults(*path: str) -> dict:
    """The defaults of the config block at ``path`` (``defaults("ablation")``,
    ``defaults("experiments")``, ``defaults("$defs", "probe")``), nested blocks filled in
    recursively; keys without a default are absent. A fresh copy on every call."""
    node = schema()
    for key in path:
        node = _resolve(node)
        props = node.get("properties", {})
        node = props[key] if key in props else node.get(key)
        if node is None:
            raise KeyError(f"config/schema.yaml has no block {'.'.join(path)}")
    value = _defaults(node)
    return {} if value is _NONE else value
