"""patterns: the sink alpha and the prefix-matching score from capture's hook path equal the pure
formulas applied to eager ``output_attentions``, on a tiny sharpened model of every family (fp32, 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.capture import eager_patterns as _eager_patterns
from helpers.capture import sharpen as _sharpen
from tiny import FAMILY_NAMES, tiny_model

from headtrace.cell import measures, patterns
from headtrace.core import tables
from headtrace.models import families
from headtrace.probe import repeated


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return repeated.repeated_random(n_sequences=6, length=20, repeats=3, token_range=(2, 128), seed=3,
                                    prepend_bos=True, bos_token_id=0)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_alpha_and_prefix_match_eager_attention(name, tokens):
    model = _sharpen(tiny_model(name))
    family = families.get(name)
    impl = model.config._attn_implementation
    result = patterns.run(model, family, tokens, batch_size=4, prefix=True)
    assert model.config._attn_implementation == impl  # restored
    ref = _eager_patterns(model, family, tokens)
    assert ref[:, :, :, -1].max(-1).mean() > 0.2  # sharpened: far from uniform (1/61), so the test can fail
    alpha_ref = measures.sink_alpha_of_pattern(ref)  # (N, L, H)
    prefix_ref = measures.prefix_matching(ref, tokens)  # (N, L, H)
    assert result.alpha.shape == alpha_ref.shape == (6, *families.dims(model)[:2])
    np.testing.assert_allclose(result.alpha, alpha_ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(result.prefix, prefix_ref, atol=1e-5, rtol=0)


def test_text_probe_without_prefix_and_batch_size_independence(tokens):
    model = _sharpen(tiny_model("gpt_neox"))
    family = families.get("gpt_neox")
    a = patterns.run(model, family, tokens, batch_size=6)
    b = patterns.run(model, family, tokens, batch_size=1)
    assert a.prefix is None
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-6)


def test_measures_table_schema(tokens):
    model = _sharpen(tiny_model("llama"))
    family = families.get("llama")
    rep = patterns.run(model, family, tokens, batch_size=6, prefix=True)
    txt = patterns.run(model, family, tokens[:, :16], batch_size=6)
    df = patterns.measures_table({"repeated": rep, "text": txt}, "m", "step1", 10)
    tables.conform(df, "measures")
    n_heads = int(np.prod(families.dims(model)[:2]))
    assert df.height == 2 * n_heads
    assert df.filter(df["probe"] == "text")["prefix_matching"].null_count() == n_heads
    assert df.filter(df["probe"] == "repeated")["prefix_matching"].null_count() == 0
    np.testing.assert_allclose(df.filter(df["probe"] == "repeated")["sink_alpha"].to_numpy(),
                               rep.alpha.mean(0).ravel())
    # every sequence's alpha per head, in probe order: the published sink rate thresholds these
    per_seq = np.array(df.filter(df["probe"] == "text")["sink_alpha_per_sequence"].to_list())  # (heads, n)
    np.testing.assert_allclose(per_seq.T, txt.alpha.reshape(txt.alpha.shape[0], -1))


def test_repeated_random_probe():
    t = repeated.repeated_random(n_sequences=3, length=5, repeats=3, token_range=(10, 20), seed=1)
    assert t.shape == (3, 15)
    for row in t:
        assert len(set(row[:5].tolist())) == 5 and (row[:5] == row[5:10]).all() and (row[:5] == row[10:]).all()
    again = repeated.repeated_random(n_sequences=2, length=5, repeats=3, token_range=(10, 20), seed=1)
    assert (again == t[:2]).all()  # a sequence keeps its tokens whatever the batch size
    with pytest.raises(ValueError, match="fewer than length"):
        repeated.repeated_random(length=20, token_range=(0, 10))
    with pytest.raises(ValueError, match="bos_token_id"):
        repeated.repeated_random(prepend_bos=True)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_ov_weights_reproduce_the_heads_and_copying_equals_its_dense_definition(name):
    """On a one-token input every head attends to itself, so its output (the out projection's input) is
    its value vector: x @ W_V[h] + b; and the out projection is sum_h z_h @ W_O[h] + b. The copying score
    from the d_head x d_head product equals the dense vocabulary x vocabulary definition (vocab 128)."""
    model = tiny_model(name)
    family = families.get(name)
    n_layers, n_heads, d_head = families.dims(model)
    seen = {}
    attn, proj = family.attention_modules(model)[1], family.out_projs(model)[1]
    h1 = attn.register_forward_pre_hook(lambda m, a, k: seen.__setitem__("x", (a[0] if a else k["hidden_states"])),
                                        with_kwargs=True)
    h2 = proj.register_forward_hook(lambda m, a, out: seen.update(z=a[0], out=out))
    try:
        with torch.no_grad():
            family.backbone(model)(input_ids=torch.tensor([[5], [9]]), use_cache=False)
    finally:
        h1.remove()
        h2.remove()
    w_e, w_v, w_o, w_u = (w.detach() for w in families.ov_weights(model, family))
    x, z = seen["x"][:, 0].double(), seen["z"][:, 0].double().view(2, n_heads, d_head)
    v = torch.einsum("bm,hmd->bhd", x, w_v[1].double())
    bias = (z - v)  # what is left is the value bias, the same for both tokens
    assert torch.allclose(bias[0], bias[1], atol=1e-5)
    out_bias = proj.bias.double() if getattr(proj, "bias", None) is not None else 0.0
    rebuilt = torch.einsum("bhd,hdm->bm", z, w_o[1].double()) + out_bias
    assert torch.allclose(rebuilt, seen["out"][:, 0].double(), atol=1e-5)
    scores = patterns.copying(model, family)
    assert scores.shape == (n_layers, n_heads)
    e, u = w_e.double().numpy(), w_u.double().numpy()
    for layer in range(n_layers):
        for head in range(n_heads):
            dense = np.linalg.eigvals(e @ w_v[layer, head].double().numpy() @ w_o[layer, head].double().numpy() @ u)
            assert scores[layer, head] == pytest.approx(measures.positive_share(dense), abs=1e-6)


def test_cell_measures_refuse_a_probe_the_model_cannot_take(tokens):
    model = tiny_model("gpt2")  # n_positions 256, vocab 128
    family = families.get("gpt2")
    with pytest.raises(ValueError, match="text probe's token ids reach 200 .* vocabulary of 128"):
        patterns.cell_measures(model, family, repeated=None, text=np.full((2, 8), 200), batch_size=2, device="cpu",
                               name="m", revision="r", tokens=None)
    with pytest.raises(ValueError, match="300-token sequences .* context of 256"):
        patterns.cell_measures(model, family, repeated=None, text=np.ones((1, 300), np.int64), batch_size=2,
                               device="cpu", name="m", revision="r", tokens=None)
    cell = patterns.cell_measures(model, family, repeated=tokens, text=None, batch_size=2, device="cpu", name="m",
                                  revision="r", tokens=None)
    assert set(cell["probe"]) == {"repeated"} and cell["copying"].null_count() == 0
