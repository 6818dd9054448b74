"""The safetensors copy of a GGUF file (headtrace.models.dequantize) on hand-written GGUF files.

The fast half of the copy's tests: the cache logic (named by the digest, written once, under a temporary
name beside the copy, two jobs racing, a failure leaving nothing) with the conversion replaced by a
recorder, then the conversion itself on a one-layer llama written here (tests/helpers/gguf_files.py, a byte-level
tokenizer: about a second). The mutation check (docs/testing.md) runs these for every mutant of the
module; tests/test_gguf.py loads tiny llama GGUFs through the workflow's loader and compares logits.
"""
from __future__ import annotations

import hashlib
import json
import os
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import transformers
from helpers.gguf_files import llama, tiny_llama, write
from safetensors import safe_open
# imported here, not on first use, so that the mutation check's forked runs find them loaded
from transformers import LlamaForCausalLM  # noqa: F401
from transformers.integrations import ggml  # noqa: F401

from headtrace.models import dequantize, gguf
from headtrace.models.weights import CheckpointError


class Recorder:
    """Stands in for ``dequantize._convert``: records its arguments and writes one file."""

    def __init__(self, error: Exception | None = None):
        self.calls, self.error = [], error

    def __call__(self, file, head, out, what):
        self.calls.append((file, head, out, what, out.is_dir(), oct(out.stat().st_mode & 0o777)))
        (out / "model.safetensors").write_bytes(b"weights")
        if self.error:
            raise self.error


@pytest.fixture
def convert(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(dequantize, "_convert", rec)
    return rec


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_copy_is_named_by_the_digest_and_written_once(tmp_path, convert):
    f = llama(tmp_path / "m.gguf")
    root = tmp_path / "no" / "such" / "cache"  # made, parents and all
    dest = dequantize.dequantized(f, "m r1", root=root)
    digest = sha(f)
    assert dest == root / digest and sorted(p.name for p in root.iterdir()) == [digest]  # no temporary left
    ((file, head, out, what, was_dir, mode),) = convert.calls
    assert file == f and head == gguf.read(f) and what == "m r1"
    assert was_dir and mode == "0o700"  # written into a private temporary folder ...
    assert out.parent == root and out.name.startswith(f".{digest[:12]}-")  # ... beside the copy, hidden
    assert oct(dest.stat().st_mode & 0o777) == "0o755"  # ... then readable like any checkpoint
    assert (dest / "model.safetensors").read_bytes() == b"weights"
    manifest = {"gguf_file": str(f.resolve()), "gguf_sha256": digest, "architecture": "llama",
                "quantization": ["F32", "Q8_0"], "dtype": "float32", "transformers": transformers.__version__,
                "gguf": version("gguf")}
    assert (dest / dequantize.MANIFEST).read_text() == json.dumps(manifest, indent=1) + "\n"
    assert dequantize.dequantized(str(f), "m r1", root=str(root)) == dest and len(convert.calls) == 1  # read again
    g = write(tmp_path / "g.gguf", "qwen2")
    assert dequantize.dequantized(g, "g r1", root=root) == root / sha(g)  # a second copy beside the first
    assert sorted(p.name for p in root.iterdir()) == sorted([digest, sha(g)])


def test_a_digest_the_caller_has_and_the_default_cache(tmp_path, convert, monkeypatch):
    f = llama(tmp_path / "m.gguf")

    def unread(path):
        raise AssertionError("the digest was given: the file is not hashed again")

    monkeypatch.setattr(dequantize, "sha256_file", unread)
    monkeypatch.setenv(gguf.CACHE_ENV, str(tmp_path / "env-cache"))
    dest = dequantize.dequantized(f, "m r1", sha256="0" * 64)
    assert dest == tmp_path / "env-cache" / ("0" * 64)
    assert json.loads((dest / dequantize.MANIFEST).read_text())["gguf_sha256"] == "0" * 64
    assert convert.calls[0][2].name.startswith(".000000000000-")


def test_the_header_refusals_come_first_naming_the_revision(tmp_path, convert):
    path = write(tmp_path / "other.gguf", "rwkv7")
    with pytest.raises(CheckpointError, match=r"^m r1: other\.gguf is a GGUF of architecture 'rwkv7'"):
        dequantize.dequantized(path, "m r1", root=tmp_path / "cache")
    assert not convert.calls and not (tmp_path / "cache").exists()


def test_a_failed_conversion_leaves_nothing(tmp_path, monkeypatch):
    f = llama(tmp_path / "m.gguf")
    rec = Recorder(error=CheckpointError("m r1: transformers cannot read it"))
    monkeypatch.setattr(dequantize, "_convert", rec)
    with pytest.raises(CheckpointError, match="cannot read it"):
        dequantize.dequantized(f, "m r1", root=tmp_path / "cache")
    assert rec.calls and list((tmp_path / "cache").iterdir()) == []


def test_a_copy_another_job_renamed_first_is_kept(tmp_path, convert, monkeypatch):
    f = llama(tmp_path / "m.gguf")
    root = tmp_path / "cache"

    def racing(src, dst):  # the other job renamed its folder first
        Path(dst).mkdir()
        (Path(dst) / dequantize.MANIFEST).write_text('{"theirs": true}')
        raise OSError("Directory not empty")

    monkeypatch.setattr(os, "rename", racing)
    dest = dequantize.dequantized(f, "m r1", root=root)
    assert json.loads((dest / dequantize.MANIFEST).read_text()) == {"theirs": True}
    assert [p.name for p in root.iterdir()] == [dest.name]  # ours removed

    def failing(src, dst):
        raise OSError("No space left on device")

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError, match="No space left"):  # nothing there: the failure is not hidden
        dequantize.dequantized(f, "m r1", root=root / "other")
    assert list((root / "other").iterdir()) == []


def test_the_gguf_version_or_none(monkeypatch):
    from importlib.metadata import PackageNotFoundError

    assert dequantize._gguf_version() == version("gguf")

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(dequantize, "version", missing)
    assert dequantize._gguf_version() is None  # recorded as unknown, not an error


def test_an_architecture_no_family_adapter_reads_is_refused(tmp_path):
    path = write(tmp_path / "m.gguf", "mamba")  # transformers maps mamba; no headtrace family reads it
    with pytest.raises(CheckpointError, match=r"^m r1: m\.gguf is a 'mamba' model, which no headtrace family "
                                              r"adapter reads \(.+\)$"):
        dequantize.dequantized(path, "m r1", root=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_what_transformers_cannot_read_is_refused_naming_the_file(tmp_path):
    f = llama(tmp_path / "m.gguf")  # 300 tokens in the header, an embedding of 4: the shapes do not match
    with pytest.raises(CheckpointError) as e:
        dequantize.dequantized(f, "m r1", root=tmp_path / "cache")
    assert str(e.value).startswith(f"m r1: transformers cannot read {f}: RuntimeError: ")
    assert "\n" not in str(e.value)  # the first line of transformers' message only


def test_the_copy_holds_the_written_weights_in_float32_and_the_tokenizer(tmp_path):
    f = tmp_path / "tiny.gguf"
    written = tiny_llama(f)
    dest = dequantize.dequantized(f, "tiny r1", root=tmp_path / "cache")
    config = json.loads((dest / "config.json").read_text())
    assert "quantization_config" not in config  # the next load reads safetensors, not the GGUF again
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 1 and config["vocab_size"] == 258
    with safe_open(str(dest / "model.safetensors"), "np") as st:
        assert st.metadata() == {"format": "pt"}
        names = set(st.keys())
        values = {n: st.get_tensor(n) for n in names}
    assert "lm_head.weight" not in names and len(names) == 11  # the tied output embedding written once
    assert all(v.dtype == np.float32 for v in values.values())
    np.testing.assert_array_equal(values["model.embed_tokens.weight"], written["token_embd.weight"])
    np.testing.assert_array_equal(values["model.layers.0.mlp.down_proj.weight"], written["blk.0.ffn_down.weight"])
    np.testing.assert_array_equal(values["model.norm.weight"], written["output_norm.weight"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(dest)
    assert tokenizer.convert_ids_to_tokens(tokenizer("the")["input_ids"]) == ["t", "he"]


class _Stop(Exception):
    """Raised by a stand-in loader to end the conversion where the test has seen what it needs."""


def _loaders(monkeypatch, model=None, tokenizer=None, model_error=None, tokenizer_error=None):
    """transformers' two loaders replaced by recorders: what each was called with, then ``model`` /
    ``tokenizer`` returned or the error raised."""
    calls = {}

    def load(what, result, error):
        def from_pretrained(folder, **kwargs):
            calls[what] = (folder, kwargs)
            if error is not None:
                raise error
            return result
        return staticmethod(from_pretrained)

    monkeypatch.setattr(transformers.LlamaForCausalLM, "from_pretrained", load("model", model, model_error))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", load("tokenizer", tokenizer, tokenizer_error))
    return calls


def test_transformers_is_asked_for_float32_local_files_and_no_remote_code(tmp_path, monkeypatch):
    import torch

    f = llama(tmp_path / "m.gguf")
    calls = _loaders(monkeypatch, model=object(), tokenizer_error=_Stop())
    with pytest.raises(_Stop):
        dequantize.dequantized(f, "m r1", root=tmp_path / "cache")
    assert calls["model"] == (str(tmp_path), {"dtype": torch.float32, "trust_remote_code": False,
                                              "local_files_only": True, "gguf_file": "m.gguf"})
    assert calls["tokenizer"] == (str(tmp_path), {"trust_remote_code": False, "gguf_file": "m.gguf"})


@pytest.mark.parametrize("error, words", [(OSError("first line\nsecond line"), "OSError: first line"),
                                          (ValueError(), "ValueError: "), (KeyError("k"), "KeyError: 'k'")])
def test_a_loader_error_is_named_by_its_type_and_first_line(tmp_path, monkeypatch, error, words):
    f = llama(tmp_path / "m.gguf")
    _loaders(monkeypatch, model_error=error)
    with pytest.raises(CheckpointError) as e:
        dequantize.dequantized(f, "m r1", root=tmp_path / "cache")
    assert str(e.value) == f"m r1: transformers cannot read {f}: {words}"


def test_a_model_without_a_quantization_config_is_written_all_the_same(tmp_path, monkeypatch):
    """A loader that returns a model with no GGUF quantization config (and a tied output embedding): the
    copy is written, the tied tensor once."""
    cfg = transformers.LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(cfg)

    class Tokenizer:
        def save_pretrained(self, out):
            (Path(out) / "tokenizer.json").write_text("{}")

    f = llama(tmp_path / "m.gguf")
    _loaders(monkeypatch, model=model, tokenizer=Tokenizer())
    dest = dequantize.dequantized(f, "m r1", root=tmp_path / "cache")
    assert json.loads((dest / "config.json").read_text())["vocab_size"] == 16
    assert (dest / "tokenizer.json").read_text() == "{}"
    with safe_open(str(dest / "model.safetensors"), "np") as st:
        assert set(st.keys()) == set(model.state_dict()) - {"lm_head.weight"}
