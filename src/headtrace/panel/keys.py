"""A config's schema errors in a few lines, before Snakemake's own validation.

Snakemake's ``validate`` names a wrong key on one line and then prints the schema it was checked
against: hundreds of lines for a typo inside a model entry, thousands for one at the top level.
:func:`check` reads the same schema (``config/schema.yaml``) first and raises one ``ConfigError``
that names every unknown key, where it is (``models.my-run``) and the closest valid key, or, for
any other schema error, the key path and what the schema expects; Snakemake's validation then
runs on a config it accepts (and fills in the defaults, as before).
"""
from __future__ import annotations

import difflib

import jsonschema

from headtrace.core import schema as schema_core
from headtrace.core.errors import ConfigError

MAX_MESSAGE = 240  # characters of a schema message (jsonschema quotes the whole instance)


def unknown_keys(config, node: dict | None = None, path: tuple = ()) -> list[tuple[tuple, str, list[str]]]:
    """``(where, key, valid keys)`` for every key the schema does not know, walking the blocks
    that close their keys (``additionalProperties: false``) and the maps of models and groups."""
    node = _resolve(schema_core.schema() if node is None else node)
    if not isinstance(config, dict) or not isinstance(node, dict):
        return []
    props = node.get("properties") or {}
    extra = node.get("additionalProperties", True)
    out = []
    for key, value in config.items():
        if key in props:
            out += unknown_keys(value, props[key], path + (key,))
        elif extra is False:
            out.append((path, str(key), sorted(props)))
        elif isinstance(extra, dict):
            out += unknown_keys(value, extra, path + (key,))
    return out


def problems(config: dict) -> list[str]:
    """One line per problem: every unknown key (with the closest valid one), else the schema's
    most relevant error per key path."""
    unknown = unknown_keys(config)
    if unknown:
        return [_unknown_line(*u) for u in unknown]
    validator = jsonschema.Draft202012Validator(schema_core.schema())
    lines = []
    for err in sorted(validator.iter_errors(config), key=jsonschema.exceptions.relevance):
        err = jsonschema.exceptions.best_match([err])
        line = _schema_line(err)
        if line not in lines:
            lines.append(line)
    return lines


def check(config: dict, shown: int = 8) -> None:
    """Raise one ``ConfigError`` of a few lines when the config does not fit the schema; nothing
    otherwise (Snakemake's ``validate`` runs after it and fills in the defaults)."""
    lines = problems(config)
    if not lines:
        return
    more = f"\n  … and {len(lines) - shown} more" if len(lines) > shown else ""
    raise ConfigError("the config does not fit config/schema.yaml (every key: config/README.md):\n  "
                      + "\n  ".join(lines[:shown]) + more)


def check_blocks(settings, blocks, where: str = "settings") -> None:
    """Raise one ``ConfigError`` naming every problem of ``settings``, a mapping of config blocks (the
    notebook API's ``settings={"screen": {...}}``): a block not among ``blocks`` and a key a block does
    not know, each with the closest valid name, then any value the schema refuses."""
    if settings is None:
        return
    if not isinstance(settings, dict):
        raise ConfigError(f"{where} must be a mapping of config blocks ({', '.join(blocks)}), got {type(settings).__name__}")
    root = schema_core.schema()
    lines = []
    for block, value in settings.items():
        if block not in blocks:
            close = difflib.get_close_matches(str(block), list(blocks), n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`?" if close else f"the blocks are {', '.join(blocks)}"
            lines.append(f"unknown block `{block}` in {where}: {hint}")
            continue
        lines += [_unknown_line(*u) for u in unknown_keys(value, root["properties"][block], (block,))]
    if not lines:
        sub = {"$defs": root.get("$defs", {}), "type": "object",
               "properties": {b: root["properties"][b] for b in settings}}
        validator = jsonschema.Draft202012Validator(sub)
        for err in sorted(validator.iter_errors(dict(settings)), key=jsonschema.exceptions.relevance):
            line = _schema_line(jsonschema.exceptions.best_match([err]))
            if line not in lines:
                lines.append(line)
    if lines:
        raise ConfigError(f"{where} does not fit config/schema.yaml (every key: config/README.md):\n  "
                          + "\n  ".join(lines))


def _resolve(node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        target = schema_core.schema()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "the top level"


def _unknown_line(where: tuple, key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`?" if close else f"valid keys here: {', '.join(valid)}"
    place = f"in `{_where(where)}`" if where else "at the top level"
    return f"unknown key `{key}` {place}: {hint}"


def _schema_line(err: jsonschema.ValidationError) -> str:
    message = err.message if len(err.message) <= MAX_MESSAGE else err.message[:MAX_MESSAGE] + " …"
    return f"`{_where(err.absolute_path)}`: {message}"
