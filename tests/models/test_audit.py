"""Audit before download (headtrace.models.audit, `headtrace audit`, `headtrace revisions
--log-spaced`) on recorded Hub metadata (tests/fixtures/audit/: the objects list_repo_tree returns,
in the Hub API's JSON, mirroring EleutherAI/pythia#205 and #206; make_recordings.py says how)."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from huggingface_hub.hf_api import RepoFile

from headtrace import cli
from headtrace.core import revisions as rv
from headtrace.models import audit

FIX = Path(__file__).parents[1] / "fixtures"
R28 = FIX / "audit" / "pythia-2.8b-like.json"
R12 = FIX / "audit" / "pythia-12b-like.json"
PROPOSED = ["step0", "step4", "step32", "step128", "step1000", "step5000", "step26000"]


def raw_groups(path: Path) -> list[set[str]]:
    """Branches with identical weight-file sha256 sets, read from the raw JSON (not through audit)."""
    data = json.loads(path.read_text())
    by: dict[tuple, set[str]] = {}
    for b, entries in data["trees"].items():
        shas = tuple(sorted(e["lfs"]["oid"] for e in entries
                            if e.get("lfs") and (e["path"].endswith(".safetensors") or e["path"].endswith(".bin"))))
        if shas:
            by.setdefault(shas, set()).add(b)
    return [g for g in by.values() if len(g) > 1]


def test_recording_loads_as_huggingface_hub_objects():
    hf_id, trees = audit.load_recording(R28)
    assert hf_id == "EleutherAI/pythia-2.8b" and len(trees) == 155
    f = next(e for e in trees["step4"] if e.path == "model.safetensors")
    assert isinstance(f, RepoFile) and len(f.lfs.sha256) == 64 and f.lfs.size == 5_684_243_456


def test_audit_reproduces_the_recorded_duplicate_groups():
    _, trees = audit.load_recording(R28)
    table = audit.audit(trees)
    assert table["branch"].to_list() == rv.sort_revisions(trees)  # training order, main last
    groups = [set(g) for g in audit.duplicate_groups(table)]
    assert sorted(map(sorted, groups)) == sorted(map(sorted, raw_groups(R28)))
    big = next(g for g in groups if "main" in g)
    assert len(big) == 77 and set(PROPOSED) <= big  # 76 branches serve main's model.safetensors (#205)
    assert sorted(len(g) for g in groups) == [10, 77]  # and ten share a second blob
    by = {r["branch"]: r for r in table.iter_rows(named=True)}
    assert all(by[b]["duplicate_of"] == "main" and by[b]["status"] == "duplicate" for b in PROPOSED)
    assert by["step143000"]["status"] == "final alias" and "step143000" not in audit.flagged_branches(table)
    assert by["step3000"]["no_weights"] and by["step3000"]["status"] == "no weights"
    second = next(g for g in audit.duplicate_groups(table) if "main" not in g)
    assert by[second[-1]]["status"] == "original" and all(by[b]["duplicate_of"] == second[-1] for b in second[:-1])
    assert len(audit.flagged_branches(table)) == 75 + 9 + 1


def test_audit_finds_the_final_first_shard_served_by_two_branches():
    _, trees = audit.load_recording(R12)
    table = audit.audit(trees)
    by = {r["branch"]: r for r in table.iter_rows(named=True)}
    for b in ("step50000", "step58000"):  # #206
        assert by[b]["shares_shard_with"] == ["main"] and by[b]["shared_files"] == ["pytorch_model-00001-of-00003.bin"]
        assert by[b]["status"] == "shares shard" and by[b]["format"] == "pickle" and by[b]["n_files"] == 3
    assert [b for b, r in by.items() if r["status"] in ("ok", "original", "final alias")] == [
        "step48000", "step49000", "step51000", "step57000", "step59000", "step143000", "main"]
    assert audit.duplicate_groups(table) == [["step143000", "main"]]


def test_safetensors_win_and_non_lfs_files_use_their_blob_id():
    entries = [RepoFile(path="pytorch_model.bin", size=10, oid="a" * 40, lfs={"oid": "1" * 64, "size": 10, "pointerSize": 1}),
               RepoFile(path="model.safetensors", size=5, oid="b" * 40),
               RepoFile(path="sub/model.safetensors", size=5, oid="c" * 40)]
    assert audit.branch_weights(entries) == ("safetensors", {"model.safetensors": (f"git:{'b' * 40}", 5)})
    assert audit.branch_weights(entries[:1]) == ("pickle", {"pytorch_model.bin": ("1" * 64, 10)})
    assert audit.branch_weights([RepoFile(path="config.json", size=1, oid="d" * 40)]) == (None, {})


def test_recording_roundtrip(tmp_path):
    hf_id, trees = audit.load_recording(R12)
    audit.save_recording(trees, tmp_path / "r.json", hf_id)
    again = audit.load_recording(tmp_path / "r.json")
    assert again[0] == hf_id and audit.audit(again[1]).equals(audit.audit(trees))


def test_cli_audit_on_a_recording(capsys):
    assert cli.main(["audit", "EleutherAI/pythia-12b", "--recorded", str(R12)]) == 1
    out = capsys.readouterr().out
    assert "step50000  shares shard  pytorch_model-00001-of-00003.bin = main's" in out
    assert "identical weights: step143000, main" in out
    assert cli.main(["audit", "EleutherAI/pythia-12b", "--recorded", str(R12), "--revisions", "step48000",
                     "step49000", "main"]) == 0
    assert "0 flagged" in capsys.readouterr().out
    assert cli.main(["audit", "EleutherAI/pythia-12b", "--recorded", str(R28)]) == 2  # another repository's
    assert "is of EleutherAI/pythia-2.8b" in capsys.readouterr().err


def test_revisions_log_spaced_marks_or_skips_audited_duplicates(capsys):
    args = ["revisions", "EleutherAI/pythia-2.8b", "--log-spaced", "8", "--from-file", str(FIX / "pythia_branches.txt"),
            "--recorded", str(R28)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    for b in PROPOSED:  # today's proposal, each the final model (#205): marked
        assert f"      - {b}  # duplicate of main (audit)" in out
    assert "      - step143000\n" in out
    assert cli.main(args + ["--skip-duplicates"]) == 0
    cap = capsys.readouterr()
    chosen = [ln.strip()[2:] for ln in cap.out.splitlines() if ln.strip().startswith("- ")]
    _, trees = audit.load_recording(R28)
    bad = audit.flagged_branches(audit.audit(trees))
    assert len(chosen) == 8 and not set(chosen) & set(bad) and chosen[-1] == "step143000"
    assert "left out 85 branches" in cap.err
    assert cli.main(args + ["--no-audit"]) == 0 and "(audit)" not in capsys.readouterr().out


def test_check_before_fetch(monkeypatch):
    _, trees = audit.load_recording(R28)
    monkeypatch.setattr(audit, "fetch_trees", lambda hf_id, branches=None, token=None: {b: trees[b] for b in branches})
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    class Refs:  # HfApi().list_repo_refs(hf_id).branches, from the recording
        branches = [type("Ref", (), {"name": b})() for b in trees]

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_refs", lambda self, hf_id, **k: Refs())
    assert audit.check_before_fetch("EleutherAI/pythia-2.8b", "step4") == \
        "audit: EleutherAI/pythia-2.8b@step4: duplicate of main (audit)"
    assert audit.check_before_fetch("EleutherAI/pythia-2.8b", "step3000").endswith("no loadable weights (audit)")
    healthy = next(b for b in trees if b.startswith("step") and b not in audit.flagged_branches(audit.audit(trees)))
    assert audit.check_before_fetch("EleutherAI/pythia-2.8b", healthy) is None
    assert audit.check_before_fetch("EleutherAI/pythia-2.8b", "step143000") is None  # main's own step

    def down(*a, **k):
        raise OSError("no network")

    monkeypatch.setattr(audit, "fetch_trees", down)
    assert "skipped: OSError: no network" in audit.check_before_fetch("EleutherAI/pythia-2.8b", "step4")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert "HF_HUB_OFFLINE" in audit.check_before_fetch("EleutherAI/pythia-2.8b", "step4")


def test_config_block_writes_notes():
    block = rv.config_block("org/m", "m", ["step1", "step2"], notes={"step1": "duplicate of main (audit)"})
    assert "      - step1  # duplicate of main (audit)\n      - step2\n" in block


def test_audit_schema_is_stable():
    _, trees = audit.load_recording(R12)
    assert dict(audit.audit(trees).schema) == {k: v for k, v in audit.AUDIT_SCHEMA.items()}
    assert isinstance(audit.audit({}), pl.DataFrame) and audit.audit({}).is_empty()
