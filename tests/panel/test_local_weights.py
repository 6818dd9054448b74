"""A local revision folder that is missing, has a cut-short config.json or no loadable weights is refused
when the DAG is built, naming model, revision and folder (headtrace.panel.local_weights); `make demo
KEEP_GOING=1` passes --keep-going."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny import tiny_model

from headtrace.core.errors import ConfigError
from headtrace.panel import local_weights


ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    for rev in ("step100", "step400"):
        tiny_model("gpt2", vocab_size=128).save_pretrained(root / rev)
    return root


def _cfg(root, revisions):
    return {"models": {"my-run": {"source": "local", "path": f"{root}/{{revision}}", "revisions": revisions,
                                  "tokens_per_step": 1000}}}


def test_revisions_with_weights_pass(run):
    local_weights.check(_cfg(run, ["step100", "step400"]))


def test_a_folder_without_weights_is_named_before_any_job(run, tmp_path):
    (tmp_path / "step100").mkdir()
    (tmp_path / "step100" / "config.json").write_text((run / "step100" / "config.json").read_text())
    (tmp_path / "step100" / "training_args.bin").write_bytes(b"x")
    with pytest.raises(ConfigError) as err:
        local_weights.check(_cfg(tmp_path, ["step100"]))
    msg = str(err.value)
    assert "models.my-run revision 'step100'" in msg and str(tmp_path / "step100") in msg
    assert "training_args.bin" in msg and "no job has started" in msg
    assert len(msg.splitlines()) <= 3


def test_make_demo_keep_going_passes_the_flag():
    def dry(*extra):
        return subprocess.run(["make", "-n", "demo", "CONFIG=x.yaml", *extra], cwd=ROOT, capture_output=True,
                              text=True).stdout
    assert "--keep-going" in dry("KEEP_GOING=1")
    assert "--keep-going" not in dry()


def _copy(run, dest, rev, cut=None):
    """A copy of run/rev at dest/rev; ``cut``: its config.json cut to that many characters."""
    shutil.copytree(run / rev, dest / rev)
    if cut is not None:
        text = (dest / rev / "config.json").read_text()
        (dest / rev / "config.json").write_text(text[:cut])


def test_a_cut_short_config_json_is_named_before_any_job(run, tmp_path):
    _copy(run, tmp_path, "step100")
    _copy(run, tmp_path, "step400", cut=200)
    with pytest.raises(ConfigError) as err:
        local_weights.check(_cfg(tmp_path, ["step100", "step400"]))
    msg = str(err.value)
    assert "models.my-run revision 'step400'" in msg and str(tmp_path / "step400" / "config.json") in msg
    assert "not valid JSON" in msg and "cut short?" in msg and "step100" not in msg
    assert "Fix (unreadable): copy or save the checkpoint again" in msg and "no job has started" in msg
    assert len(msg.splitlines()) == 3


def test_missing_folders_are_named_in_step_order_with_the_nearest_name(run, tmp_path):
    for rev in ("checkpoint-100", "checkpoint-350"):
        shutil.copytree(run / "step100", tmp_path / rev)
    # a typo (checkpoint-35 for checkpoint-350) is a missing folder, not a revision out of training order
    revisions = ["checkpoint-100", "checkpoint-9000", "checkpoint-35", "checkpoint-350"]
    cfg = {"models": {"my-run": {"source": "local", "path": str(tmp_path), "revisions": revisions,
                                 "tokens_per_step": 1000}}}
    with pytest.raises(ConfigError) as err:
        local_weights.check(cfg)
    lines = str(err.value).splitlines()
    assert lines[0].startswith("2 local revision(s)") and "no job has started" in lines[0]
    assert lines[1] == (f"  models.my-run revision 'checkpoint-35': no folder {tmp_path}/checkpoint-35 "
                        "(nearest there: 'checkpoint-350')")
    assert lines[2].startswith("  models.my-run revision 'checkpoint-9000': no folder")  # step order: 35, 9000
    assert lines[3].startswith("Fix (missing): name a folder that is there in models.my-run.revisions") and len(lines) == 4
    # the same with {revision} in the path
    cfg["models"]["my-run"]["path"] = f"{tmp_path}/{{revision}}"
    with pytest.raises(ConfigError, match=r"checkpoint-35': no folder .* \(nearest there: 'checkpoint-350'\)"):
        local_weights.check(cfg)


@pytest.mark.slow
def test_snakemake_refuses_a_missing_folder_and_a_cut_short_config_before_any_job(run, tmp_path):
    _copy(run, tmp_path, "step100")
    _copy(run, tmp_path, "step400", cut=150)
    cfg = {"models": {"my-run": {"source": "local", "path": f"{tmp_path}/{{revision}}", "family": "auto",
                                 "revisions": ["step100", "step40", "step400"], "tokens_per_step": 1000}},
           "probe": {"n_sequences": 4, "seq_len": 64, "token_range": [2, 100], "ab_range": [20, 40]},
           "ablation": {"enabled": False}, "experiments": {"enabled": False}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "c.yaml"), "-n"], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "revision 'step40': no folder" in out and "(nearest there: 'step400')" in out
    assert "revision 'step400':" in out and "cut short?" in out and "not in training order" not in out
    assert "Job stats" not in out and "Traceback" not in out
    assert len(out.strip().splitlines()) <= 10, out
