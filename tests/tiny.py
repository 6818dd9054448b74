"""Tiny random models of each family, built from the real transformers classes (no download)."""
from __future__ import annotations

import torch
import transformers

FAMILY_NAMES = ("gpt_neox", "olmo", "olmoe")


def tiny_config(family: str, vocab_size: int = 128, n_layers: int = 2, n_heads: int = 4, d_model: int = 32):
    common = dict(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                  num_attention_heads=n_heads, intermediate_size=2 * d_model,
                  max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=1)
    if family == "gpt_neox":
        return transformers.GPTNeoXConfig(**common, rotary_pct=0.25, use_parallel_residual=True)
    if family == "olmo":
        return transformers.OlmoConfig(**common, num_key_value_heads=n_heads)
    if family == "olmoe":
        return transformers.OlmoeConfig(**common, num_key_value_heads=n_heads, num_experts=4,
                                        num_experts_per_tok=2)
    raise ValueError(family)


def tiny_model(family: str, seed: int = 0, **kwargs) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = tiny_config(family, **kwargs)
    cls = {"gpt_neox": transformers.GPTNeoXForCausalLM, "olmo": transformers.OlmoForCausalLM,
           "olmoe": transformers.OlmoeForCausalLM}[family]
    model = cls(cfg).eval()
    return model
