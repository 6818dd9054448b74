"""Tiny random models of each family, built from the real transformers classes (no download)."""
from __future__ import annotations

import torch
import transformers

FAMILY_NAMES = ("gpt_neox", "olmo", "olmoe", "llama", "olmo2", "olmo3", "qwen2", "qwen3", "smollm3", "apertus",
                "gpt2", "bloom")
SLIDING_WINDOW = 16  # olmo3's tiny window: shorter than the test probes, so keys fall outside it

# family -> (config class, causal-LM class)
CLASSES = {
    "gpt_neox": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM),
    "olmo": (transformers.OlmoConfig, transformers.OlmoForCausalLM),
    "olmoe": (transformers.OlmoeConfig, transformers.OlmoeForCausalLM),
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
    "olmo2": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM),
    "olmo3": (transformers.Olmo3Config, transformers.Olmo3ForCausalLM),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    "smollm3": (transformers.SmolLM3Config, transformers.SmolLM3ForCausalLM),
    "apertus": (transformers.ApertusConfig, transformers.ApertusForCausalLM),
    "gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel),
    "bloom": (transformers.BloomConfig, transformers.BloomForCausalLM),
}


def tiny_config(family: str, vocab_size: int = 128, n_layers: int = 2, n_heads: int = 4, d_model: int = 32,
                yarn: bool = False):
    common = dict(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                  num_attention_heads=n_heads, intermediate_size=2 * d_model,
                  max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=1)
    gqa = dict(num_key_value_heads=max(n_heads // 2, 1))  # grouped-query: 2 query heads per kv head
    if family == "gpt_neox":
        return transformers.GPTNeoXConfig(**common, rotary_pct=0.25, use_parallel_residual=True)
    if family == "olmo":
        return transformers.OlmoConfig(**common, num_key_value_heads=n_heads)
    if family == "olmoe":
        return transformers.OlmoeConfig(**common, num_key_value_heads=n_heads, num_experts=4,
                                        num_experts_per_tok=2)
    if family == "llama":  # TinyLlama / SmolLM2 style GQA (Amber is MHA: olmo covers that path)
        return transformers.LlamaConfig(**common, **gqa)
    if family == "olmo2":
        return transformers.Olmo2Config(**common, num_key_value_heads=n_heads)
    if family == "olmo3":  # sliding window on every layer but each second (the real: 3 of 4)
        types = ["full_attention" if i % 2 else "sliding_attention" for i in range(n_layers)]
        cfg = transformers.Olmo3Config(**common, **gqa, sliding_window=SLIDING_WINDOW, layer_types=types)
        if yarn:  # as after Olmo 3's long-context stage: YaRN (factor 8, scaled scores) on the full layers only
            cfg.rope_parameters = {
                "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0},
                "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0,
                                   "original_max_position_embeddings": 32, "attention_factor": 1.2079,
                                   "beta_fast": 32.0, "beta_slow": 1.0}}
        return cfg
    if family == "qwen2":
        return transformers.Qwen2Config(**common, **gqa)
    if family == "qwen3":
        return transformers.Qwen3Config(**common, **gqa, head_dim=d_model // n_heads)
    if family == "smollm3":  # no rotary on every second layer (the real: every fourth)
        return transformers.SmolLM3Config(**common, **gqa, no_rope_layers=[int(i % 2 == 0) for i in range(n_layers)])
    if family == "apertus":
        return transformers.ApertusConfig(**common, **gqa)
    if family == "gpt2":  # as the Stanford CRFM runs: layer-scaled, upcast attention
        return transformers.GPT2Config(vocab_size=vocab_size, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                                       n_inner=2 * d_model, n_positions=256, bos_token_id=0, eos_token_id=1,
                                       pad_token_id=1, scale_attn_by_inverse_layer_idx=True,
                                       reorder_and_upcast_attn=True)
    if family == "bloom":  # ALiBi, fused QKV; its attention bypasses the registry (captured by a hook)
        return transformers.BloomConfig(vocab_size=vocab_size, hidden_size=d_model, n_layer=n_layers, n_head=n_heads,
                                        bos_token_id=0, eos_token_id=1, pad_token_id=1)
    raise ValueError(family)


def tiny_model(family: str, seed: int = 0, **kwargs) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = tiny_config(family, **kwargs)
    model = CLASSES[family][1](cfg).eval()
    return model


def tiny_tokenizer(folder, vocab_size: int = 128):
    """A locally built word-level tokenizer (no download) that puts a BOS (id 0) before every text, saved
    in ``folder`` as a checkpoint's tokenizer files; words it does not know map to <unk> (id 2)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = ("the a of to and in is it that for on with as by this probe text head heads attention sink token "
             "tokens model models first key query layer rate each every one two three revision").split()
    vocab = {"<bos>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    assert len(vocab) <= vocab_size
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                                unk_token="<unk>")
    fast.save_pretrained(str(folder))
    return fast
