"""Faults and bad input (issue: the holes a careful user still falls into).

* a probe longer than the model's context fails before any job (toy, local) or at job start (hub),
  naming the model, ``probe.seq_len`` and the limit;
* a local revision folder that is not there is refused before any job (the workflow) and fails its
  cell when loaded (no fallback to ``path``);
* a stale Snakemake lock after a killed run is told apart from a live run; ``make demo`` says what
  to run; a second workflow started under a live run is refused when it is parsed;
* every writer fsyncs the file and the folder entry around the rename;
* two revisions with byte-identical weights are flagged (log, summary.md).
"""
from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from tiny import tiny_model

from headtrace import experiments
from headtrace.core import durable, tables
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.findings.compute import all_findings
from headtrace.models import context, hub, provenance
from headtrace.panel import config as panel
from headtrace.panel import local_weights
from headtrace.probe import fit, synthetic
from headtrace.report import summary
from headtrace.runtime import locks
from helpers.trajectories import RENDER_SETTINGS


ROOT = Path(__file__).resolve().parents[2]


def config(name="config.yaml"):
    """A shipped config as the workflow reads it: the experiments' models added (a group may name them)."""
    return experiments.expand_models(copy.deepcopy(yaml.safe_load((ROOT / "config" / name).read_text())))


# ---- 1. probe vs context length ----------------------------------------------------------------


def _limit_of_toy(cfg, model):
    return context.toy_limit(cfg, model)[0]


def test_too_long_probe_fails_for_a_toy_model_naming_model_key_and_limit():
    cfg = config()
    limit = _limit_of_toy(cfg, "toy-neox")  # read from the toy recipe, not hard-coded here
    cfg["models"]["toy-neox"]["probe"] = {"seq_len": limit + 1}
    with pytest.raises(panel.ConfigError) as err:
        panel.check(cfg)
    msg = str(err.value)
    assert "models.toy-neox" in msg and f"probe.seq_len {limit + 1}" in msg
    assert f"context length of {limit} positions" in msg and "max_position_embeddings" in msg


def test_probe_at_the_limit_passes_and_train_arch_override_counts():
    cfg = config()
    cfg["models"]["toy-olmo"]["train"] = {"arch": {"max_position_embeddings": 4096}}
    cfg["models"]["toy-olmo"]["probe"] = {"seq_len": 4096}
    cfg["models"]["toy-neox"]["probe"] = {"seq_len": _limit_of_toy(cfg, "toy-neox")}
    panel.check(cfg)  # both fit exactly
    cfg["models"]["toy-olmo"]["train"]["arch"]["max_position_embeddings"] = 2048
    with pytest.raises(panel.ConfigError, match=r"models\.toy-olmo: probe\.seq_len 4096 .* 2048"):
        panel.check(cfg)


def test_bos_is_part_of_seq_len():
    """probe.seq_len is the fed length, BOS included: make_batch builds seq_len - 1 tokens + BOS."""

    b = synthetic.make_batch(n_sequences=2, seq_len=64, token_range=(2, 50), ab_range=(20, 40),
                             prepend_bos=True, bos_token_id=0)
    assert b.tokens.shape[1] == 64
    assert fit.too_long("m", 64, (64, "max_position_embeddings"), "x") is None
    assert "probe.seq_len 65" in fit.too_long("m", 65, (64, "max_position_embeddings"), "x")


def test_data_shift_model_has_its_base_architecture():
    cfg = {"models": {"base": {"source": "toy", "family": "gpt_neox", "revisions": ["step0"],
                               "train": {"arch": {"max_position_embeddings": 96}}},
                      "base-shift": {"source": "toy", "family": "gpt_neox", "revisions": ["step0"],
                                     "train": {"shift_from": "base"}}}}
    assert context.toy_limit(cfg, "base-shift") == (96, "max_position_embeddings")


def test_limit_fields_of_the_families():
    import transformers

    for cls in ("GPTNeoXConfig", "OlmoConfig", "OlmoeConfig", "LlamaConfig"):
        cfg = getattr(transformers, cls)(max_position_embeddings=123)
        assert context.limit_of(cfg) == (123, "max_position_embeddings")
        assert context.limit_of(cfg.to_dict()) == (123, "max_position_embeddings")
    assert context.limit_of(transformers.GPT2Config(n_positions=77).to_dict()) == (77, "n_positions")
    assert context.limit_of({"model_type": "x"}) is None


def _local_cfg(path, revisions, seq_len, **extra):
    return {"models": {"loc": {"source": "local", "path": str(path), "revisions": revisions,
                               "tokens": {r: i for i, r in enumerate(revisions)}, **extra}},
            "probe": {"n_sequences": 4, "seq_len": seq_len, "token_range": [2, 100], "ab_range": [20, 40]}}


def test_too_long_probe_fails_for_a_local_model_at_config_check(tmp_path):
    tiny_model("olmo", seed=0).config.save_pretrained(tmp_path / "rev-a")  # max_position_embeddings 256
    panel.check(_local_cfg(tmp_path, ["rev-a", "rev-not-there-yet"], 256))
    with pytest.raises(panel.ConfigError) as err:
        panel.check(_local_cfg(tmp_path, ["rev-a"], 300))
    msg = str(err.value)
    assert "models.loc" in msg and "probe.seq_len 300" in msg and "256" in msg
    assert str(tmp_path / "rev-a" / "config.json") in msg


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf") / "hub"
    storage = root / "models--org--tiny"
    commit = "a" * 40
    tiny_model("gpt_neox", seed=0).save_pretrained(storage / "snapshots" / commit)
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "step1").write_text(commit)
    (storage / "refs" / "step2").write_text(commit)  # a second branch name, the same commit
    return root, commit


def test_too_long_probe_fails_at_job_start_for_hub_before_reading_weights(hub_cache, monkeypatch):
    root, _ = hub_cache
    import transformers

    def no_weights(*a, **k):
        raise AssertionError("weights were read before the context check")

    monkeypatch.setattr(transformers.GPTNeoXForCausalLM, "from_pretrained", no_weights)
    with pytest.raises(panel.ConfigError) as err:
        hub.load_for_cell({"source": "hub", "hf_id": "org/tiny"}, "tiny-hub", "step1", "cpu", 4,
                          seq_len=257, cache_dir=str(root))
    msg = str(err.value)
    assert "models.tiny-hub" in msg and "probe.seq_len 257" in msg and "context length of 256" in msg


def test_hub_probe_that_fits_loads(hub_cache):
    root, _ = hub_cache
    net, fam, _, _ = hub.load_for_cell({"source": "hub", "hf_id": "org/tiny"}, "tiny-hub", "step1", "cpu", 4,
                                       seq_len=256, cache_dir=str(root))
    assert fam.name == "gpt_neox"


# ---- 2. a missing local revision never loads another checkpoint --------------------------------


@pytest.fixture()
def checkpoint_at_top(tmp_path):
    """The common layout: the final model at the top of path, intermediate ones in sub-folders."""
    top = tmp_path / "ckpt"
    tiny_model("olmo", seed=9).save_pretrained(top)
    tiny_model("olmo", seed=1).save_pretrained(top / "rev-a")
    return top


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)


def test_missing_local_revision_fails_naming_model_revision_and_folder(checkpoint_at_top):
    load = {"source": "local", "path": str(checkpoint_at_top)}
    net, *_ = hub.load_for_cell(load, "loc", "rev-a", "cpu", 4)
    assert _same(net, tiny_model("olmo", seed=1))
    with pytest.raises(hub.CheckpointError) as err:
        hub.load_for_cell(load, "loc", "rev-b", "cpu", 4)
    msg = str(err.value)
    assert "local model 'loc' revision 'rev-b'" in msg
    assert f"no checkpoint folder {checkpoint_at_top}/rev-b" in msg and "holds: rev-a" in msg
    assert "does not fall back" in msg and "single_checkpoint" in msg


def test_single_checkpoint_reads_path_itself_and_must_have_one_revision(checkpoint_at_top):
    load = {"source": "local", "path": str(checkpoint_at_top), "single_checkpoint": True}
    net, *_ = hub.load_for_cell(load, "loc", "final", "cpu", 4)
    assert _same(net, tiny_model("olmo", seed=9))
    panel.check(_local_cfg(checkpoint_at_top, ["final"], 64, single_checkpoint=True))
    with pytest.raises(panel.ConfigError, match=r"models\.loc\.single_checkpoint: .* 2 revisions"):
        panel.check(_local_cfg(checkpoint_at_top, ["final", "rev-a"], 64, single_checkpoint=True))
    cfg = _local_cfg(checkpoint_at_top, ["final"], 64, single_checkpoint=True)
    assert panel.load_spec(cfg, "loc")["single_checkpoint"] is True


def test_revision_placeholder_path_missing_folder(tmp_path):
    load = {"source": "local", "path": str(tmp_path / "run-{revision}" / "hf")}
    with pytest.raises(hub.CheckpointError, match=r"revision 'r7'.*run-r7/hf.*contains \{revision\}") as err:
        hub.load_for_cell(load, "loc", "r7", "cpu", 4)
    assert "put {revision}" not in str(err.value)  # the path has it: the advice is the name or the path
    assert "Fix the name in models.loc.revisions" in str(err.value)


# ---- 3. stale lock vs live run -------------------------------------------------------------------


def _locked(workdir: Path, incomplete=("results/cells/m/r/attention.parquet",)) -> Path:
    import base64

    (workdir / ".snakemake" / "locks").mkdir(parents=True)
    (workdir / ".snakemake" / "locks" / "0.input.lock").write_text(f"{workdir}/results/probes/m/x.parquet\n")
    (workdir / ".snakemake" / "locks" / "0.output.lock").write_text(f"{workdir}/results/cells/m/r/attention.parquet\n")
    inc = workdir / ".snakemake" / "incomplete"
    inc.mkdir(parents=True)
    for path in incomplete:
        (inc / base64.urlsafe_b64encode(path.encode()).decode()).write_text("{}")
    return workdir


def test_stale_lock_without_any_process(tmp_path):
    work = _locked(tmp_path / "w")
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    state = locks.check(work, proc=empty_proc)
    assert state.status == locks.STALE and len(state.lock_files) == 2
    assert state.incomplete == ["results/cells/m/r/attention.parquet"]
    msg = locks.message(state)
    assert "stale Snakemake lock" in msg and "  make unlock\n  make demo" in msg
    assert "results/cells/m/r/attention.parquet" in msg


def test_no_lock_says_nothing(tmp_path):
    state = locks.check(tmp_path)
    assert state.status == locks.NO_LOCK and locks.message(state) == ""


def _fake_proc(root: Path, pid: int, argv: list[str], cwd: Path) -> Path:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    os.symlink(cwd, d / "cwd")
    return root


def test_live_run_on_this_folder_is_never_called_stale(tmp_path):
    work = _locked(tmp_path / "w")
    other = tmp_path / "elsewhere"
    other.mkdir()
    proc = tmp_path / "proc"
    _fake_proc(proc, 4242, ["/usr/bin/python3", "/x/.venv/bin/snakemake", "--cores", "2"], other)
    assert locks.check(work, proc=proc).status == locks.STALE  # a run in another folder
    _fake_proc(proc, 4243, ["/usr/bin/python3", "/x/.venv/bin/snakemake", "--directory", str(work)], other)
    state = locks.check(work, proc=proc)
    assert state.status == locks.LIVE and state.live[0][0] == 4243
    assert "still working" in locks.message(state) and "make unlock" not in locks.message(state)
    proc2 = tmp_path / "proc2"  # an orphaned job process of a killed run, in this folder
    _fake_proc(proc2, 77, ["python", f"{work}/.snakemake/scripts/tmpab12.capture.py"], work)
    assert locks.check(work, proc=proc2).status == locks.LIVE


def test_live_real_process_is_found_in_proc(tmp_path):
    if not Path("/proc/self/cwd").exists():
        pytest.skip("needs /proc")
    work = _locked(tmp_path / "w")
    fake = work / "snakemake"
    fake.write_text("#!/bin/sh\nsleep 20\n")
    fake.chmod(0o755)
    p = subprocess.Popen([str(fake)], cwd=work)
    try:
        time.sleep(0.2)
        state = locks.check(work)
        assert state.status == locks.LIVE and p.pid in [pid for pid, _ in state.live]
    finally:
        p.kill()
        p.wait()
    assert locks.check(work).status == locks.STALE


@pytest.mark.slow
def test_a_second_workflow_under_a_live_run_is_refused_before_the_dag_is_built(tmp_path):
    """A plain ``snakemake`` (not ``make demo``) started where a run still works stops when the workflow
    is parsed, naming the live run, not with Snakemake's advice to --rerun-incomplete its outputs."""
    if not Path("/proc/self/cwd").exists():
        pytest.skip("needs /proc")
    work = _locked(tmp_path / "w")
    (work / "config.yaml").write_text(yaml.safe_dump(_e2e_config(work, ["rev-a"])))
    fake = work / "snakemake"  # the live run: a process named snakemake working in this folder
    fake.write_text("#!/bin/sh\nsleep 60\n")
    fake.chmod(0o755)
    live = subprocess.Popen([str(fake)], cwd=work)
    try:
        time.sleep(0.2)
        proc = _snakemake(work)
    finally:
        live.kill()
        live.wait()
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"a Snakemake run is still working in {work}" in out and f"pid {live.pid}" in out
    assert "do not unlock or --rerun-incomplete under a live run" in out
    assert "Building DAG" not in out and "incomplete" not in out.replace("--rerun-incomplete", ""), out
    assert len(out.strip().splitlines()) <= 8, out
    # the run gone, the lock is stale: the workflow no longer says a run is working
    proc = _snakemake(work, "-n")
    assert "still working" not in proc.stdout + proc.stderr


def test_make_demo_stops_on_a_stale_lock_with_the_recovery_message(tmp_path):
    """The Makefile's demo target runs the check first (the real Makefile, in a scratch folder)."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    work = _locked(tmp_path / "w")
    for f in ("requirements.txt", "requirements-models.txt", "pyproject.toml"):  # the venv stamp's prerequisites, made old
        shutil.copy(ROOT / f, work / f)
        os.utime(work / f, (0, 0))
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "demo", f"BIN={bin_dir}",
                           f"STAMP={ROOT / '.venv' / '.installed'}"], cwd=work, capture_output=True,
                          text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "stale Snakemake lock" in out and "make unlock" in out, out
    assert not (work / "results").exists(), "snakemake must not have run"
    proc = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), "unlock", f"BIN={bin_dir}",
                           f"STAMP={ROOT / '.venv' / '.installed'}"], cwd=work, capture_output=True, text=True)
    assert "lock-check --before-unlock" in proc.stdout and "--unlock" in proc.stdout


def test_cli_exit_codes(tmp_path, capsys):
    from headtrace import cli

    assert cli.main(["lock-check", str(tmp_path)]) == 0
    work = _locked(tmp_path / "w")
    assert cli.main(["lock-check", str(work)]) == 1
    assert "make unlock" in capsys.readouterr().err
    assert cli.main(["lock-check", "--before-unlock", str(work)]) == 0


# ---- 4. durable writes ----------------------------------------------------------------------------


@pytest.fixture()
def fsyncs(monkeypatch):
    """Record (inode, is_dir) of every fsync'd descriptor, then really fsync."""
    calls = []
    real = os.fsync

    def spy(fd):
        st = os.fstat(fd)
        calls.append((st.st_ino, os.path.stat.S_ISDIR(st.st_mode)))
        return real(fd)

    real_replace = os.replace

    def replace(src, dst):  # the rename, as an event between the fsyncs
        calls.append(("replace", Path(dst).name))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", spy)
    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("writer", ["table", "text", "array"])
def test_writers_fsync_file_then_folder(tmp_path, fsyncs, writer):
    out = tmp_path / "sub" / f"out.{writer}"
    if writer == "table":
        tables.write(pl.DataFrame({"a": [1, 2]}), out)
    elif writer == "text":
        tables.write_text("hello\n", out)
    else:
        tables.write_array(np.ones((2, 3)), out)
    file_ino, dir_ino = out.stat().st_ino, out.parent.stat().st_ino
    assert (file_ino, False) in fsyncs, "the file's bytes are fsync'd"
    assert fsyncs[-1] == (dir_ino, True), "the folder entry is fsync'd after the rename"
    assert fsyncs.index((file_ino, False)) < fsyncs.index(("replace", out.name)) < len(fsyncs) - 1, fsyncs
    assert out.stat().st_mode & 0o777 == 0o666 & ~durable._umask(), "the usual mode, not mkstemp's 0600"
    assert [p.name for p in out.parent.iterdir()] == [out.name], "no temporary file left"


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    out = tmp_path / "t.parquet"
    tables.write(pl.DataFrame({"a": [1]}), out)
    with pytest.raises(ValueError):
        tables.write(pl.DataFrame({"a": [1]}), out, schema="pr")  # missing columns: nothing written
    with pytest.raises(RuntimeError):
        with durable.atomic_path(out) as tmp:
            Path(tmp).write_text("half")
            raise RuntimeError("killed")
    assert tables.read(out)["a"].to_list() == [1] and [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_toy_checkpoint_folder_is_fsynced_before_it_is_published(tmp_path, fsyncs):
    from headtrace.models.toy import train as toy

    final = toy._save(tiny_model("gpt_neox"), tmp_path, 3)
    inodes = {ino for ino, _ in fsyncs}
    renamed = fsyncs.index(("replace", "step3"))
    for f in final.iterdir():
        assert f.stat().st_ino in inodes, f.name
        assert fsyncs.index((f.stat().st_ino, False)) < renamed, f.name
    assert final.stat().st_ino in inodes and fsyncs[-1] == (tmp_path.stat().st_ino, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step3"]


# ---- 5. identical weights under different revision names ------------------------------------------


def test_provenance_hashes_content_and_records_the_hub_commit(hub_cache, tmp_path):
    root, commit = hub_cache
    rows = [provenance.cell_table({"source": "hub", "hf_id": "org/tiny"}, "tiny-hub", r, None, cache_dir=str(root))
            for r in ("step1", "step2")]
    prov = tables.conform(pl.concat(rows), "provenance")
    assert prov["commit"].to_list() == [commit, commit] and prov["hf_id"].to_list() == ["org/tiny"] * 2
    assert prov["weights_sha256"].n_unique() == 1 and prov["weight_files"][0].to_list() == ["model.safetensors"]
    # the same bytes copied under another folder name hash the same; other weights do not
    snap = root / "models--org--tiny" / "snapshots" / commit
    shutil.copytree(snap, tmp_path / "copy")
    tiny_model("gpt_neox", seed=5).save_pretrained(tmp_path / "other")
    assert provenance.weights_hash(tmp_path / "copy")[0] == prov["weights_sha256"][0]
    assert provenance.weights_hash(tmp_path / "other")[0] != prov["weights_sha256"][0]
    lines = provenance.warning_lines(prov)
    assert len(lines) == 1 and "'step1', 'step2'" in lines[0] and "tiny-hub" in lines[0]


def _traj(revs_hash):
    rows = []
    for i, (rev, digest) in enumerate(revs_hash):
        for layer in range(2):
            for head in range(2):
                sel = {c: 1.0 for c in CLASS_COLUMNS}
                sel["induction"] = 80.0 if (i and (layer, head) == (1, 0)) else 1.0
                rows.append(dict(model="m", revision=rev, tokens=1000 * (i + 1), layer=layer, head=head, pr=1.0 + i,
                                 **{f"sel_{c}": v for c, v in sel.items()}, best_class="induction",
                                 best_selectivity=max(sel.values()),
                                 classification="induction" if sel["induction"] >= 30 else "unclassified",
                                 in_induction_circuit=sel["induction"] >= 50))
    traj = tables.conform(pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64}), "trajectory")
    prov = [pl.DataFrame({"model": ["m"], "revision": [r], "commit": [None], "weights_sha256": [d]},
                         schema_overrides={"commit": pl.String}) for r, d in revs_hash]
    return traj, prov


def test_identical_weights_are_flagged_in_the_log_and_summary(caplog):
    traj, prov = _traj([("step1", "aa" * 32), ("step2", "bb" * 32), ("step3", "bb" * 32)])
    with caplog.at_level("WARNING", logger="headtrace.models.provenance"):
        joined = provenance.attach(traj, prov)
    assert joined.height == traj.height and joined["revision"].equals(traj["revision"])
    assert "'step2', 'step3'" in caplog.text and "byte-identical" in caplog.text
    md = summary.render(joined, all_findings(joined), **RENDER_SETTINGS)
    assert "identical weights under different revision names" in md
    assert "model 'm': revisions 'step2', 'step3' have byte-identical weights" in md
    traj2, prov2 = _traj([("step1", "aa" * 32), ("step2", "bb" * 32)])
    assert "identical weights" not in summary.render(provenance.attach(traj2, prov2), all_findings(traj2), **RENDER_SETTINGS)
    assert "identical weights" not in summary.render(traj2, all_findings(traj2), **RENDER_SETTINGS)  # reference models: no provenance columns


# ---- end to end: a tiny local panel under Snakemake ------------------------------------------------

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def _snakemake(work: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
           str(work / "config.yaml"), "--cores", "2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def _e2e_config(work: Path, top_revisions) -> dict:
    probe = {"n_sequences": 16, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}
    return {
        "models": {
            # path is itself a checkpoint (the final model at the top) with a sub-folder rev-a
            "tiny-top": {"source": "local", "path": str(work / "top"), "family": "auto",
                         "tokens": {"rev-a": 1000, "rev-gone": 1500},
                         "revisions": list(top_revisions)},
            # two revision names, byte-identical weights
            "tiny-same": {"source": "local", "path": str(work / "same"), "family": "auto",
                          "tokens": {"r1": 1000, "r2": 2000}, "revisions": ["r1", "r2"]},
        },
        "probe": probe,
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"enabled": False},
        "experiments": {"enabled": False},
    }


@pytest.mark.slow
def test_e2e_missing_revision_refused_and_identical_weights(tmp_path, warm_jobs):
    work = tmp_path
    tiny_model("olmo", seed=9, vocab_size=128).save_pretrained(work / "top")
    tiny_model("olmo", seed=1, vocab_size=128).save_pretrained(work / "top" / "rev-a")
    tiny_model("olmo", seed=3, vocab_size=128).save_pretrained(work / "same" / "r1")
    shutil.copytree(work / "same" / "r1", work / "same" / "r2")

    # a too-long probe fails before any job, naming model, key and limit
    cfg = _e2e_config(work, ["rev-a"])
    cfg["models"]["tiny-same"]["probe"] = {"seq_len": 300}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = _snakemake(work, "-n")
    assert proc.returncode != 0 and "models.tiny-same: probe.seq_len 300" in proc.stdout + proc.stderr
    assert "context length of 256" in proc.stdout + proc.stderr

    # a missing revision folder is refused before any job, naming it (not a cell that fails later)
    (work / "config.yaml").write_text(yaml.safe_dump(_e2e_config(work, ["rev-a", "rev-gone"])))
    proc = _snakemake(work, "--keep-going", "results/models/tiny-top/trajectory.parquet",
                      "results/models/tiny-same/trajectory.parquet")
    assert proc.returncode != 0 and not (work / "logs" / "capture").exists()
    assert f"models.tiny-top revision 'rev-gone': no folder {work / 'top' / 'rev-gone'}" in proc.stderr

    # the panel without it runs
    (work / "config.yaml").write_text(yaml.safe_dump(_e2e_config(work, ["rev-a"])))
    proc = _snakemake(work, "results/models/tiny-top/trajectory.parquet", "results/models/tiny-same/trajectory.parquet",
                      env=warm_jobs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = work / "results"
    for model, rev in (("tiny-top", "rev-a"), ("tiny-same", "r1"), ("tiny-same", "r2")):
        assert (res / "cells" / model / rev / "screen.parquet").exists(), (model, rev)
    assert (res / "models" / "tiny-same" / "trajectory.parquet").exists()
    assert "identical weights" in (work / "logs" / "trajectory" / "tiny-same.log").read_text()
    prov = tables.read(res / "cells" / "tiny-top" / "rev-a" / "provenance.parquet")
    tables.conform(prov, "provenance")
    assert prov["weights_sha256"][0] == provenance.weights_hash(work / "top" / "rev-a")[0]
    assert prov["weights_sha256"][0] != provenance.weights_hash(work / "top")[0]  # not the top checkpoint

    # the workflow's trajectory carries the weight hashes: summary.md (the findings job renders it
    # from the trajectories) flags the identical revisions
    traj = tables.read(res / "models" / "tiny-same" / "trajectory.parquet")
    assert traj.group_by("revision").agg(pl.col("weights_sha256").first())["weights_sha256"].n_unique() == 1
    md = summary.render(traj, all_findings(traj), **RENDER_SETTINGS)
    assert "model 'tiny-same': revisions 'r1', 'r2' have byte-identical weights" in md
    assert md.count("byte-identical weights") == 1


def test_missing_local_revisions_are_refused_when_the_dag_is_built(checkpoint_at_top):
    with pytest.raises(panel.ConfigError) as err:
        local_weights.check(_local_cfg(checkpoint_at_top, ["rev-a", "rev-b"], 64))
    msg = str(err.value)
    assert "models.loc revision 'rev-b'" in msg and str(checkpoint_at_top / "rev-b") in msg
    assert "nearest there: 'rev-a'" in msg and "no job has started" in msg
    local_weights.check(_local_cfg(checkpoint_at_top, ["final"], 64, single_checkpoint=True))
