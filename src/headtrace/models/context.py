"""What a probe must fit, read from a checkpoint: its context length and vocabulary
(:class:`headtrace.probe.fit.Limits`), from a ``config.json``, a GGUF header, a toy's architecture or an
in-memory model's ``PretrainedConfig``. The check itself, and the probe that fits, are
:mod:`headtrace.probe.fit`'s; this module reads what it checks against: the config check before any job
(toy models and local checkpoints), ``headtrace cell`` and ``headtrace.analyze`` before the weights are
read, and the job start (``headtrace.models.hub.load_model`` reads ``config.json`` before the weights),
where hub checkpoints are checked.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from headtrace.models import gguf
from headtrace.models.toy import recipe as toy
from headtrace.probe.fit import Limits

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
    (an unreadable config fails the cell's job, with its own message). A ``.gguf`` file gives the
    same keys from its header (:func:`headtrace.models.gguf.config_dict`; a bad file is refused by
    the config check, :func:`headtrace.models.gguf.check`)."""
    path = Path(config_json)
    if path.suffix == gguf.SUFFIX:
        try:
            return gguf.config_dict(path) if path.is_file() else None
        except gguf.CheckpointError:
            return None
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


def vocab_of(cfg) -> int | None:
    """``vocab_size`` (the embedding's rows) of a config.json dict or a ``PretrainedConfig``; None if absent."""
    value = cfg.get("vocab_size") if isinstance(cfg, Mapping) else getattr(cfg, "vocab_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def limits_of(configs: Iterable[tuple[object, str]]) -> Limits:
    """The tightest context length and vocabulary over ``(config, where)`` pairs (config.json dicts,
    toy architectures or ``PretrainedConfig``s; None for one not there): a model's probe must fit
    every one of its revisions."""
    ctx = voc = None
    for cfg, where in configs:
        if cfg is None:
            continue
        limit, vocab = limit_of(cfg), vocab_of(cfg)
        if limit is not None and (ctx is None or limit[0] < ctx[0]):
            ctx = (limit[0], limit[1], where)
        if vocab is not None and (voc is None or vocab < voc[0]):
            voc = (vocab, where)
    return Limits(*(ctx or (None, None, None)), *(voc or (None, None)))
