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

from torch import nn


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
    ),
}

# checkpoint config.json "model_type" -> family name, for family: auto
MODEL_TYPES = {name: name for name in FAMILIES}

# Families headtrace knows and refuses, with the reason: never captured wrongly.
REFUSED = {
    "bloom": ("BLOOM's attention (ALiBi, fused QKV) computes its scores inside BloomAttention.forward and "
              "does not pass through transformers' attention-function registry (AttentionInterface), "
              "which capture hooks: the attention masses cannot be read at the query without a "
              "BLOOM-specific capture, which headtrace does not have"),
}


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


def dims(model: nn.Module) -> tuple[int, int, int]:
    """(n_layers, n_heads, d_head) of a loaded model."""
    cfg = model.config
    n_heads = cfg.num_attention_heads
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return cfg.num_hidden_layers, n_heads, d_head
