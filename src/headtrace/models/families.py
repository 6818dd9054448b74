"""Model-family adapters: the only place that knows a family's module paths.

A family maps a Hugging Face causal-LM class to its decoder layers, each layer's attention
module, and the attention output projection whose *input* holds the per-head outputs
(``(..., n_heads * d_head)``, head-major). Capture and ablation touch the model only through
this adapter. To add a family, add one ``Family`` entry to ``FAMILIES`` (and its
``model_type`` to ``MODEL_TYPES``).
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
    # Any Llama-style family (q/k/v/o_proj under model.layers[i].self_attn) works the same way:
    "llama": _llama_like("llama", "LlamaForCausalLM"),
    "olmo2": _llama_like("olmo2", "Olmo2ForCausalLM"),
}

# checkpoint config.json "model_type" -> family name, for family: auto
MODEL_TYPES = {"gpt_neox": "gpt_neox", "olmo": "olmo", "olmoe": "olmoe", "llama": "llama", "olmo2": "olmo2"}


def get(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family '{name}'; known: {sorted(FAMILIES)}") from None


def from_model_type(model_type: str) -> Family:
    """Family of a checkpoint from its config's ``model_type`` (family: auto)."""
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"no headtrace adapter for model_type '{model_type}'; known: {sorted(MODEL_TYPES)}. "
            "Add a Family entry in headtrace/families.py."
        )
    return FAMILIES[MODEL_TYPES[model_type]]


def dims(model: nn.Module) -> tuple[int, int, int]:
    """(n_layers, n_heads, d_head) of a loaded model."""
    cfg = model.config
    n_heads = cfg.num_attention_heads
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return cfg.num_hidden_layers, n_heads, d_head
