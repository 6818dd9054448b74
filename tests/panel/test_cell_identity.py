"""A cell is keyed by the weights it reads (headtrace.panel.identity), not by the path text.

* the job parameter of a local cell names its weights' sha256, the provenance table's, and no path;
* hashes are cached by (file, size, mtime): an unchanged file is never read twice;
* a job whose weights changed after the DAG was built fails its cell, naming model, revision, folder;
* end to end: re-listing a finished run with a glob, or pointing at a copy of it, schedules no capture
  job; new weights under an old revision name schedule that cell's capture again, and only that.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny import tiny_model

from headtrace.models import provenance, weights
from headtrace.panel import identity

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def _config(path: str, revisions) -> dict:
    return {
        "models": {"tiny": {"source": "local", "path": path, "family": "auto", "tokens_per_step": 1000,
                            "revisions": revisions}},
        "probe": {"n_sequences": 16, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]},
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"enabled": False},
        "experiments": {"enabled": False},
    }


@pytest.fixture
def run(tmp_path):
    for step, seed in ((10, 1), (20, 2)):
        tiny_model("olmo", seed=seed, vocab_size=128).save_pretrained(tmp_path / "run" / f"checkpoint-{step}")
    return tmp_path


def test_a_local_cells_parameter_is_its_weights_not_its_path(run):
    folder = run / "run" / "checkpoint-20"
    cfg = _config(str(run / "run" / "{revision}"), ["checkpoint-10", "checkpoint-20"])
    cache = identity.HashCache(run / "cache.json")
    ident = identity.identity(cfg, "tiny", "checkpoint-20", cache)
    assert "path" not in ident and ident["source"] == "local" and ident["family"] == "auto"
    assert ident["weights_sha256"] == provenance.weights_hash(folder)[0]  # what the provenance table records
    assert ident != identity.identity(cfg, "tiny", "checkpoint-10", cache)
    # the same weights elsewhere: the same parameter
    shutil.copytree(run / "run", run / "copy")
    moved = _config(str(run / "copy"), ["checkpoint-10", "checkpoint-20"])
    assert identity.identity(moved, "tiny", "checkpoint-20", cache) == ident
    # the job finds the folder from the config
    assert identity.located(moved, "tiny", "checkpoint-20", ident)["path"] == str(run / "copy")
    # hub and toy models keep their spec: their name is their content (a pinned commit, the workflow's own)
    toy = {"models": {"t": {"source": "toy", "family": "olmo", "revisions": ["step0"]}}}
    assert identity.identity(toy, "t", "step0", cache) == {"source": "toy", "family": "olmo"}


def test_hashes_are_read_once_per_file_state(run, monkeypatch):
    calls = []
    real = weights.sha256_file
    monkeypatch.setattr(weights, "sha256_file", lambda p, *a: calls.append(Path(p).name) or real(p, *a))
    folder = run / "run" / "checkpoint-10"
    first = identity.HashCache(run / "cache.json").weights_sha256(folder)
    assert calls == ["model.safetensors"]
    assert identity.HashCache(run / "cache.json").weights_sha256(folder) == first and len(calls) == 1  # from the file
    st = (folder / "model.safetensors").stat()
    os.utime(folder / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: read again
    assert identity.HashCache(run / "cache.json").weights_sha256(folder) == first and len(calls) == 2


def test_weights_changed_after_scheduling_fail_the_cell_by_name(run):
    cfg = _config(str(run / "run"), ["checkpoint-10", "checkpoint-20"])
    cache = identity.HashCache(run / "cache.json")
    scheduled = identity.identity(cfg, "tiny", "checkpoint-20", cache)
    tiny_model("olmo", seed=7, vocab_size=128).save_pretrained(run / "run" / "checkpoint-20")
    with pytest.raises(identity.ChangedWeights) as err:
        identity.located(cfg, "tiny", "checkpoint-20", scheduled, cache)
    msg = str(err.value)
    assert "model 'tiny' revision 'checkpoint-20'" in msg and str(run / "run" / "checkpoint-20") in msg
    assert "changed after the DAG was built" in msg


def _snakemake(work: Path, cfg: dict, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
           str(work / "config.yaml"), "--cores", "2", *args,
           *(f"results/cells/tiny/checkpoint-{s}/screen.parquet" for s in (10, 20))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _captures(proc: subprocess.CompletedProcess) -> list[str]:
    """The revisions of the capture jobs a dry run schedules."""
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    return sorted(set(re.findall(r"rule capture:.*?wildcards: model=tiny, revision=(\S+)", out, flags=re.S)))


@pytest.mark.slow
def test_a_moved_or_relisted_run_schedules_no_capture_and_new_weights_rerun_their_cell(run, warm_jobs):
    listed = _config(str(run / "run" / "{revision}"), ["checkpoint-10", "checkpoint-20"])
    assert _snakemake(run, listed, env=warm_jobs).returncode == 0
    # the live form over the same folders, the {revision} path included, and the folder itself
    for path in (str(run / "run" / "{revision}"), str(run / "run")):
        assert _captures(_snakemake(run, _config(path, {"glob": "checkpoint-*"}), "-n")) == [], path
    # a copy of the run under another folder
    shutil.copytree(run / "run", run / "copy")
    copied = _config(str(run / "copy" / "{revision}"), ["checkpoint-10", "checkpoint-20"])
    assert _captures(_snakemake(run, copied, "-n")) == []
    # other weights saved under an old name: that cell, and only that cell, runs again
    tiny_model("olmo", seed=9, vocab_size=128).save_pretrained(run / "copy" / "checkpoint-20")
    assert _captures(_snakemake(run, copied, "-n")) == ["checkpoint-20"]
    proc = _snakemake(run, copied, env=warm_jobs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _captures(_snakemake(run, copied, "-n")) == []
