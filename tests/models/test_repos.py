"""A hub revision that names its own repository (TinyLlama's milestone checkpoints): the config's
``models.{m}.repos`` map, its checks, and its resolution in the fetch rule, the cell and provenance.

The Hugging Face cache is laid out as huggingface_hub writes it (tests/models/test_hub.py); the download
is stubbed, so nothing reaches the network.
"""
from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers.checkpoints import add_revision as _add_revision
from helpers.checkpoints import commit as _commit
from helpers.checkpoints import same_weights as _same
from tiny import tiny_model

from headtrace.models import hub, layout, provenance
from headtrace.panel import config as panel
from headtrace.panel import refine

ROOT = Path(__file__).resolve().parents[2]
BRANCHES = "org/llama-intermediate"
MILESTONE = "org/llama-step-955k-token-2T"
PINNED = "org/llama-step-1431k-3T"


def _cfg(**over) -> dict:
    spec = {"source": "hub", "hf_id": BRANCHES, "family": "llama", "tokens_from_name": True,
            "revisions": ["step-5k-token-10B", "step-955k-token-2T", "step-1431k-token-3T"],
            "repos": {"step-955k-token-2T": MILESTONE, "step-1431k-token-3T": PINNED + "@refs/pr/1"}}
    spec.update(over)
    return {"models": {"tl": {k: v for k, v in spec.items() if v is not None}},
            "probe": {"n_sequences": 8, "seq_len": 64, "token_range": [3, 100], "seed": 0, "ab_range": [5, 40],
                      "prepend_bos": False, "bos_token_id": None}}


# ---- the config ----------------------------------------------------------------------------


def test_resolution_keeps_the_panel_name():
    cfg = _cfg()
    panel.check(cfg)
    assert panel.hub_source(cfg, "tl", "step-5k-token-10B") == (BRANCHES, "step-5k-token-10B")
    assert panel.hub_source(cfg, "tl", "step-955k-token-2T") == (MILESTONE, "main")
    assert panel.hub_source(cfg, "tl", "step-1431k-token-3T") == (PINNED, "refs/pr/1")
    # the panel: one model, its revisions in order, tokens from the panel's names
    assert [c.revision for c in panel.cells(cfg)] == cfg["models"]["tl"]["revisions"]
    assert [c.tokens for c in panel.cells(cfg)] == [10 * 10**9, 2 * 10**12, 3 * 10**12]


def test_only_repos_without_hf_id():
    cfg = _cfg(hf_id=None, revisions=["step-955k-token-2T", "step-1431k-token-3T"])
    panel.check(cfg)
    assert panel.hub_source(cfg, "tl", "step-955k-token-2T") == (MILESTONE, "main")


@pytest.mark.parametrize("over, message", [
    (dict(hf_id=None), r"models\.tl\.repos: revision 'step-5k-token-10B' has no repository here and the model has no hf_id"),
    (dict(hf_id=None, repos=None), r"models\.tl: source 'hub' needs the key 'hf_id' \(or 'repos'"),
    (dict(repos={"step-950k-token-2T": MILESTONE}), r"models\.tl\.repos\.step-950k-token-2T: not one of models\.tl\.revisions"),
    (dict(repos={"step-955k-token-2T": "no-owner"}), r"models\.tl\.repos\.step-955k-token-2T: 'no-owner' is not a hub repository id"),
    (dict(repos={"step-955k-token-2T": "org/x@a@b"}), r"models\.tl\.repos\.step-955k-token-2T: .* is not a hub repository id"),
    (dict(repos={}), r"models\.tl\.repos: a map revision name"),
    (dict(source="local", path="/nowhere", hf_id=None), r"models\.tl\.repos: only a hub model"),
    # the repositories' revisions still follow the training order of the panel's names
    (dict(revisions=["step-955k-token-2T", "step-5k-token-10B", "step-1431k-token-3T"]), r"models\.tl\.revisions: not in training order"),
])
def test_bad_repos_name_the_key(over, message):
    with pytest.raises(panel.ConfigError, match=message):
        panel.check(_cfg(**over))


def test_schema_checks_the_repository_ids():
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    jsonschema.validate(_cfg(), schema)
    for bad in ({"step-955k-token-2T": "org/x y"}, {"step-955k-token-2T": 7}, {}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(_cfg(repos=bad), schema)


def test_refinement_needs_hf_id():
    cfg = _cfg(hf_id=None, revisions=["step-955k-token-2T", "step-1431k-token-3T"], refine={"enabled": True})
    with pytest.raises(panel.ConfigError, match=r"models\.tl\.refine: refinement adds branches of hf_id"):
        refine.check(cfg)


def test_adding_a_revision_changes_no_other_cells_params():
    cfg = _cfg()
    before = {r: (panel.load_spec(cfg, "tl", r), panel.hub_source(cfg, "tl", r)) for r in panel.revisions_of(cfg, "tl")}
    grown = copy.deepcopy(cfg)
    spec = grown["models"]["tl"]
    spec["revisions"].insert(2, "step-1195k-token-2.5T")
    spec["repos"]["step-1195k-token-2.5T"] = "org/llama-step-1195k-token-2.5T"
    panel.check(grown)
    for r, params in before.items():
        assert (panel.load_spec(grown, "tl", r), panel.hub_source(grown, "tl", r)) == params
    assert panel.load_spec(cfg, "tl", "step-5k-token-10B") == {"source": "hub", "hf_id": BRANCHES, "family": "llama"}
    assert panel.load_spec(cfg, "tl", "step-955k-token-2T")["repos"] == {"step-955k-token-2T": MILESTONE}
    assert "revisions" not in panel.load_spec(cfg, "tl") and len(panel.load_spec(cfg, "tl")["repos"]) == 2


def test_shipped_tinyllama_suite_reads_milestones_from_their_repositories():
    cfg = yaml.safe_load((ROOT / "config" / "suites" / "tinyllama.yaml").read_text())
    panel.check(cfg)
    (model,) = panel.model_names(cfg)
    revisions = panel.revisions_of(cfg, model)
    repos = cfg["models"][model]["repos"]
    assert set(repos) < set(revisions) and revisions[-1] in repos
    assert panel.hub_source(cfg, model, revisions[0]) == (cfg["models"][model]["hf_id"], revisions[0])
    assert panel.hub_source(cfg, model, revisions[-1]) == ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "main")
    tokens = [c.tokens for c in panel.cells(cfg)]
    assert tokens == sorted(tokens) and tokens[-1] == 3 * 10**12


def test_layout_parse_repo():
    assert layout.parse_repo("a/b") == ("a/b", "main")
    assert layout.parse_repo("a/b@0123abc") == ("a/b", "0123abc")
    with pytest.raises(ValueError):
        layout.hub_checkpoint({"repos": {"x": "a/b"}}, "y")


# ---- fetch, load, provenance against a local cache ------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf") / "hub"
    models = {"step-5k-token-10B": tiny_model("llama", seed=0), "step-955k-token-2T": tiny_model("llama", seed=1),
              "step-1431k-token-3T": tiny_model("llama", seed=2)}
    _add_revision(root, BRANCHES, "step-5k-token-10B", models["step-5k-token-10B"])
    _add_revision(root, MILESTONE, "main", models["step-955k-token-2T"])
    _add_revision(root, PINNED, "main", tiny_model("llama", seed=3))  # main is another checkpoint
    # a refs/pr/N pin (a safetensors conversion pull request) is cached as refs/refs/pr/N
    (root / ("models--" + PINNED.replace("/", "--")) / "refs" / "refs" / "pr").mkdir(parents=True)
    _add_revision(root, PINNED, "refs/pr/1", models["step-1431k-token-3T"])
    return root, models


@pytest.mark.parametrize("revision, repo, hub_revision", [
    ("step-5k-token-10B", BRANCHES, "step-5k-token-10B"),
    ("step-955k-token-2T", MILESTONE, "main"),
    ("step-1431k-token-3T", PINNED, "refs/pr/1"),
])
def test_cell_loads_the_revisions_own_repository(cache, revision, repo, hub_revision):
    root, models = cache
    load = panel.load_spec(_cfg(), "tl", revision)
    source, folder, commit = hub.cell_checkpoint(load, "tl", revision, cache_dir=str(root))
    assert source == "hub" and commit == _commit(repo + hub_revision)
    assert ("models--" + repo.replace("/", "--")) in folder
    net, fam, _, _ = hub.load_for_cell(load, "tl", revision, "cpu", 4, seq_len=64, cache_dir=str(root),
                                         token_range=(3, 100))
    assert fam.name == "llama" and _same(net, models[revision])
    row = provenance.cell_table(load, "tl", revision, 1, cache_dir=str(root)).row(0, named=True)
    assert (row["revision"], row["hf_id"], row["commit"]) == (revision, repo, commit)


def test_cell_of_an_unlisted_revision_without_hf_id_names_the_model(cache):
    root, _ = cache
    with pytest.raises(hub.CheckpointError, match="hub model 'tl': revision 'step-5k-token-10B' is not in repos"):
        hub.cell_checkpoint({"source": "hub", "repos": {"x": MILESTONE}}, "tl", "step-5k-token-10B",
                            cache_dir=str(root))


def test_fetch_rule_downloads_the_revisions_repository(cache, monkeypatch, tmp_path):
    """workflow/scripts/fetch.py with the rule's params: the repository at main or its pin."""
    import runpy
    import types

    import huggingface_hub

    root, _ = cache
    seen = []

    def fake_snapshot_download(repo_id, **kw):
        seen.append((repo_id, kw["revision"]))
        return str(next((root / ("models--" + repo_id.replace("/", "--")) / "snapshots").iterdir()))

    class FakeApi:  # fetch lists the revision's files first (safetensors or pickle weights)
        def list_repo_files(self, repo_id, revision=None):
            snap = next((root / ("models--" + repo_id.replace("/", "--")) / "snapshots").iterdir())
            return [p.name for p in snap.iterdir()]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    cfg = _cfg()
    for revision in panel.revisions_of(cfg, "tl"):
        hf_id, hub_revision = panel.hub_source(cfg, "tl", revision)
        smk = types.SimpleNamespace(params=types.SimpleNamespace(hf_id=hf_id, hub_revision=hub_revision),
                                    wildcards=types.SimpleNamespace(model="tl", revision=revision),
                                    log=[str(tmp_path / f"{revision}.log")])
        runpy.run_path(str(ROOT / "workflow" / "scripts" / "fetch.py"), init_globals={"snakemake": smk})
    assert seen == [(BRANCHES, "step-5k-token-10B"), (MILESTONE, "main"), (PINNED, "refs/pr/1")]
