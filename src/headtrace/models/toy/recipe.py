"""The toy panel's recipes, torch-free: architecture, data and optimiser defaults per family, the
checkpoint steps, and the token axis a recipe implies (read when the workflow builds its DAG, so
parsing the Snakefile never imports torch). Training itself is :mod:`headtrace.models.toy.train`.
"""
from __future__ import annotations

import numpy as np

from headtrace.core.revisions import toy_step
from headtrace.models.toy.data import BOS_TOKEN_ID, EOS_TOKEN_ID, VOCAB_SIZE, make_data

__all__ = ["BOS_TOKEN_ID", "EOS_TOKEN_ID", "VOCAB_SIZE", "FAMILY_CLASSES", "DEFAULTS", "PROBE", "DEFAULT_POOL",
           "SCHEDULES", "TRAIN_KEYS", "checkpoint_steps", "pool_steps", "check_schedule", "phases",
           "token_schedule", "recipe"]

FAMILY_CLASSES = {
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "olmo": ("OlmoConfig", "OlmoForCausalLM"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
}

# Vocabulary: headtrace.models.toy.data (258 tokens, BOS 256); the default data and probe use the 95
# printable bytes [32, 127).

_REPEAT_DATA = {"kind": "repeat", "token_low": 32, "token_high": 127, "repeat_min": 20, "repeat_max": 63,
                "n_copies": "fill", "placement": "start", "repeat_prob": 1.0, "bos": False}

# OLMoE also sees in-context bigram recall (the probe's structure), which keeps its layer-1 heads on
# the token after the earlier occurrence (without it, 3 of 4 seeds solved the probe with near-uniform
# attention plus the expert MLPs).
_MIX_DATA = {"kind": "mixture", "token_low": 32, "token_high": 127, "components": [
    dict(_REPEAT_DATA, weight=0.75),
    {"kind": "pairs", "token_low": 32, "token_high": 127, "n_pairs": 16, "distance_min": 20, "distance_max": 63,
     "bos": False, "weight": 0.25},
]}

DEFAULTS: dict[str, dict] = {
    "gpt_neox": {
        "arch": {"n_layers": 2, "d_model": 128, "n_heads": 4, "d_ff": 512, "vocab_size": VOCAB_SIZE,
                 "max_position_embeddings": 256, "rotary_pct": 1.0},
        "data": dict(_REPEAT_DATA),
        "optim": {"lr": 1e-3, "warmup": 100, "batch_size": 32, "seq_len": 128, "weight_decay": 0.01,
                  "betas": [0.9, 0.95], "grad_clip": 1.0, "schedule": "constant"},
        "max_steps": 1000,
    },
    "olmo": {
        "arch": {"n_layers": 2, "d_model": 128, "n_heads": 4, "d_ff": 256, "vocab_size": VOCAB_SIZE,
                 "max_position_embeddings": 256},
        "data": dict(_REPEAT_DATA),
        "optim": {"lr": 2e-3, "warmup": 100, "batch_size": 32, "seq_len": 128, "weight_decay": 0.01,
                  "betas": [0.9, 0.95], "grad_clip": 1.0, "schedule": "constant"},
        "max_steps": 1000,
    },
    "olmoe": {
        "arch": {"n_layers": 2, "d_model": 128, "n_heads": 4, "d_ff": 128, "vocab_size": VOCAB_SIZE,
                 "max_position_embeddings": 256, "num_experts": 4, "num_experts_per_tok": 2},
        "data": dict(_MIX_DATA),
        "optim": {"lr": 1e-3, "warmup": 100, "batch_size": 32, "seq_len": 128, "weight_decay": 0.01,
                  "betas": [0.9, 0.95], "grad_clip": 1.0, "schedule": "constant", "qk_norm_lr_mult": 30.0},
        "max_steps": 1000,
    },
}

# Probe settings matched to the toy data (copy distances 20..63 at seq_len 128 -> ab in [64, 108)).
PROBE = {"n_sequences": 256, "seq_len": 128, "token_low": 32, "token_high": 127, "ab_low": 64, "ab_high": 108}


def checkpoint_steps(max_steps: int, n: int = 10) -> list[int]:
    """``n`` log-spaced integer steps from 0 to ``max_steps`` inclusive, strictly increasing.

    Step 0 is always first and ``max_steps`` last; the steps in between are spaced evenly in
    log(step) from 1 up (rounded, bumped up where rounding would repeat a step)."""
    if n < 2:
        raise ValueError(f"need at least 2 checkpoints (step 0 and the last), got {n}")
    if max_steps < n - 1:
        raise ValueError(f"max_steps {max_steps} is too small for {n} distinct checkpoints")
    inner = np.geomspace(1, max_steps, n - 1)
    steps = [0]
    for k, s in enumerate(inner):
        s = int(round(s))
        # leave room for the remaining checkpoints below max_steps
        s = max(s, steps[-1] + 1)
        s = min(s, max_steps - (n - 2 - k))
        steps.append(s)
    steps[-1] = max_steps
    assert all(a < b for a, b in zip(steps, steps[1:])), steps
    return steps


DEFAULT_POOL = 30


def pool_steps(max_steps: int, revisions, pool=DEFAULT_POOL) -> list[int]:
    """Every step ``train_toy`` saves: the configured revisions plus a denser candidate pool.

    ``revisions`` are the panel's revisions (names ``step<N>`` or ints); ``pool`` is either a
    number of log-spaced steps (``checkpoint_steps(max_steps, pool)``; 0 or None: no extra steps)
    or an explicit list of steps. The result is sorted, duplicate-free, starts at 0 and ends at
    ``max_steps``, and contains every revision's step (the panel is a subset of the pool), so a
    refinement round can add any pool step between two revisions without retraining. Pure: the
    same arguments always give the same steps, so the pool is known before training."""
    max_steps = int(max_steps)
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    steps = set()
    for r in revisions:
        s = toy_step(r)
        if not 0 <= s <= max_steps:
            raise ValueError(f"toy revision '{r}' lies outside [0, {max_steps}]")
        steps.add(s)
    if isinstance(pool, (list, tuple)):
        bad = [s for s in pool if not isinstance(s, (int, np.integer)) or not 0 <= int(s) <= max_steps]
        if bad:
            raise ValueError(f"toy pool steps {bad} are not integers in [0, {max_steps}]")
        steps.update(int(s) for s in pool)
    elif pool:
        n = int(pool)
        if n < 2:
            raise ValueError(f"toy pool must be 0 (none) or >= 2 log-spaced steps, got {n}")
        steps.update(checkpoint_steps(max_steps, min(n, max_steps + 1)))
    steps.update((0, max_steps))
    return sorted(steps)


SCHEDULES = ("constant",)


def check_schedule(optim: dict, max_steps: int) -> None:
    """Refuse an unknown ``optim.schedule`` by name before training starts (a typo would otherwise
    train at a constant rate without saying so). ``max_steps`` is the run's length."""
    kind = optim.get("schedule", "constant")
    if kind not in SCHEDULES:
        raise ValueError(f"optim.schedule '{kind}' is not one of {list(SCHEDULES)}")


def phases(data: dict, optim: dict, curriculum: list[dict] | None, max_steps: int) -> list[tuple[int, dict, int, int]]:
    """The training schedule as ``(until, data, batch_size, seq_len)`` phases in step order.

    ``curriculum``: phases that come before the main ``data`` / ``optim`` stream, each
    ``{until: N, data: {...}, seq_len: L, batch_size: B}`` (steps ``[previous until, N)`` draw
    ``B x L`` batches of that data; ``batch_size`` defaults to the main one). The main stream runs
    from the last ``until`` to ``max_steps``. Raises naming the phase when the steps are not
    increasing inside ``(0, max_steps]`` or a phase's data does not fit its ``seq_len``."""
    bs, sl = int(optim.get("batch_size", 32)), int(optim.get("seq_len", 128))
    out, prev = [], 0
    for k, ph in enumerate(curriculum or []):
        unknown = set(ph) - {"until", "data", "seq_len", "batch_size"}
        if unknown or "until" not in ph or "data" not in ph or "seq_len" not in ph:
            raise ValueError(f"train.curriculum[{k}]: needs until, data, seq_len (and optionally batch_size); "
                             f"got {sorted(ph)}")
        until = int(ph["until"])
        if not prev < until <= max_steps:
            raise ValueError(f"train.curriculum[{k}].until = {until} must lie in ({prev}, {max_steps}]")
        p_bs, p_sl = int(ph.get("batch_size", bs)), int(ph["seq_len"])
        make_data(ph["data"], 1, p_sl, np.random.default_rng(0))  # raises when the data does not fit
        out.append((until, ph["data"], p_bs, p_sl))
        prev = until
    out.append((max_steps, data, bs, sl))
    return out


def token_schedule(data: dict, optim: dict, curriculum: list[dict] | None, max_steps: int) -> list[dict]:
    """The tokens a step of the schedule's phases, as a ``tokens_schedule`` of
    :func:`headtrace.core.revisions.schedule_tokens`: ``{until: N, tokens_per_step: batch_size x
    seq_len}`` per curriculum phase (neighbours with the same tokens a step merged), then the main
    stream's ``{tokens_per_step: ...}`` without ``until``. Tokens at step N are the tokens the
    N updates trained on."""
    out: list[dict] = []
    for until, _, b, s in phases(data, optim, curriculum, max_steps):
        if out and out[-1]["tokens_per_step"] == b * s:
            out[-1]["until"] = until
        else:
            out.append({"until": until, "tokens_per_step": b * s})
    del out[-1]["until"]  # the main stream runs on
    return out


TRAIN_KEYS = ("arch", "data", "optim", "seed", "max_steps", "curriculum")


def recipe(family: str, overrides: dict | None = None) -> dict:
    """``DEFAULTS[family]`` updated by a config's ``train:`` block: ``arch``, ``data`` and ``optim``
    merged key by key (``data`` of another ``kind`` replaces the default's), ``curriculum`` and
    ``seed`` replaced. Keys arch, data, optim, curriculum
    (list or None), seed, max_steps (the block's, or None). Raises naming unknown keys."""
    if family not in DEFAULTS:
        raise ValueError(f"no toy recipe for family '{family}'; known: {sorted(DEFAULTS)}")
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(TRAIN_KEYS)
    if unknown:
        raise ValueError(f"unknown keys in the toy train block: {sorted(unknown)}")
    base = DEFAULTS[family]
    data = overrides.get("data", {})
    # another kind of data replaces the default (its keys would only linger, unused)
    data = dict(data) if data.get("kind", base["data"]["kind"]) != base["data"]["kind"] else {**base["data"], **data}
    return {"arch": {**base["arch"], **overrides.get("arch", {})},
            "data": data,
            "optim": {**base["optim"], **overrides.get("optim", {})},
            "curriculum": overrides.get("curriculum", base.get("curriculum")),
            "seed": int(overrides.get("seed", 0)), "max_steps": overrides.get("max_steps")}
