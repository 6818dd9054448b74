"""Trusting a checkpoint: pickle weights are loaded only after a static check and through
``weights_only``; a pickle with a code payload runs nothing and is refused by name; the loading
report is checked (missing / unexpected tensors fail, naming the revision); every family's tiny
model loads clean; a pickle copy (single or sharded) loads the same weights as its safetensors copy.
"""
from __future__ import annotations

import collections
import json
import pickle

import pytest
import torch
from helpers.checkpoints import Payload, save_pickle_copy
from helpers.checkpoints import same_weights as _same
from safetensors.torch import load_file, save_file
from tiny import FAMILY_NAMES, tiny_model

from headtrace.models import hub, weights


Point = collections.namedtuple("Point", "x")  # a harmless class, still not a tensor or plain container


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    m = tiny_model("gpt_neox", seed=4)
    m.save_pretrained(root / "st")
    return root, m


@pytest.mark.parametrize("shards", [1, 3])
def test_pickle_copy_loads_same_weights(checkpoint, shards):
    root, m = checkpoint
    folder = root / f"pk{shards}"
    files = save_pickle_copy(root / "st", folder, shards=shards)
    assert weights.weight_files(folder) == (weights.PICKLE, sorted(files))
    model, fam = hub.load_model("local", str(folder), f"pk{shards}")
    assert fam == "gpt_neox" and _same(model, m)


def test_safetensors_win_over_pickle(checkpoint, tmp_path):
    """A folder with both loads the safetensors: the pickle here holds other weights."""
    root, m = checkpoint
    folder = tmp_path / "both"
    save_pickle_copy(root / "st", folder)
    other = tiny_model("gpt_neox", seed=5)
    torch.save(other.state_dict(), folder / weights.PICKLE_SINGLE)
    for f in (root / "st").glob("*.safetensors"):
        (folder / f.name).write_bytes(f.read_bytes())
    assert weights.weight_files(folder)[0] == weights.SAFETENSORS
    model, _ = hub.load_model("local", str(folder), "both")
    assert _same(model, m) and not _same(model, other)


def test_legacy_pickle_format_loads(checkpoint, tmp_path):
    root, m = checkpoint
    save_pickle_copy(root / "st", tmp_path / "legacy", _use_new_zipfile_serialization=False)
    model, _ = hub.load_model("local", str(tmp_path / "legacy"), "legacy")
    assert _same(model, m)


@pytest.mark.parametrize("protocol", [2, 4])  # 2: GLOBAL opcodes (torch's default); 4: STACK_GLOBAL + memo
def test_code_payload_refused_by_name_runs_nothing(checkpoint, tmp_path, protocol):
    root, _ = checkpoint
    folder = tmp_path / "evil"
    save_pickle_copy(root / "st", folder)
    marker = tmp_path / "payload-ran"
    sd = torch.load(folder / weights.PICKLE_SINGLE, weights_only=True)
    sd["gpt_neox.extra"] = Payload(marker)
    torch.save(sd, folder / weights.PICKLE_SINGLE, pickle_protocol=protocol)
    assert "posix.system" in weights.pickle_globals(folder / weights.PICKLE_SINGLE)
    with pytest.raises(hub.CheckpointError) as err:
        hub.load_model("local", str(folder), "step-evil")
    msg = str(err.value)
    assert "step-evil" in msg and "pytorch_model.bin" in msg and "posix.system" in msg and "nothing" in msg
    assert not marker.exists()


def test_weights_only_unpickler_refuses_what_the_static_check_misses(checkpoint, tmp_path, monkeypatch):
    """Defence in depth: with the static check switched off, torch's restricted unpickler still
    refuses the payload (turned into a CheckpointError naming the file and the global)."""
    root, _ = checkpoint
    folder = tmp_path / "evil2"
    save_pickle_copy(root / "st", folder)
    marker = tmp_path / "payload-ran"
    torch.save({"w": torch.zeros(2), "x": Payload(marker)}, folder / weights.PICKLE_SINGLE)
    monkeypatch.setattr(weights, "check_pickle", lambda path: None)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # cannot override an explicit weights_only
    with pytest.raises(hub.CheckpointError, match=r"pytorch_model\.bin refused by torch's weights_only.*system"):
        weights.load_pickle(folder / weights.PICKLE_SINGLE)
    assert not marker.exists()


def test_static_check_allows_state_dicts_and_refuses_other_globals(tmp_path):
    good = {"a": torch.randn(2, 3), "b": torch.randn(4).to(torch.bfloat16), "c": torch.nn.Parameter(torch.ones(1)),
            "d": torch.arange(3)[1:]}
    torch.save(good, tmp_path / "good.bin")
    weights.check_pickle(tmp_path / "good.bin")
    assert set(weights.load_pickle(tmp_path / "good.bin")) == set(good)
    torch.save({"a": torch.zeros(1), "n": Point(1)}, tmp_path / "nt.bin")
    with pytest.raises(hub.CheckpointError, match=r"nt\.bin refused: it asks for test_weights\.Point"):
        weights.check_pickle(tmp_path / "nt.bin")
    (tmp_path / "raw.bin").write_bytes(pickle.dumps({"f": eval}, protocol=2))
    with pytest.raises(hub.CheckpointError, match="builtins.eval"):
        weights.check_pickle(tmp_path / "raw.bin")
    (tmp_path / "junk.bin").write_bytes(b"\x00not a pickle")
    with pytest.raises(hub.CheckpointError, match="junk.bin"):
        weights.check_pickle(tmp_path / "junk.bin")
    for name in ("torch._utils._rebuild_tensor_v2", "torch.FloatStorage", "torch.bfloat16", "collections.OrderedDict"):
        assert weights.allowed_global(name)
    for name in ("posix.system", "builtins.eval", "numpy.core.multiarray._reconstruct", "torch.load", "<dynamic global>"):
        assert not weights.allowed_global(name)


def test_weight_files_errors(tmp_path):
    (tmp_path / "optimizer.pt").write_bytes(b"")
    with pytest.raises(hub.CheckpointError, match=r"no weights in .*optimizer\.pt"):
        weights.weight_files(tmp_path)
    (tmp_path / "pytorch_model-00001-of-00002.bin").write_bytes(b"")
    with pytest.raises(hub.CheckpointError, match="without pytorch_model.bin.index.json"):
        weights.weight_files(tmp_path)
    (tmp_path / weights.PICKLE_INDEX).write_text(json.dumps({"weight_map": {
        "a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}))
    with pytest.raises(hub.CheckpointError, match="missing from .*pytorch_model-00002-of-00002.bin"):
        weights.weight_files(tmp_path)


@pytest.mark.parametrize("fmt", ["safetensors", "pickle"])
def test_missing_tensor_fails_naming_revision_and_tensor(checkpoint, tmp_path, fmt):
    root, _ = checkpoint
    folder = tmp_path / "broken"
    save_pickle_copy(root / "st", folder)  # the config
    sd = torch.load(folder / weights.PICKLE_SINGLE, weights_only=True)
    gone = "gpt_neox.layers.1.attention.dense.weight"
    del sd[gone]
    if fmt == "safetensors":
        (folder / weights.PICKLE_SINGLE).unlink()
        save_file(sd, folder / "model.safetensors", metadata={"format": "pt"})
    else:
        torch.save(sd, folder / weights.PICKLE_SINGLE)
    with pytest.raises(hub.CheckpointError) as err:
        hub.load_model("local", str(folder), "step-broken")
    msg = str(err.value)
    assert "step-broken" in msg and "1 missing" in msg and gone in msg


def test_unexpected_tensor_fails(checkpoint, tmp_path):
    root, _ = checkpoint
    folder = tmp_path / "extra"
    folder.mkdir()
    for f in (root / "st").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    sd = load_file(folder / "model.safetensors")
    sd["gpt_neox.layers.9.mlp.dense_h_to_4h.weight"] = torch.zeros(2, 2)
    save_file(sd, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(hub.CheckpointError, match=r"step-x.*1 unexpected: gpt_neox\.layers\.9"):
        hub.load_model("local", str(folder), "step-x")


def test_loading_report_ignores_tied_and_recomputed():
    cls = type("Fake", (), {"all_tied_weights_keys": {"lm_head.weight": "embed.weight"},
                            "_keys_to_ignore_on_load_unexpected": [r"attention\.bias"]})()
    hub.check_loading_info({"missing_keys": {"lm_head.weight", "m.layers.0.rotary_emb.inv_freq"},
                            "unexpected_keys": {"m.layers.0.attention.bias"}, "mismatched_keys": set(),
                            "error_msgs": []}, cls, "x")
    with pytest.raises(hub.CheckpointError, match=r"rev 'r1'.*3 missing: a, b, c"):
        hub.check_loading_info({"missing_keys": {"c", "a", "b"}}, cls, "model 'm' rev 'r1'")
    with pytest.raises(hub.CheckpointError, match=r"7 missing: k0, k1, k2, k3, k4 and 2 more"):
        hub.check_loading_info({"missing_keys": {f"k{i}" for i in range(7)}}, cls, "m")


def test_untied_unembedding_missing_fails(checkpoint, tmp_path):
    """GPT-NeoX lists lm_head as tieable, but its config does not tie it: a missing unembedding is
    missing, not tied."""
    root, _ = checkpoint
    folder = tmp_path / "nohead"
    folder.mkdir()
    for f in (root / "st").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    sd = load_file(folder / "model.safetensors")
    del sd["embed_out.weight"]  # the model calls it lm_head.weight
    save_file(sd, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(hub.CheckpointError, match=r"step-h.*1 missing: lm_head\.weight"):
        hub.load_model("local", str(folder), "step-h")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_family_loads_clean(family, tmp_path):
    """The loading report of every family's tiny model (tied embeddings included) is clean, in both
    formats."""
    m = tiny_model(family, seed=1)
    m.save_pretrained(tmp_path / "st")
    model, _ = hub.load_model("local", str(tmp_path / "st"), "st", family=family)
    assert _same(model, m)
    save_pickle_copy(tmp_path / "st", tmp_path / "pk")
    model, _ = hub.load_model("local", str(tmp_path / "pk"), "pk", family=family)
    assert _same(model, m)


def test_old_torch_refused_for_pickles(checkpoint, tmp_path, monkeypatch):
    root, _ = checkpoint
    save_pickle_copy(root / "st", tmp_path / "pk")
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    with pytest.raises(hub.CheckpointError, match=r"torch 2\.5\.1\+cpu is too old.*>= 2\.6.*CVE-2025-32434"):
        weights.load_pickle(tmp_path / "pk" / weights.PICKLE_SINGLE)


def test_fetch_fails_on_a_payload_pickle(checkpoint, tmp_path, monkeypatch):
    """The fetch job checks downloaded pickles statically: a payload fails the fetch, naming the
    revision, the file and the global, and runs nothing (huggingface_hub stubbed: no network)."""
    root, _ = checkpoint
    snap = tmp_path / "snap"
    save_pickle_copy(root / "st", snap)
    marker = tmp_path / "payload-ran"
    torch.save({"w": torch.zeros(1), "p": Payload(marker)}, snap / weights.PICKLE_SINGLE)

    class FakeApi:
        def list_repo_files(self, repo_id, revision=None):
            return [p.name for p in snap.iterdir()]

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(snap))
    with pytest.raises(hub.CheckpointError, match=r"org/evil' revision 'step9'.*pytorch_model\.bin refused.*posix\.system"):
        hub.fetch("org/evil", "step9")
    assert not marker.exists()
