"""`headtrace revisions` on a folder of one's own checkpoints (a source: local block, no network), and
every Hub failure of `revisions` and `audit` in one line that says what to do offline."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml
from tiny import tiny_model

from headtrace import cli
from headtrace.models import reach
from headtrace.panel import config as panel

STEPS = (100, 400, 1500, 6000)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("x") / "my-run"
    model = tiny_model("gpt2", vocab_size=128)
    for step in STEPS:
        model.save_pretrained(root / f"step{step}")
    (root / "logs").mkdir()
    return root


def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_folder_gives_a_local_block_with_log_spaced_picks(run, capsys):
    rc, out, err = _cli(capsys, "revisions", str(run), "--log-spaced", "3", "--tokens-per-step", "4096")
    assert rc == 0
    block = yaml.safe_load(out)["models"]["my-run"]
    assert block["source"] == "local" and block["path"] == f"{run}/{{revision}}"
    assert block["revisions"][0] == "step100" and block["revisions"][-1] == "step6000" and len(block["revisions"]) == 3
    assert block["tokens_per_step"] == 4096
    assert "not listed" in err and "logs" in err  # a folder left out is said, not skipped silently
    cfg = yaml.safe_load(out)
    assert cfg["probe"] == {"derive": True}  # vocabulary 128: smaller than the paper's probe
    panel.check(cfg)  # the block passes the config check as printed


def test_a_checkpoint_folder_stands_for_its_revision_of_the_run(run, capsys):
    rc, out, _ = _cli(capsys, "revisions", str(run / "step400"))
    block = yaml.safe_load(out)["models"]["my-run"]
    assert rc == 0 and block["revisions"] == ["step400"] and block["path"] == f"{run}/{{revision}}"


def test_names_piped_for_a_folder_stay_local(run, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("step100\nstep400\nfinal\n"))
    rc, out, _ = _cli(capsys, "revisions", str(run), "--from-file", "-")
    assert rc == 0 and "source: hub" not in out and "source: local" in out
    assert "tokens: {final: N}" in out


def test_a_name_that_is_neither_folder_nor_hub_id_is_one_line(capsys, tmp_path):
    rc, _, err = _cli(capsys, "revisions", str(tmp_path / "nowhere"))
    assert rc == 2 and "neither a folder here nor a Hub id" in err and len(err.strip().splitlines()) == 1


def test_network_failures_are_told_by_their_chain():
    class ConnectError(Exception):
        pass
    ConnectError.__module__ = "httpx2._exceptions"
    try:
        try:
            raise ConnectError("[Errno -2] Name or service not known")
        except ConnectError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as err:
        assert reach.is_network_failure(err)
    assert reach.is_network_failure(ConnectionError("refused"))
    assert not reach.is_network_failure(ValueError("Repo id must be in the form"))


@pytest.mark.parametrize("argv,word", [(["audit", "EleutherAI/pythia-14m"], "--recorded FILE"),
                                       (["revisions", "EleutherAI/pythia-14m", "--log-spaced", "3"], "--from-file FILE")])
def test_offline_hub_commands_say_one_line(argv, word):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "headtrace.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Hub is unreachable" in err and word in err, err
    assert "Traceback" not in err


def test_branch_names_from_a_file_say_the_audit_was_skipped(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("step1\nstep2\nstep4\n"))
    rc, out, err = _cli(capsys, "revisions", "EleutherAI/pythia-14m", "--from-file", "-", "--log-spaced", "2")
    assert rc == 0 and "source: hub" in out and "not audited" in err


def test_a_cut_short_config_json_is_not_listed_and_is_said(run, tmp_path, capsys):
    root = tmp_path / "my-run"
    shutil.copytree(run, root)
    text = (root / "step1500" / "config.json").read_text()
    (root / "step1500" / "config.json").write_text(text[:120])  # a copy that stopped
    rc, out, err = _cli(capsys, "revisions", str(root))
    assert rc == 0 and yaml.safe_load(out)["models"]["my-run"]["revisions"] == ["step100", "step400", "step6000"]
    assert (f"headtrace: step1500 not listed: {root / 'step1500' / 'config.json'} is not valid JSON at line "
            in err) and "(cut short?); copy or save that checkpoint again" in err
