"""The model's context length against the probe: a probe longer than the model's context fails.

Rotary models (GPT-NeoX/Pythia, OLMo, OLMoE, Llama) do not fail on positions beyond their
``max_position_embeddings``: they extrapolate and return numbers from positions the model never saw
in training. So the probe length is checked against the checkpoint's context length

* before any job where the config can be read (``headtrace.panel.config.check``): toy models (the toy
  architecture, ``headtrace.models.toy.recipe.DEFAULTS[family]["arch"]`` updated by ``train.arch``) and local
  checkpoints (``config.json`` of each revision's folder, when it is there);
* at job start for every model (``headtrace.models.hub.load_model`` reads ``config.json`` before the
  weights), which is where hub checkpoints are checked.

``probe.seq_len`` is the length as fed, BOS included (``probe.make_batch`` builds ``seq_len - 1``
tokens and prepends the BOS), so it is compared with the limit as it is.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from headtrace.models.toy import recipe as toy

__all__ = ["CONTEXT_KEYS", "limit_of", "read_limit", "toy_limit", "too_long"]

# config.json fields that hold the number of positions, by transformers config class:
# GPTNeoXConfig, OlmoConfig, OlmoeConfig, Olmo2Config, LlamaConfig: max_position_embeddings;
# GPT2Config: n_positions (its attribute_map maps max_position_embeddings to it); older: n_ctx.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def limit_of(cfg) -> tuple[int, str] | None:
    """``(limit, field)`` from a config (a config.json dict or a transformers ``PretrainedConfig``);
    None when it names no context length."""
    get = cfg.get if isinstance(cfg, Mapping) else (lambda k: getattr(cfg, k, None))
    for key in CONTEXT_KEYS:
        value = get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, key
    return None


def read_limit(config_json: str | Path) -> tuple[int, str] | None:
    """:func:`limit_of` of a ``config.json`` file; None when the file is not there (yet)."""
    path = Path(config_json)
    if not path.is_file():
        return None
    try:
        return limit_of(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None  # an unreadable config fails the cell's job, with its own message


def toy_limit(config: Mapping, model: str) -> tuple[int, str] | None:
    """The context length a toy model is built with: ``train.arch.max_position_embeddings``, else
    the family's toy recipe (``headtrace.models.toy.recipe.DEFAULTS``); a data-shift continuation
    (``train.shift_from``) has its base's architecture."""
    spec = config["models"][model]
    train = spec.get("train") or {}
    seen = {model}
    while train.get("shift_from") and train["shift_from"] in config["models"] and train["shift_from"] not in seen:
        seen.add(train["shift_from"])
        spec = config["models"][train["shift_from"]]
        train = spec.get("train") or {}
    arch = dict(train.get("arch") or {})
    if "max_position_embeddings" not in arch:
        recipe = toy.DEFAULTS.get(spec.get("family"), {})
        arch = {**(recipe.get("arch") or {}), **arch}
    value = arch.get("max_position_embeddings")
    return (int(value), "max_position_embeddings") if value is not None else None


def too_long(model: str, seq_len: int, limit: tuple[int, str] | None, where: str) -> str | None:
    """The error message when a ``seq_len``-token probe does not fit ``limit``; None when it fits
    (or the limit is unknown). ``where`` says where the limit was read (a file or the toy recipe)."""
    if limit is None or seq_len <= limit[0]:
        return None
    n, key = limit
    return (f"models.{model}: probe.seq_len {seq_len} (tokens as fed, BOS included) exceeds the model's "
            f"context length of {n} positions ({key} = {n} in {where}); lower probe.seq_len to at most {n} "
            f"(globally or in models.{model}.probe): beyond its context a rotary model returns numbers from "
            "positions it never saw in training")
