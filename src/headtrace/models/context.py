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

The probe's token ids are checked against the checkpoint's vocabulary the same way and at the same
places (:func:`outside_vocab`): a token id at or beyond ``vocab_size`` would otherwise stop the
capture with a bare ``IndexError`` from the embedding. :func:`misfit` is the one check all three
places (config check, job start, ``headtrace cell`` before the weights are read) call.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from headtrace.models.toy import recipe as toy

__all__ = ["CONTEXT_KEYS", "limit_of", "read_config", "toy_arch", "toy_limit", "too_long", "vocab_of",
           "outside_vocab", "misfit"]

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


def read_config(config_json: str | Path) -> dict | None:
    """A checkpoint's ``config.json`` as a dict; None when the file is not there (yet) or unreadable
    (an unreadable config fails the cell's job, with its own message)."""
    path = Path(config_json)
    if not path.is_file():
        return None
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def toy_arch(config: Mapping, model: str) -> dict:
    """The architecture a toy model is built with: its family's toy recipe
    (``headtrace.models.toy.recipe.DEFAULTS``) updated by ``train.arch``; a data-shift continuation
    (``train.shift_from``) has its base's."""
    spec = config["models"][model]
    train = spec.get("train") or {}
    seen = {model}
    while train.get("shift_from") and train["shift_from"] in config["models"] and train["shift_from"] not in seen:
        seen.add(train["shift_from"])
        spec = config["models"][train["shift_from"]]
        train = spec.get("train") or {}
    return {**(toy.DEFAULTS.get(spec.get("family"), {}).get("arch") or {}), **(train.get("arch") or {})}


def toy_limit(config: Mapping, model: str) -> tuple[int, str] | None:
    """The context length a toy model is built with (``max_position_embeddings`` of :func:`toy_arch`)."""
    value = toy_arch(config, model).get("max_position_embeddings")
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


def vocab_of(cfg) -> int | None:
    """``vocab_size`` (the embedding's rows) of a config.json dict or a ``PretrainedConfig``; None if absent."""
    value = cfg.get("vocab_size") if isinstance(cfg, Mapping) else getattr(cfg, "vocab_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def misfit(model: str, cfg, where: str, *, seq_len: int | None = None, token_range=None,
           bos_token_id: int | None = None, token_flag: str = "probe.token_range") -> str | None:
    """The error message when the probe does not fit the model that ``cfg`` describes (a config.json
    dict, a toy architecture or a ``PretrainedConfig``): longer than its context (:func:`too_long`),
    or token ids outside its vocabulary (:func:`outside_vocab`); None when it fits or nothing is
    known. The one check behind the config check, the job start and ``headtrace cell``."""
    if seq_len is not None:
        msg = too_long(model, int(seq_len), limit_of(cfg), where)
        if msg:
            return msg
    if token_range is not None:
        return outside_vocab(model, token_range, bos_token_id, vocab_of(cfg), where, flag=token_flag)
    return None


def outside_vocab(model: str, token_range, bos_token_id: int | None, vocab: int | None, where: str,
                  flag: str = "probe.token_range") -> str | None:
    """The error message when the probe's token ids (``token_range`` = [low, high), and the BOS id
    when one is prepended) do not fit a ``vocab``-token embedding; None when they fit or ``vocab``
    is unknown. ``flag`` names what to change (the config key, or ``--token-range LOW HIGH``)."""
    if vocab is None:
        return None
    lo, hi = int(token_range[0]), int(token_range[1])
    if hi > vocab:
        low = min(lo, max(vocab // 10, 1))
        return (f"models.{model}: probe.token_range [{lo}, {hi}) reaches token id {hi - 1}, but the model's "
                f"vocabulary has {vocab} tokens (vocab_size in {where}); set {flag} within it, e.g. "
                f"[{low}, {vocab}) (globally or in models.{model}.probe)")
    if bos_token_id is not None and not 0 <= int(bos_token_id) < vocab:
        return (f"models.{model}: probe.bos_token_id {bos_token_id} is not a token of the model's "
                f"{vocab}-token vocabulary (vocab_size in {where})")
    return None
