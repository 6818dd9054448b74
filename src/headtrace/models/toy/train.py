"""The embedded toy panel: small models of the three families trained from random init on CPU.

Each family is the real Hugging Face class (``GPTNeoXForCausalLM``, ``OlmoForCausalLM``,
``OlmoeForCausalLM``) at toy size, trained on a synthetic token stream in which copying carries a
large share of the loss, so an induction circuit forms within a few hundred steps (docs/toy-panel.md
records what was tried on a 2-core CPU). Checkpoints are saved in HF format (``config.json`` +
``model.safetensors``) at the configured revisions and a denser pool as ``out_dir/step{N}/``, so the
rest of the pipeline reads them exactly like the published revisions.

The recipes (torch-free) are in :mod:`headtrace.models.toy.recipe`, the training data streams
(``make_data``) in :mod:`headtrace.models.toy.data`.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm import tqdm

from headtrace.core import durable
from headtrace.core.revisions import toy_revision, toy_step
from headtrace.models.toy.data import make_data
from headtrace.models.toy.recipe import (
    BOS_TOKEN_ID,
    DEFAULT_POOL,
    EOS_TOKEN_ID,
    FAMILY_CLASSES,
    VOCAB_SIZE,
    check_schedule,
    phases,
    pool_steps,
    recipe,
)


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
) -> list[Path]:
    """Train a toy model and save ``out_dir/step{N}/`` at every N in ``checkpoint_steps``.

    Step N is the model after N optimizer updates (step 0 = the initialisation, or the
    ``init_from`` weights; with ``init_from`` steps count from the start of this run and ``arch``
    is ignored). ``curriculum``: data phases before the main stream (:func:`phases`).
    Deterministic given ``seed`` (model init, data stream), single-threaded use recommended.
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

        bar = tqdm(total=max_steps, desc=f"toy {family}", file=sys.stderr, mininterval=5.0)
    t0, ema = time.time(), None
    for step in range(max_steps + 1):
        if step in steps:
            model.eval()
            saved.append(_save(model, out_dir, step))
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
    steps = [toy_step(r) for r in revisions]
    max_steps = max(steps)
    r = recipe(family, overrides)
    if r["max_steps"] not in (None, max_steps):
        raise ValueError(f"train.max_steps {r['max_steps']} differs from the last revision's step {max_steps}")
    return train(family, out_dir, arch=r["arch"], data=r["data"], optim=r["optim"], max_steps=max_steps,
                 checkpoint_steps=pool_steps(max_steps, steps, pool), seed=r["seed"],
                 curriculum=r["curriculum"], progress=progress)


def _lr_at(step: int, optim: dict, max_steps: int) -> float:
    """Linear warmup over ``warmup`` steps, then constant (``schedule: constant``, the only one)."""
    lr, warm = float(optim["lr"]), int(optim.get("warmup", 0))
    if warm and step < warm:
        return lr * (step + 1) / warm
    return lr


def _save(model: torch.nn.Module, out_dir: Path, step: int) -> Path:
    final = out_dir / toy_revision(step)
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
