"""docs/own-run.md, followed as written on the run it describes (issue 51: a fresh clone follows it).

A tiny GPT-2 of the page's geometry saved as a Hugging Face ``Trainer`` saves it (``checkpoint-N``
folders with ``config.json``, ``model.safetensors`` and ``trainer_state.json``) stands in for
``/data/my-run``; the page's commands run on it, and what they print is the page's text.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

from headtrace import cli

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "own-run.md"
STEPS = (100, 200, 400, 700, 1000, 1500)


def blocks(kind: str) -> list[str]:
    """The page's fenced blocks of one kind (bash, yaml, …), in order."""
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.fixture
def run(tmp_path):
    """The page's run: 3 layers, 6 heads, width 96, vocabulary 256, context 160, batch 16, one process."""
    cfg = transformers.GPT2Config(n_layer=3, n_head=6, n_embd=96, vocab_size=256, n_positions=160)
    for step in STEPS:
        folder = tmp_path / "my-run" / f"checkpoint-{step}"
        transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "train_batch_size": 16}))
        (folder / "optimizer.pt").write_bytes(b"")  # the Trainer's optimizer state: never read
    return tmp_path


def test_the_page_describes_its_run():
    text = PAGE.read_text()
    assert "3 layers, 6 heads, width 96" in text and "vocabulary 256, context 160" in text
    assert "per_device_train_batch_size=16" in text


@pytest.mark.slow  # a dry run of the workflow
def test_the_pages_commands_write_the_pages_config_and_probe(run, capsys, monkeypatch):
    monkeypatch.chdir(run)
    data = str(run / "my-run")
    # 1. headtrace revisions, as the page gives it, prints the page's block
    command = next(line for b in blocks("bash") for line in b.splitlines() if "headtrace revisions" in line)
    args, _, target = command.partition(">")
    argv = shlex.split(args.replace("/data/my-run", data))
    assert argv[0].endswith("headtrace") and target.strip() == "my-run.yaml"
    assert cli.main(argv[1:]) == 0
    written = capsys.readouterr().out
    assert written == blocks("yaml")[0].replace("/data/my-run", data)
    (run / "my-run.yaml").write_text(written)
    # the proposal, uncommented by the page's own sed line
    sed = next(line for b in blocks("bash") for line in b.splitlines() if line.startswith("sed -i"))
    subprocess.run(sed, shell=True, check=True, cwd=run)
    config = (run / "my-run.yaml").read_text()
    assert "\n    tokens_per_step: 2560\n" in config and "PROPOSAL" not in config
    # 2. building the DAG says the probe line the page shows
    probe_line = next(line for line in PAGE.read_text().splitlines() if line.startswith("headtrace: probe (my-run)"))
    proc = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "-s", str(ROOT / "Snakefile"),
                           "--directory", str(run), "--configfile", str(run / "my-run.yaml"), "--cores", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert probe_line in proc.stdout + proc.stderr
    # 3. the last revision's tokens, as the page's 'never (> …)' gives them
    assert f"never (> {_tokens(1500 * 2560)})" in PAGE.read_text()


def _tokens(n: int) -> str:
    from headtrace.report.format import fmt_tokens

    return fmt_tokens(n)
