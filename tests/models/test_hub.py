"""hub.load_model / fetch against a local Hugging Face cache (no network).

The fixture lays out a cache exactly as huggingface_hub writes it:
``models--org--tiny/{refs/<branch>, snapshots/<commit>/...}`` with two branches holding
different weights, so the test checks that a branch name pins the right snapshot.
"""
from __future__ import annotations

import pytest
import torch
from helpers.checkpoints import add_revision as _add_revision
from helpers.checkpoints import commit as _commit
from helpers.checkpoints import same_weights as _same
from tiny import tiny_model

from headtrace.models import hub

REPO = "org/tiny"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf") / "hub"
    models = {"step0": tiny_model("gpt_neox", seed=0), "step1000": tiny_model("gpt_neox", seed=1)}
    for branch, m in models.items():
        _add_revision(root, REPO, branch, m)
    _add_revision(root, "org/binonly", "main", tiny_model("gpt_neox", seed=2), safetensors=False)
    return root, models


@pytest.mark.parametrize("branch", ["step0", "step1000"])
def test_revision_pins_weights(cache, branch):
    root, models = cache
    model, family = hub.load_model("hub", REPO, branch, offline=True, cache_dir=str(root))
    assert family == "gpt_neox"
    assert not model.training
    assert _same(model, models[branch])
    other = "step1000" if branch == "step0" else "step0"
    assert not _same(model, models[other])


def test_commit_hash_and_env_cache(cache, monkeypatch):
    """A commit hash works as revision, and HF_HUB_CACHE is honoured when cache_dir is not given."""
    root, models = cache
    import huggingface_hub.constants as c

    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(root))  # constants are read at import
    model, _ = hub.load_model("hub", REPO, _commit(REPO + "step1000"), offline=True)
    assert _same(model, models["step1000"])


def test_dtype_and_family(cache):
    root, models = cache
    model, family = hub.load_model("hub", REPO, "step0", family="gpt_neox", dtype="bf16", cache_dir=str(root))
    assert family == "gpt_neox" and next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown model family"):
        hub.load_model("hub", REPO, "step0", family="nope", cache_dir=str(root))
    with pytest.raises(ValueError, match="dtype"):
        hub.load_model("hub", REPO, "step0", dtype="fp8", cache_dir=str(root))


def test_missing_revision_names_model_and_revision(cache):
    root, _ = cache
    with pytest.raises(hub.CheckpointError) as err:
        hub.load_model("hub", REPO, "step999", offline=True, cache_dir=str(root))
    assert "org/tiny" in str(err.value) and "step999" in str(err.value)
    with pytest.raises(hub.CheckpointError, match="org/absent.*step1"):
        hub.load_model("hub", "org/absent", "step1", offline=True, cache_dir=str(root))


def test_bin_only_loads_through_pickle(cache):
    """A pickle-only revision loads (checked, weights_only) and gives the same weights."""
    root, _ = cache
    model, family = hub.load_model("hub", "org/binonly", "main", offline=True, cache_dir=str(root))
    assert family == "gpt_neox" and _same(model, tiny_model("gpt_neox", seed=2))


def test_local_and_toy(tmp_path):
    m = tiny_model("olmo", seed=3)
    path = tmp_path / "resources" / "checkpoints" / "toy-olmo" / "step5"
    m.save_pretrained(path, safe_serialization=True)
    model, family = hub.load_model("toy", str(path), "step5")
    assert family == "olmo" and _same(model, m)
    loaded, fam, dev, bs = hub.load_for_cell({"source": "local", "path": str(path.parent), "family": "olmo"},
                                             "toy-olmo", "step5", "cpu", "auto")
    assert fam.name == "olmo" and dev.type == "cpu" and bs == 16 and _same(loaded, m)
    with pytest.raises(hub.CheckpointError, match="no config.json"):
        hub.load_model("local", str(tmp_path), None)


def test_resolve_device_and_batch_size():
    assert hub.resolve_device("cpu").type == "cpu"
    assert hub.resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            hub.resolve_device("cuda")
    m = tiny_model("gpt_neox")
    assert hub.auto_batch_size(m, 256, "cpu", 7) == 7
    assert hub.auto_batch_size(m, 256, "cpu", "auto") == 16


def test_fetch_downloads_pickles_only_without_safetensors(cache, monkeypatch):
    """fetch() lists the revision's files first: safetensors patterns when it has any, pickle patterns
    (never other *.bin) only when it has none; no weights at all is a CheckpointError naming the
    revision (huggingface_hub stubbed: no network)."""
    root, _ = cache
    snaps = {repo: next((root / f"models--org--{repo}" / "snapshots").iterdir()) for repo in ("tiny", "binonly")}
    listings = {"org/tiny": ["config.json", "model.safetensors", "pytorch_model.bin", "training_args.bin"],
                "org/binonly": ["config.json", "pytorch_model.bin", "optimizer.pt"],
                "org/none": ["config.json", "flax_model.msgpack"]}
    seen = {}

    def fake_snapshot_download(repo_id, **kw):
        seen[repo_id] = kw
        return str(snaps[repo_id.split("/")[1]])

    class FakeApi:
        def list_repo_files(self, repo_id, revision=None):
            return listings[repo_id]

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    hub.fetch("org/tiny", "step0")
    assert seen["org/tiny"]["allow_patterns"] == hub.ALLOW_PATTERNS
    assert not any(p.endswith(".bin") for p in hub.ALLOW_PATTERNS)
    hub.fetch("org/binonly", "main")
    pats = seen["org/binonly"]["allow_patterns"]
    assert pats == hub.PICKLE_PATTERNS and seen["org/binonly"]["revision"] == "main"
    import fnmatch
    wanted = [f for f in listings["org/binonly"] + ["training_args.bin", "pytorch_model-00001-of-00002.bin",
                                                    "pytorch_model.bin.index.json"]
              if any(fnmatch.fnmatch(f, p) for p in pats)]
    assert wanted == ["config.json", "pytorch_model.bin", "pytorch_model-00001-of-00002.bin",
                      "pytorch_model.bin.index.json"]
    with pytest.raises(hub.CheckpointError, match=r"org/none.*'main'.*no weights.*flax_model.msgpack"):
        hub.fetch("org/none", "main")
    assert "org/none" not in seen  # refused before anything is downloaded


def test_fetch_of_a_branch_the_hub_does_not_serve_names_it_and_the_listing_command(monkeypatch):
    """A branch missing on the Hub (e.g. one of a reconstructed suite list) fails its fetch naming the
    branch and `headtrace revisions HF_ID --list`, a command that exists. No network: huggingface_hub's
    own client gets a transport that answers as the Hub does for an unknown revision (404,
    X-Error-Code RevisionNotFound), so the error is the one huggingface_hub raises itself."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    from headtrace import cli

    asked = []

    def hub_without_the_branch(request):
        if "/api/models/allenai/Olmo-3-1025-7B/" not in str(request.url):
            return httpx2.Response(404, request=request)  # anything else the client asks on the side
        asked.append(str(request.url))
        return httpx2.Response(404, headers={"X-Error-Code": "RevisionNotFound",
                                             "X-Error-Message": "Invalid rev id: stage1-step999"}, request=request)

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    _http.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(hub_without_the_branch)))
    try:
        with pytest.raises(hub.CheckpointError) as err:
            hub.fetch("allenai/Olmo-3-1025-7B", "stage1-step999")
    finally:
        _http.set_client_factory(_http.default_client_factory)
    msg = str(err.value)
    assert asked and all("/stage1-step999" in url for url in asked)  # the file list was asked of the stand-in
    assert "revision 'stage1-step999'" in msg and "no branch, tag or commit 'stage1-step999'" in msg
    assert "`headtrace revisions allenai/Olmo-3-1025-7B --list`" in msg
    from huggingface_hub.errors import RevisionNotFoundError
    assert isinstance(err.value.__cause__, RevisionNotFoundError)
    args = cli.build_parser().parse_args(["revisions", "allenai/Olmo-3-1025-7B", "--list"])
    assert args.list and args.func is cli._cmd_revisions
