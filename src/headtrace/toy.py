"""The embedded toy panel: small models of the three families trained from random init on CPU.

Each family is the real Hugging Face class (``GPTNeoXForCausalLM``, ``OlmoForCausalLM``,
``OlmoeForCausalLM``) at toy size, trained on a synthetic token stream in which copying carries a
large share of the loss, so an induction circuit forms within a few hundred steps (the README's
"The toy panel" records what was tried on a 2-core CPU). Checkpoints are saved in HF format (``config.json`` +
``model.safetensors``) at the configured revisions and a denser pool as ``out_dir/step{N}/``, so the
rest of the pipeline reads them exactly like the published revisions.

The training data streams (``make_data``) are in ``headtrace.toy_data``.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers

from headtrace.toy_data import BOS_TOKEN_ID, EOS_TOKEN_ID, VOCAB_SIZE, make_data  # noqa: F401 (toy.make_data)

from headtrace import durable

FAMILY_CLASSES = {
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "olmo": ("OlmoConfig", "OlmoForCausalLM"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
}

# Vocabulary: headtrace.toy_data (258 tokens, BOS 256); the default data and probe use the 95
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
    from headtrace.revisions import toy_step

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


def build_model(family: str, arch: dict, seed: int) -> transformers.PreTrainedModel:
    """A freshly initialised causal LM of ``family`` with the toy ``arch`` (seeded)."""
    if family not in FAMILY_CLASSES:
        raise ValueError(f"unknown toy family '{family}'; known: {sorted(FAMILY_CLASSES)}")
    cfg_name, model_name = FAMILY_CLASSES[family]
    n_heads = int(arch["n_heads"])
    d_model = int(arch["d_model"])
    if d_model % n_heads:
        raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
    vocab = int(arch.get("vocab_size", VOCAB_SIZE))
    common = dict(
        vocab_size=vocab,
        hidden_size=d_model,
        num_hidden_layers=int(arch["n_layers"]),
        num_attention_heads=n_heads,
        intermediate_size=int(arch.get("d_ff", 4 * d_model)),
        max_position_embeddings=int(arch.get("max_position_embeddings", 256)),
        bos_token_id=int(arch.get("bos_token_id", BOS_TOKEN_ID)),
        eos_token_id=int(arch.get("eos_token_id", EOS_TOKEN_ID)),
        pad_token_id=int(arch.get("pad_token_id", EOS_TOKEN_ID)),
        tie_word_embeddings=bool(arch.get("tie_word_embeddings", False)),
        initializer_range=float(arch.get("initializer_range", 0.02)),
    )
    rope = {"rope_type": "default", "rope_theta": float(arch.get("rope_theta", 10000.0))}
    if family == "gpt_neox":
        rope["partial_rotary_factor"] = float(arch.get("rotary_pct", 1.0))
        cfg = transformers.GPTNeoXConfig(**common, rope_parameters=rope,
                                         use_parallel_residual=bool(arch.get("use_parallel_residual", True)))
    elif family == "olmo":
        cfg = transformers.OlmoConfig(**common, rope_parameters=rope, num_key_value_heads=n_heads,
                                      clip_qkv=arch.get("clip_qkv"))
    else:
        cfg = transformers.OlmoeConfig(**common, rope_parameters=rope, num_key_value_heads=n_heads,
                                       num_experts=int(arch.get("num_experts", 4)),
                                       num_experts_per_tok=int(arch.get("num_experts_per_tok", 2)),
                                       router_aux_loss_coef=float(arch.get("router_aux_loss_coef", 0.01)),
                                       output_router_logits=False, clip_qkv=arch.get("clip_qkv"))
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(cfg)
    return model


SCHEDULES = ("constant", "cosine")


def check_schedule(optim: dict, max_steps: int) -> None:
    """Refuse an unknown ``optim.schedule`` or a ``decay_start`` outside [0, max_steps) by name,
    before training starts (a typo would otherwise train at a constant rate)."""
    kind = optim.get("schedule", "constant")
    if kind not in SCHEDULES:
        raise ValueError(f"optim.schedule '{kind}' is not one of {list(SCHEDULES)}")
    if "decay_start" in optim:
        if kind != "cosine":
            raise ValueError("optim.decay_start needs schedule: cosine")
        if not 0 <= int(optim["decay_start"]) < max_steps:
            raise ValueError(f"optim.decay_start {optim['decay_start']} must lie in [0, {max_steps})")


def _lr_at(step: int, optim: dict, max_steps: int) -> float:
    """Linear warmup over ``warmup`` steps, then constant, or (``schedule: cosine``) constant until
    ``decay_start`` (default: the end of warmup) and a cosine from there to ``min_lr_frac`` x lr at
    ``max_steps`` (warmup-stable-decay when ``decay_start`` is late)."""
    lr, warm = float(optim["lr"]), int(optim.get("warmup", 0))
    if warm and step < warm:
        return lr * (step + 1) / warm
    if optim.get("schedule", "constant") == "cosine":
        start = max(warm, int(optim.get("decay_start", warm)))
        if step < start:
            return lr
        frac = (step - start) / max(1, max_steps - start)
        floor = float(optim.get("min_lr_frac", 0.1))
        return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
    return lr


def _save(model: torch.nn.Module, out_dir: Path, step: int) -> Path:
    final = out_dir / f"step{step}"
    tmp = out_dir / f".step{step}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    transformers.utils.logging.disable_progress_bar()
    try:
        model.save_pretrained(tmp, safe_serialization=True)
    finally:
        transformers.utils.logging.enable_progress_bar()
    durable.publish_dir(tmp, final)  # fsync files + folder, replace final, fsync out_dir
    return final


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
    :func:`headtrace.revisions.schedule_tokens`: ``{until: N, tokens_per_step: batch_size x
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


def train(
    family: str,
    out_dir,
    *,
    arch: dict,
    data: dict,
    optim: dict,
    max_steps: int,
    checkpoint_steps: list[int],
    seed: int = 0,
    init_from: str | None = None,
    curriculum: list[dict] | None = None,
    progress: bool = True,
    on_checkpoint=None,
) -> list[Path]:
    """Train a toy model and save ``out_dir/step{N}/`` at every N in ``checkpoint_steps``.

    Step N is the model after N optimizer updates (step 0 = the initialisation, or the
    ``init_from`` weights; with ``init_from`` steps count from the start of this run and ``arch``
    is ignored). ``curriculum``: data phases before the main stream (:func:`phases`).
    Deterministic given ``seed`` (model init, data stream), single-threaded use recommended.
    ``on_checkpoint(model, step, path)``: called after each save with the model in eval mode (a
    live screen, :mod:`headtrace.toy_trial`); it must not change the weights.
    Returns the checkpoint directories in step order."""
    steps = sorted(set(int(s) for s in checkpoint_steps))
    if not steps or steps[0] < 0 or steps[-1] > max_steps:
        raise ValueError(f"checkpoint steps {checkpoint_steps} must lie in [0, {max_steps}]")
    schedule = phases(data, optim, curriculum, max_steps)
    check_schedule(optim, max_steps)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except Exception:  # pragma: no cover
        pass
    if init_from:
        model = transformers.AutoModelForCausalLM.from_pretrained(init_from)
        model_family = model.config.model_type
        if model_family != family:
            raise ValueError(f"init_from checkpoint is a '{model_family}' model, not '{family}'")
    else:
        model = build_model(family, arch, seed)
    model.train()
    # Weight decay on matrices only; QK-norm gains (OLMoE's q_norm/k_norm) may get a larger learning
    # rate (``qk_norm_lr_mult``): with unit gains the attention logits of a 32-dim head are bounded by
    # sqrt(32) ~ 5.7, so a sharp (induction) pattern needs the gains to grow.
    decay, no_decay, qk_norm = [], [], []
    for name, p in model.named_parameters():
        if "q_norm" in name or "k_norm" in name:
            qk_norm.append(p)
        elif p.ndim < 2 or "norm" in name.lower():
            no_decay.append(p)
        else:
            decay.append(p)
    mult = float(optim.get("qk_norm_lr_mult", 1.0))
    groups = [{"params": decay, "weight_decay": float(optim.get("weight_decay", 0.0)), "lr_mult": 1.0},
              {"params": no_decay, "weight_decay": 0.0, "lr_mult": 1.0}]
    if qk_norm:
        groups.append({"params": qk_norm, "weight_decay": 0.0, "lr_mult": mult})
    opt = torch.optim.AdamW(groups, lr=float(optim["lr"]), betas=tuple(optim.get("betas", (0.9, 0.95))),
                            eps=float(optim.get("eps", 1e-8)))
    rng = np.random.default_rng(seed)
    clip = optim.get("grad_clip")
    log_every = int(optim.get("log_every", 50))
    saved: list[Path] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max_steps, desc=f"toy {family}", file=sys.stderr, mininterval=5.0)
    t0, ema = time.time(), None
    for step in range(max_steps + 1):
        if step in steps:
            model.eval()
            saved.append(_save(model, out_dir, step))
            if on_checkpoint is not None:
                with torch.no_grad():
                    on_checkpoint(model, step, saved[-1])
            model.train()
        if step == max_steps:
            break
        lr = _lr_at(step, optim, max_steps)
        for g in opt.param_groups:
            g["lr"] = lr * g["lr_mult"]
        phase_data, bs, sl = next((d, b, sq) for until, d, b, sq in schedule if step < until)
        x = torch.from_numpy(make_data(phase_data, bs, sl, rng))
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(clip))
        opt.step()
        val = float(loss.detach())
        ema = val if ema is None else 0.95 * ema + 0.05 * val
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{ema:.3f}", refresh=False)
        if log_every and (step + 1) % log_every == 0:
            print(f"[toy {family}] step {step + 1}/{max_steps} loss {val:.4f} (ema {ema:.4f}) "
                  f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    if bar is not None:
        bar.close()
    return saved


def train_revisions(family: str, out_dir, *, revisions: list[str], overrides: dict | None = None,
                    pool=DEFAULT_POOL, progress: bool = True) -> list[Path]:
    """The train_toy rule's entry point: train ``family`` with its :func:`recipe` (``DEFAULTS[family]``
    updated by the config's ``train:`` block) up to the
    last revision's step, saving a checkpoint at every step of ``pool_steps(last step, revisions,
    pool)``: each revision (named ``step<N>``) plus the model's candidate pool for refinement."""
    from headtrace.revisions import toy_step

    steps = [toy_step(r) for r in revisions]
    max_steps = max(steps)
    r = recipe(family, overrides)
    if r["max_steps"] not in (None, max_steps):
        raise ValueError(f"train.max_steps {r['max_steps']} differs from the last revision's step {max_steps}")
    return train(family, out_dir, arch=r["arch"], data=r["data"], optim=r["optim"], max_steps=max_steps,
                 checkpoint_steps=pool_steps(max_steps, steps, pool), seed=r["seed"],
                 curriculum=r["curriculum"], progress=progress)


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
