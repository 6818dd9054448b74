"""capture: one forward pass per cell, checked against the model itself and an eager reference."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch
from helpers.capture import MASS_FIELDS
from helpers.capture import eager_last_row as _eager_last_row
from helpers.capture import eager_masses as _eager_masses
from helpers.capture import sharpen as _sharpen
from tiny import FAMILY_NAMES, tiny_model

from headtrace.cell import capture
from headtrace.core import tables
from headtrace.core.classes import CLASSES
from headtrace.models import families
from headtrace.probe import synthetic


@pytest.fixture(scope="module")
def batch() -> synthetic.ProbeBatch:
    return synthetic.make_batch(n_sequences=16, seq_len=64, token_range=(2, 128), ab_range=(10, 32))


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def case(request, batch):
    """(family name, model, Family, capture result at batch_size 16, attention outputs at the query)."""
    name = request.param
    model = _sharpen(tiny_model(name))
    family = families.get(name)
    seen: dict[int, list[torch.Tensor]] = {}

    def make_hook(layer):
        def hook(_module, args, kwargs, output):
            out = output[0]
            residual = family.attention_residual(args, kwargs)  # BLOOM's attention adds it itself
            out = out if residual is None else out - residual
            seen.setdefault(layer, []).append(out[:, -1].detach().float().clone())
        return hook

    handles = [m.register_forward_hook(make_hook(i), with_kwargs=True)
               for i, m in enumerate(family.attention_modules(model))]
    try:
        result = capture.run(model, family, batch, batch_size=16, progress=False)
    finally:
        for h in handles:
            h.remove()
    attn_out = np.stack([torch.cat(seen[i]).numpy() for i in sorted(seen)], axis=1)  # (N, L, hidden)
    return name, model, family, result, attn_out


def test_shapes_and_counts(case, batch):
    name, model, family, result, _ = case
    n_layers, n_heads, d_head = families.dims(model)
    assert result.head_outputs.shape == (16, n_layers, n_heads, d_head)
    assert result.head_outputs.dtype == np.float32
    for field in MASS_FIELDS:
        arr = result.mass(field)
        assert arr.shape == (n_layers, n_heads) and arr.dtype == np.float64
        assert np.all(np.isfinite(arr)) and np.all(arr >= 0) and np.all(arr <= 1)
    np.testing.assert_allclose(result.baseline_uniform, 1 / batch.seq_len)
    assert result.n_sequences == 16 and result.n_valid == int(batch.valid.sum())
    assert set(result.masses) == set(CLASSES)


def test_head_outputs_reproject_to_attention_output(case):
    """W_O @ concat(heads) + b equals the attention module's output at the query."""
    name, model, family, result, attn_out = case
    n, n_layers = result.head_outputs.shape[:2]
    for layer, proj in enumerate(family.out_projs(model)):
        heads = torch.from_numpy(result.head_outputs[:, layer].reshape(n, -1))
        with torch.no_grad():
            reproj = proj(heads).numpy()
        np.testing.assert_allclose(reproj, attn_out[:, layer], rtol=1e-4, atol=1e-5)


def test_masses_match_eager_reference(case, batch):
    name, model, family, result, _ = case
    ref = _eager_masses(model, family, batch)
    # The sharpened tiny models must actually be peaky, or this test would prove little.
    assert ref["_row_max"] > 0.2  # uniform would be 1/64
    for field in MASS_FIELDS:
        np.testing.assert_allclose(result.mass(field), ref[field], rtol=1e-4, atol=1e-6, err_msg=f"{name} {field}")


def test_masses_match_eager_with_yarn_on_olmo3_full_layers(batch):
    """Olmo 3 after its long-context stage: YaRN rotary (attention factor 1.2079) on the full layers,
    the plain one on the windowed layers; capture reads each layer's own q and k, as eager does."""
    model = _sharpen(tiny_model("olmo3", yarn=True))
    family = families.get("olmo3")
    assert model.model.rotary_emb.full_attention_attention_scaling == pytest.approx(1.2079)
    result = capture.run(model, family, batch, batch_size=16, progress=False)
    ref = _eager_masses(model, family, batch)
    assert ref["_row_max"] > 0.2
    for field in MASS_FIELDS:
        np.testing.assert_allclose(result.mass(field), ref[field], rtol=1e-4, atol=1e-6, err_msg=field)


@pytest.mark.slow
def test_restores_implementation_and_logits(batch):
    for name in FAMILY_NAMES:
        model = _sharpen(tiny_model(name))
        family = families.get(name)
        ids = torch.from_numpy(batch.tokens)
        with torch.no_grad():
            before = model(ids).logits
        impl = model.config._attn_implementation
        model.train()
        capture.run(model, family, batch, batch_size=5, progress=False)
        assert model.config._attn_implementation == impl
        assert model.training  # mode restored too
        model.eval()
        assert not capture._ACTIVE
        assert all(not m._forward_pre_hooks for m in family.out_projs(model))
        if family.probs_module is not None:
            assert all(not family.probs_module(m)._forward_hooks for m in family.attention_modules(model))
        with torch.no_grad():
            after = model(ids).logits
        torch.testing.assert_close(after, before, rtol=0, atol=0)


def test_restores_implementation_on_error(batch):
    model = tiny_model("gpt_neox")
    family = families.get("gpt_neox")
    bad = synthetic.ProbeBatch(tokens=batch.tokens + 10_000, ab=batch.ab, target=batch.target, valid=batch.valid)
    with pytest.raises(Exception):
        capture.run(model, family, bad, batch_size=4, progress=False)
    assert model.config._attn_implementation == "sdpa"
    assert not capture._ACTIVE
    assert all(not m._forward_pre_hooks for m in family.out_projs(model))


def test_batch_size_independence(case, batch):
    name, model, family, result, _ = case
    other = capture.run(model, family, batch, batch_size=3, progress=False)
    np.testing.assert_allclose(other.head_outputs, result.head_outputs, rtol=1e-4, atol=1e-5)
    for field in MASS_FIELDS:
        np.testing.assert_allclose(other.mass(field), result.mass(field), rtol=1e-5, atol=1e-8)


def test_keep_head_outputs_false_and_custom_baseline(batch):
    model = tiny_model("olmo")
    family = families.get("olmo")
    pos = np.array([5, 6, 7])
    result = capture.run(model, family, batch, batch_size=8, keep_head_outputs=False, baseline_positions=pos,
                         progress=True)
    assert result.head_outputs is None
    full = capture.run(model, family, batch, batch_size=8, progress=False)
    np.testing.assert_allclose(result.induction, full.induction, rtol=1e-6)
    with pytest.raises(ValueError):
        capture.save_head_outputs(result, "/nonexistent/never.safetensors")
    with pytest.raises(ValueError):
        capture.run(model, family, batch, batch_size=8, baseline_positions=np.array([batch.seq_len]))


def test_induction_over_valid_only(batch):
    """Invalid sequences are excluded from induction / duplicate-token, but not from the others."""
    model = _sharpen(tiny_model("gpt_neox"))
    family = families.get("gpt_neox")
    valid = batch.valid.copy()
    valid[::2] = False
    half = synthetic.ProbeBatch(tokens=batch.tokens, ab=batch.ab, target=batch.target, valid=valid)
    full = capture.run(model, family, batch, batch_size=16, keep_head_outputs=False, progress=False)
    sub = synthetic.ProbeBatch(tokens=batch.tokens[1::2], ab=batch.ab[1::2], target=batch.target[1::2],
                               valid=batch.valid[1::2])
    r_half = capture.run(model, family, half, batch_size=16, keep_head_outputs=False, progress=False)
    r_sub = capture.run(model, family, sub, batch_size=16, keep_head_outputs=False, progress=False)
    assert r_half.n_valid == 8 and r_half.n_sequences == 16
    np.testing.assert_allclose(r_half.induction, r_sub.induction, rtol=1e-5)
    np.testing.assert_allclose(r_half.duplicate_token, r_sub.duplicate_token, rtol=1e-5)
    np.testing.assert_allclose(r_half.previous_token, full.previous_token, rtol=1e-6)


def test_gqa_matches_eager(batch):
    """Grouped-query attention (2 kv heads for 4 query heads) reduces like repeat_kv."""
    import transformers
    from tiny import tiny_config

    torch.manual_seed(0)
    cfg = tiny_config("olmo")
    cfg.num_key_value_heads = 2
    model = _sharpen(transformers.OlmoForCausalLM(cfg).eval())
    family = families.get("olmo")
    result = capture.run(model, family, batch, batch_size=7, progress=False)
    ref = _eager_masses(model, family, batch)
    for field in MASS_FIELDS:
        np.testing.assert_allclose(result.mass(field), ref[field], rtol=1e-4, atol=1e-6, err_msg=field)


def test_attention_table_schema(case):
    name, model, family, result, _ = case
    df = capture.attention_table(result, f"tiny-{name}", "step0", 0)
    n_layers, n_heads, _ = families.dims(model)
    assert df.height == n_layers * n_heads
    assert list(df.columns[: len(tables.SCHEMAS["attention"])]) == list(tables.SCHEMAS["attention"])
    n_schema = len(tables.SCHEMAS["attention"])
    assert dict(list(zip(df.columns, df.dtypes))[:n_schema]) == tables.SCHEMAS["attention"]
    # beyond the schema: the sliding window and the classes it hides (docs/families.md)
    assert df.columns[n_schema:] == ["attn_window", "classes_out_of_window", "classes_partly_out_of_window"]
    tables.conform(df, "attention")
    row = df.filter((pl.col("layer") == 1) & (pl.col("head") == 2)).row(0, named=True)
    assert row["attn_induction"] == pytest.approx(result.induction[1, 2])
    assert row["attn_duplicate_token"] == pytest.approx(result.duplicate_token[1, 2])
    assert row["attn_self"] == pytest.approx(result.self_[1, 2])
    assert row["attn_baseline_sampled"] == pytest.approx(result.baseline_sampled[1, 2])
    assert row["n_valid"] == result.n_valid


def test_head_outputs_roundtrip(case, tmp_path):
    _, _, _, result, _ = case
    path = tmp_path / "sub" / "heads.safetensors"
    capture.save_head_outputs(result, path)
    loaded = capture.load_head_outputs(path)
    np.testing.assert_array_equal(loaded, result.head_outputs)
    assert [p.name for p in path.parent.iterdir()] == ["heads.safetensors"]  # no tmp left behind


def test_low_precision_model(batch):
    """A bf16 model: head outputs come back float32, masses (fp32 softmax, fp64 sums) stay close."""
    model = _sharpen(tiny_model("olmoe"))
    family = families.get("olmoe")
    full = capture.run(model, family, batch, batch_size=16, progress=False)
    low = capture.run(model.to(torch.bfloat16), family, batch, batch_size=16, progress=False)
    assert low.head_outputs.dtype == np.float32
    assert low.induction.dtype == np.float64
    for field in MASS_FIELDS:
        np.testing.assert_allclose(low.mass(field), full.mass(field), atol=0.05, err_msg=field)


def test_restores_eager_implementation(batch):
    model = tiny_model("olmo")
    model.set_attn_implementation("eager")
    family = families.get("olmo")
    ref = capture.run(tiny_model("olmo"), family, batch, batch_size=16, progress=False)
    result = capture.run(model, family, batch, batch_size=16, progress=False)
    assert model.config._attn_implementation == "eager"
    np.testing.assert_allclose(result.induction, ref.induction, rtol=1e-5)


def test_sequence_masses_average_to_the_point_estimates(case, batch):
    """Per-sequence class masses (for the bootstrap): their means are the captured masses, and the
    per-sequence first-token mass is the eager attention row's key 0."""
    name, model, family, result, _ = case
    n_layers, n_heads, _ = families.dims(model)
    per = result.sequence_masses
    assert per.shape == (16, n_layers, n_heads, len(MASS_FIELDS)) and per.dtype == np.float32
    v = batch.valid
    assert np.array_equal(result.valid, v) and result.seq_len == batch.seq_len
    for c, field in enumerate(MASS_FIELDS):
        mean = per[v, ..., c].mean(0) if field in ("induction", "duplicate-token") else per[..., c].mean(0)
        np.testing.assert_allclose(mean, result.mass(field), rtol=1e-5, atol=1e-7, err_msg=f"{name} {field}")
    assert (per[~v, ..., :2] == 0).all()  # induction/duplicate-token weighted by validity
    row0 = _eager_last_row(model, family, batch)[..., 0]  # (N, L, H)
    np.testing.assert_allclose(per[..., CLASSES.index("first-token")], row0, rtol=1e-4, atol=1e-6)


def test_point_estimates_unchanged_by_keeping_sequence_masses(batch):
    model = _sharpen(tiny_model("gpt_neox"))
    family = families.get("gpt_neox")
    with_seq = capture.run(model, family, batch, batch_size=5, keep_head_outputs=False, progress=False)
    without = capture.run(model, family, batch, batch_size=5, keep_head_outputs=False, progress=False,
                          keep_sequence_masses=False)
    assert without.sequence_masses is None and with_seq.sequence_masses is not None
    for field in (*MASS_FIELDS, "baseline_uniform"):
        np.testing.assert_array_equal(with_seq.mass(field), without.mass(field), err_msg=field)


def test_class_masses_roundtrip(case, batch, tmp_path):
    from headtrace.cell import bootstrap

    _, _, _, result, _ = case
    path = tmp_path / "class_masses.safetensors"
    capture.save_class_masses(result, path)
    masses, valid, seq_len = bootstrap.load_masses(path)
    np.testing.assert_array_equal(masses, result.sequence_masses)
    assert np.array_equal(valid, batch.valid) and seq_len == batch.seq_len
    capture.save_head_outputs(result, tmp_path / "heads.safetensors")
    with pytest.raises(ValueError, match="not a class-mass file"):
        bootstrap.load_masses(tmp_path / "heads.safetensors")


def test_sliding_window_layers_put_no_mass_outside_the_window(batch):
    """Olmo 3's sliding-window layers: the captured query row honours the window (keys before
    T - window carry no mass, e.g. the first token), the full-attention layers do not; both as eager."""
    from tiny import SLIDING_WINDOW

    model = _sharpen(tiny_model("olmo3"))
    family = families.get("olmo3")
    t = batch.seq_len
    assert t > SLIDING_WINDOW + 6  # the first token and the sampled baseline reach outside the window
    result = capture.run(model, family, batch, batch_size=16, progress=False)
    row = _eager_last_row(model, family, batch)  # (N, L, H, T)
    for layer, kind in enumerate(model.config.layer_types):
        outside = row[:, layer, :, : t - SLIDING_WINDOW]
        if kind == "sliding_attention":
            assert np.all(outside == 0) and np.all(result.first_token[layer] == 0)
            assert np.all(result.sequence_masses[:, layer, :, CLASSES.index("first-token")] == 0)
        else:
            assert outside.sum() > 0 and np.all(result.first_token[layer] > 0)


def test_gpt2_layer_scaling_is_honoured(batch):
    """CRFM GPT-2 scales layer l's scores by 1/(l+1) (scale_attn_by_inverse_layer_idx): capture reads
    the layer's own scaling, so it matches eager with the flag on and differs from the flag off."""
    model = _sharpen(tiny_model("gpt2"))
    family = families.get("gpt2")
    on = capture.run(model, family, batch, batch_size=16, progress=False, keep_head_outputs=False)
    ref = _eager_masses(model, family, batch)
    np.testing.assert_allclose(on.previous_token, ref["previous-token"], rtol=1e-4, atol=1e-6)
    for attn in family.attention_modules(model):
        attn.scaling = attn.head_dim ** -0.5
    off = capture.run(model, family, batch, batch_size=16, progress=False, keep_head_outputs=False)
    assert not np.allclose(off.previous_token[1], on.previous_token[1], atol=1e-4)


def test_bloom_is_captured_by_a_hook_on_its_own_probabilities(batch):
    """BLOOM's attention bypasses the registry: capture keeps its implementation (eager), reads the
    probabilities at attention_dropout's input, and its per-head outputs are dense's input slices,
    head-major (as _merge_heads lays them out)."""
    model = _sharpen(tiny_model("bloom"))
    family = families.get("bloom")
    assert family.capture == families.PROBS_HOOK
    impl = model.config._attn_implementation
    result = capture.run(model, family, batch, batch_size=16, progress=False)
    assert model.config._attn_implementation == impl
    seen = {}
    hooks = [a.dense.register_forward_pre_hook(lambda m, args, _l=l: seen.__setitem__(_l, args[0][:, -1].clone()))
             for l, a in enumerate(family.attention_modules(model))]
    try:
        with torch.no_grad():
            model(torch.from_numpy(batch.tokens))
    finally:
        for h in hooks:
            h.remove()
    n, n_layers, n_heads, d_head = result.head_outputs.shape
    for layer in range(n_layers):
        z = seen[layer].numpy()
        for head in range(n_heads):
            np.testing.assert_allclose(result.head_outputs[:, layer, head], z[:, head * d_head:(head + 1) * d_head],
                                       rtol=1e-5, atol=1e-6)


def test_bloom_with_sliced_dense_is_refused_by_name(batch):
    """pretraining_tp > 1 with slow_but_exact applies dense in slices, which no hook on dense sees."""
    model = tiny_model("bloom")
    model.config.pretraining_tp, model.config.slow_but_exact = 2, True
    for attn in families.get("bloom").attention_modules(model):
        attn.pretraining_tp, attn.slow_but_exact = 2, True
    with pytest.raises(ValueError, match=r"model family 'bloom' is not supported in this configuration: "
                                         r"pretraining_tp = 2 with slow_but_exact"):
        capture.run(model, families.get("bloom"), batch, batch_size=16, progress=False)


def test_screen_says_which_classes_a_windowed_layer_cannot_see():
    """Olmo 3 with a window of 16 on layer 0 (layer 1 full): the window is read from the config per
    layer, carried in the attention table, and the screen lists per head the classes whose keys lie
    outside it (wholly: mass 0 by construction; partly: lowered), matching eager's zeros."""
    from tiny import SLIDING_WINDOW

    from headtrace.cell import screen as screen_mod

    model = _sharpen(tiny_model("olmo3"))
    family = families.get("olmo3")
    assert families.layer_windows(model.config) == [SLIDING_WINDOW, None]
    t = 64
    # ab in [10, 32): induction (ab+1) and duplicate (ab) keys are at least 31 from the query -> all out
    far = synthetic.make_batch(n_sequences=16, seq_len=t, token_range=(2, 128), ab_range=(10, 32))
    # ab in [40, 57): some induction / duplicate keys within 16 of the query, some not -> partly out
    near = synthetic.make_batch(n_sequences=16, seq_len=t, token_range=(2, 128), ab_range=(40, 57))
    d_ind = t - 1 - (near.ab[near.valid] + 1)
    assert (d_ind >= SLIDING_WINDOW).any() and (d_ind < SLIDING_WINDOW).any()
    for batch, wholly, partly in (
        (far, ["induction", "duplicate-token", "first-token"], []),
        (near, ["first-token"], ["induction", "duplicate-token"]),
    ):
        result = capture.run(model, family, batch, batch_size=16, progress=False)
        assert result.windows == [SLIDING_WINDOW, None]
        assert result.classes_out_of_window(0) == wholly and result.classes_out_of_window(0, partly=True) == partly
        assert result.classes_out_of_window(1) == [] and result.classes_out_of_window(1, partly=True) == []
        for cls in wholly:  # mass 0 by construction, as in eager
            assert np.all(result.mass(cls)[0] == 0)
        row = _eager_last_row(model, family, batch)[:, 0]  # (N, H, T) of the windowed layer
        assert np.all(row[:, :, : t - SLIDING_WINDOW] == 0) and np.all(row[:, :, t - SLIDING_WINDOW:].sum(-1) > 0.99)
        att = capture.attention_table(result, "tiny-olmo3", "step0", 0)
        scr = screen_mod.screen(att, baseline="clean")
        tables.conform(scr, "screen")
        for r in scr.iter_rows(named=True):
            windowed = r["layer"] == 0
            assert r["attn_window"] == (SLIDING_WINDOW if windowed else None)
            assert r["classes_out_of_window"] == (wholly if windowed else [])
            assert r["classes_partly_out_of_window"] == (partly if windowed else [])


def test_screen_of_a_table_without_window_columns_says_unknown(case):
    """Full-attention families get empty lists; an attention table from before the window columns
    gets nulls (unknown), not empty lists."""
    from headtrace.cell import screen as screen_mod

    name, model, family, result, _ = case
    att = capture.attention_table(result, f"tiny-{name}", "step0", 0)
    scr = screen_mod.screen(att)
    if name != "olmo3":
        assert scr["attn_window"].is_null().all()
        assert all(v == [] for v in scr["classes_out_of_window"].to_list())
    old = screen_mod.screen(att.drop(list(screen_mod.WINDOW_COLUMNS)))
    for col, dtype in screen_mod.WINDOW_COLUMNS.items():
        assert old[col].dtype == dtype and old[col].is_null().all()
