"""Model-family adapters: the only place that knows a family's module paths.

A family maps a Hugging Face causal-LM class to its decoder layers, each layer's attention
module, and the attention output projection whose *input* holds the per-head outputs
(``(..., n_heads * d_head)``, head-major). Capture and ablation touch the model only through
this adapter. To add a family, add one ``Family`` entry to ``FAMILIES`` (keyed by its
``model_type``) and a tiny config to ``tests/tiny.py`` (docs/families.md); a family whose attention
cannot be captured correctly goes into ``REFUSED`` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

# How capture reads a family's attention row at the query:
REGISTRY = "registry"  # its attention calls transformers' AttentionInterface: capture registers its own function
PROBS_HOOK = "probs_hook"  # it computes its probabilities itself: a forward hook reads them (Family.probs_module)


def _no_residual(args: tuple, kwargs: dict) -> None:
    return None


def _supported(config) -> None:
    return None


# ---- the value and output weights of each head (the OV circuit: headtrace.cell.measures.copying_score) ----
# Each returns the per-head value weights in the row-vector convention, (n_heads, d_model, d_head): the
# head's value vector is x @ W_V[h] (+ its bias) for the layer-normed residual x. Grouped-query heads share
# their kv head's weights.

def _v_proj(attn: nn.Module, n_heads: int, d_head: int) -> torch.Tensor:
    """q/k/v/o_proj families: v_proj.weight (n_kv * d_head, d_model), query head h reads kv head h // (H / H_kv)."""
    w = attn.v_proj.weight  # (n_kv * d_head, d_model)
    n_kv = w.shape[0] // d_head
    per_kv = w.view(n_kv, d_head, -1).transpose(1, 2)  # (n_kv, d_model, d_head)
    return per_kv.repeat_interleave(n_heads // n_kv, dim=0)


def _fused_per_head(attn: nn.Module, n_heads: int, d_head: int) -> torch.Tensor:
    """GPT-NeoX / BLOOM query_key_value (3 * H * d_head, d_model), laid out per head as [q, k, v]
    (both view its output as (..., H, 3 * d_head) and chunk it)."""
    w = attn.query_key_value.weight.view(n_heads, 3, d_head, -1)[:, 2]  # (H, d_head, d_model)
    return w.transpose(1, 2)


def _gpt2_c_attn(attn: nn.Module, n_heads: int, d_head: int) -> torch.Tensor:
    """GPT-2 c_attn, a Conv1D (d_model, 3 * d_model): x @ W, split into q | k | v, each head-major."""
    d_model = n_heads * d_head
    w = attn.c_attn.weight[:, 2 * d_model:3 * d_model]  # (d_model, H * d_head)
    return w.reshape(-1, n_heads, d_head).transpose(0, 1)  # (H, d_model, d_head)


def out_weights(proj: nn.Module, n_heads: int, d_head: int) -> torch.Tensor:
    """Per-head output weights (n_heads, d_head, d_model) of an output projection whose input is head-major:
    a Linear (weight (d_model, H * d_head)) or a transformers Conv1D (weight (H * d_head, d_model))."""
    w = proj.weight
    if isinstance(proj, nn.Linear):
        return w.T.reshape(n_heads, d_head, -1)
    return w.reshape(n_heads, d_head, -1)  # Conv1D: y = x @ W


@dataclass(frozen=True)
class Family:
    name: str
    model_class: str  # transformers class name, e.g. "GPTNeoXForCausalLM"
    backbone: Callable[[nn.Module], nn.Module]  # causal LM -> base model (embeddings + layers)
    layers: Callable[[nn.Module], nn.ModuleList]  # causal LM -> decoder layers
    attention: Callable[[nn.Module], nn.Module]  # decoder layer -> attention module
    out_proj: Callable[[nn.Module], nn.Linear]  # attention module -> output projection
    final_norm: Callable[[nn.Module], nn.Module]  # causal LM -> norm after the last layer
    lm_head: Callable[[nn.Module], nn.Linear]  # causal LM -> unembedding
    # How capture reads the query row (REGISTRY or PROBS_HOOK). PROBS_HOOK: ``probs_module(attn)``
    # is a module whose *input* is the attention probabilities (B, H, T_q, T_k) after the mask and
    # the softmax; a forward hook reads its query row. The model's attention implementation is
    # left as it is.
    capture: str = REGISTRY
    probs_module: Callable[[nn.Module], nn.Module] | None = None
    # The residual an attention module adds to its own output, from its call's (args, kwargs), or
    # None (most families add it in the decoder layer). Ablation replaces the module's output by
    # out_proj(z) (+ this residual).
    attention_residual: Callable[[tuple, dict], torch.Tensor | None] = _no_residual
    # config -> reason this configuration of the family cannot be captured correctly, or None.
    unsupported: Callable[[object], str | None] = _supported
    # attention module, n_heads, d_head -> per-head value weights (n_heads, d_model, d_head) (see _v_proj)
    value_weights: Callable[[nn.Module, int, int], torch.Tensor] = _v_proj

    def check(self, model: nn.Module) -> None:
        """Raise ValueError, naming the family and the reason, for a configuration it refuses."""
        reason = self.unsupported(model.config)
        if reason:
            raise ValueError(f"model family '{self.name}' is not supported in this configuration: {reason}")

    def attention_modules(self, model: nn.Module) -> list[nn.Module]:
        return [self.attention(layer) for layer in self.layers(model)]

    def out_projs(self, model: nn.Module) -> list[nn.Linear]:
        return [self.out_proj(attn) for attn in self.attention_modules(model)]


def _llama_like(name: str, model_class: str) -> Family:
    return Family(
        name=name,
        model_class=model_class,
        backbone=lambda m: m.model,
        layers=lambda m: m.model.layers,
        attention=lambda layer: layer.self_attn,
        out_proj=lambda attn: attn.o_proj,
        final_norm=lambda m: m.model.norm,
        lm_head=lambda m: m.lm_head,
    )


FAMILIES: dict[str, Family] = {
    "gpt_neox": Family(
        name="gpt_neox",
        model_class="GPTNeoXForCausalLM",
        backbone=lambda m: m.gpt_neox,
        layers=lambda m: m.gpt_neox.layers,
        attention=lambda layer: layer.attention,
        out_proj=lambda attn: attn.dense,
        final_norm=lambda m: m.gpt_neox.final_layer_norm,
        lm_head=lambda m: m.get_output_embeddings(),
        value_weights=_fused_per_head,
    ),
    "olmo": _llama_like("olmo", "OlmoForCausalLM"),
    "olmoe": _llama_like("olmoe", "OlmoeForCausalLM"),
    # Llama-style families (q/k/v/o_proj under model.layers[i].self_attn), MHA or grouped-query
    # (heads are query heads; o_proj's input stays head-major over them):
    "llama": _llama_like("llama", "LlamaForCausalLM"),  # LLM360 Amber, TinyLlama, SmolLM2
    "olmo2": _llama_like("olmo2", "Olmo2ForCausalLM"),  # norm after attention: see docs/families.md
    "olmo3": _llama_like("olmo3", "Olmo3ForCausalLM"),  # sliding window on 3 of 4 layers
    "qwen2": _llama_like("qwen2", "Qwen2ForCausalLM"),
    "qwen3": _llama_like("qwen3", "Qwen3ForCausalLM"),
    "smollm3": _llama_like("smollm3", "SmolLM3ForCausalLM"),  # no rotary on every 4th layer
    "apertus": _llama_like("apertus", "ApertusForCausalLM"),
    # GPT-2 (Stanford CRFM): fused QKV through Conv1D; c_proj is a Conv1D, its input head-major.
    # Its attention goes through the attention-function registry with the layer's own scaling
    # (scale_attn_by_inverse_layer_idx included); reorder_and_upcast_attn only changes eager's
    # arithmetic (fp32 scores), which capture's fp32 softmax matches.
    "gpt2": Family(
        name="gpt2",
        model_class="GPT2LMHeadModel",
        backbone=lambda m: m.transformer,
        layers=lambda m: m.transformer.h,
        attention=lambda layer: layer.attn,
        out_proj=lambda attn: attn.c_proj,
        final_norm=lambda m: m.transformer.ln_f,
        lm_head=lambda m: m.lm_head,
        value_weights=_gpt2_c_attn,
    ),
    # BLOOM: ALiBi; its attention computes its scores itself (baddbmm, fp32 softmax) and does not go
    # through the attention-function registry. Capture reads the probabilities at the input of
    # attention_dropout (identity in eval); the per-head outputs are dense's input, head-major
    # (_merge_heads: (B*H, T, d) -> (B, T, H*d)). BloomAttention adds the residual itself
    # (dropout_add(dense(z), residual), its second positional argument).
    "bloom": Family(
        name="bloom",
        model_class="BloomForCausalLM",
        backbone=lambda m: m.transformer,
        layers=lambda m: m.transformer.h,
        attention=lambda layer: layer.self_attention,
        out_proj=lambda attn: attn.dense,
        final_norm=lambda m: m.transformer.ln_f,
        lm_head=lambda m: m.lm_head,
        capture=PROBS_HOOK,
        probs_module=lambda attn: attn.attention_dropout,
        value_weights=_fused_per_head,
        attention_residual=lambda args, kwargs: kwargs["residual"] if "residual" in kwargs else args[1],
        unsupported=lambda cfg: (
            f"pretraining_tp = {cfg.pretraining_tp} with slow_but_exact: BloomAttention applies dense in "
            "slices (F.linear on its weight), so a hook on dense would see neither the per-head outputs "
            "nor an ablation; load it with slow_but_exact=False"
            if getattr(cfg, "pretraining_tp", 1) > 1 and getattr(cfg, "slow_but_exact", False) else None),
    ),
}

# checkpoint config.json "model_type" -> family name, for family: auto
MODEL_TYPES = {name: name for name in FAMILIES}

# Families headtrace knows and refuses, with the reason: never captured wrongly. (BLOOM was here until
# it got its own capture path; a configuration a family refuses is ``Family.unsupported``.)
REFUSED: dict[str, str] = {}


def warm_preload() -> tuple[str, ...]:
    """Every family's model class as :mod:`headtrace.runtime.warm` preloads it (``transformers:Class``):
    what ``headtrace warm`` and the tests' warm server import beside ``warm.PRELOAD``."""
    return tuple(f"transformers:{family.model_class}" for family in FAMILIES.values())


def get(name: str) -> Family:
    if name in REFUSED:
        raise ValueError(f"model family '{name}' is not supported: {REFUSED[name]}")
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family '{name}'; known: {sorted(FAMILIES)}") from None


def from_model_type(model_type: str) -> Family:
    """Family of a checkpoint from its config's ``model_type`` (family: auto)."""
    if model_type in REFUSED:
        raise ValueError(f"model_type '{model_type}' is not supported: {REFUSED[model_type]}")
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"no headtrace adapter for model_type '{model_type}'; known: {sorted(MODEL_TYPES)}. "
            "Add a Family entry in headtrace/models/families.py (docs/families.md)."
        )
    return FAMILIES[MODEL_TYPES[model_type]]


def layer_windows(config) -> list[int | None]:
    """Per decoder layer, its sliding attention window (a key at distance ``>= window`` from the query
    is masked: transformers' ``sliding_window_overlay``), or None for full attention. From the
    config's ``layer_types`` (Olmo 3, Qwen2/3, SmolLM3, ... in transformers 5: ``"sliding_attention"``
    layers get ``sliding_window``); a config with ``sliding_window`` and no ``layer_types`` (Mistral)
    windows every layer unless ``use_sliding_window`` is false."""
    n_layers = config.num_hidden_layers
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return [None] * n_layers
    types = getattr(config, "layer_types", None)
    if types is not None:
        return [window if t == "sliding_attention" else None for t in types]
    if getattr(config, "use_sliding_window", True) is False:
        return [None] * n_layers
    return [window] * n_layers


def ov_weights(model: nn.Module, family: Family) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(W_E (vocab, d_model), W_V (L, H, d_model, d_head), W_O (L, H, d_head, d_model), W_U (d_model, vocab))``
    of a model, row-vector convention (layer norms and biases left out, as Elhage et al.'s OV circuit)."""
    _, n_heads, d_head = dims(model)
    attn = family.attention_modules(model)
    w_v = torch.stack([family.value_weights(a, n_heads, d_head) for a in attn])
    w_o = torch.stack([out_weights(family.out_proj(a), n_heads, d_head) for a in attn])
    w_e = model.get_input_embeddings().weight
    w_u = family.lm_head(model).weight.T
    return w_e, w_v, w_o, w_u


def dims(model: nn.Module) -> tuple[int, int, int]:
    """(n_layers, n_heads, d_head) of a loaded model."""
    cfg = model.config
    n_heads = cfg.num_attention_heads
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return cfg.num_hidden_layers, n_heads, d_head
