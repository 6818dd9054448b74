"""The probe a run used is said when the DAG is built, in the probe job's log, on the first screen of
summary.md / summary.html and by `headtrace summary` (headtrace.probe.words, panel.probe_shown)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
import transformers
import yaml
from tiny import tiny_config
from headtrace.core import tables
from headtrace.panel import probe_shown
from headtrace.probe import synthetic
from headtrace.probe import words as probe_words
from headtrace.report import console


ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A newcomer's own small model: context 160, vocabulary 256, two save_pretrained checkpoints."""
    root = tmp_path_factory.mktemp("my-run")
    cfg = tiny_config("gpt2", vocab_size=256)
    cfg.n_positions = 160
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    for rev in ("step100", "step400"):
        model.save_pretrained(root / rev)
    return root


def _cfg(root, **probe):
    return {"models": {"my-run": {"source": "local", "path": f"{root}/{{revision}}", "family": "auto",
                                  "tokens_per_step": 1000, "revisions": ["step100", "step400"]}},
            "probe": {"derive": True, **probe}}


def test_describe_writes_half_open_ranges_as_the_values_they_take():
    text = probe_words.describe({"n_sequences": 2000, "seq_len": 160, "ab_range": [12, 80], "token_range": [2, 256],
                                 "seed": 42, "prepend_bos": False, "bos_token_id": None})
    assert text == "2000 sequences of 160 tokens, A first at positions 12–79, token ids 2–255, seed 42, no BOS"


def test_a_derived_probe_says_from_what(small_run):
    (line,) = probe_shown.console_lines(_cfg(small_run))
    assert line == ("headtrace: probe (my-run): 2000 sequences of 160 tokens, A first at positions 12–79, token ids "
                    "2–255, seed 42, no BOS (derived from context 160 and vocabulary 256)")


def test_models_that_differ_get_a_line_each_and_those_alike_share_one():
    shown = {"a": "p1", "b": "p2", "c": "p1"}
    assert probe_words.lines(shown) == ["probe (a, c): p1", "probe (b): p2"]
    assert probe_words.grouped(shown) == [(["a", "c"], "p1"), (["b"], "p2")]


def test_headtrace_summary_states_the_probe_as_drawn(tmp_path):
    batch = synthetic.make_batch(n_sequences=50, seq_len=96, token_range=(2, 256), seed=1, ab_range=(10, 40), prepend_bos=False, bos_token_id=None)
    tables.write(synthetic.batch_table(batch), tmp_path / "probes" / "my-run" / "induction_batch.parquet",
                 schema="probe")
    traj = pl.DataFrame({"model": ["my-run"], "revision": ["step100"], "tokens": [1000], "layer": [0], "head": [0],
                         "in_induction_circuit": [False], "sel_first_token": [1.0]})
    (tmp_path / "models" / "my-run").mkdir(parents=True)
    traj.write_parquet(tmp_path / "models" / "my-run" / "trajectory.parquet")
    out = console.summary(tmp_path)
    assert "probe (my-run): 50 sequences of 96 tokens, A first at positions" in out
    assert "first-token heads" in out and "BOS heads" not in out


@pytest.mark.slow
def test_the_dag_build_prints_the_probe(small_run, tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_cfg(small_run, n_sequences=64)))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "c.yaml"), "-n"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ("headtrace: probe (my-run): 64 sequences of 160 tokens, A first at positions 12–79, token ids 2–255"
            in proc.stdout + proc.stderr)


@pytest.mark.slow
def test_a_newcomer_run_states_its_probe_on_the_first_screen(small_run, tmp_path, warm_jobs):
    """The whole workflow on the small run (derived probe, no circuit forms in random weights): the
    probe is above the headline of summary.md and summary.html, and in the probe job's log."""
    cfg = {**_cfg(small_run, n_sequences=32), "capture": {"device": "cpu", "batch_size": 16},
           "bootstrap": {"n_resamples": 0}, "ablation": {"n_random": 2, "batch_size": 16},
           "measures": {"enabled": False}, "experiments": {"enabled": False}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "c.yaml"), "--cores", "2"], capture_output=True, text=True, timeout=900,
                          env=warm_jobs)
    assert proc.returncode == 0, proc.stderr[-4000:]
    said = "my-run: 32 sequences of 160 tokens, A first at positions 12–79, token ids 2–255"
    md = (tmp_path / "results" / "findings" / "summary.md").read_text()
    assert said in md and md.index(said) < md.index("## Headline")
    page = (tmp_path / "results" / "findings" / "summary.html").read_text()
    assert said in page and page.index(said) < page.index('id="model-my-run"')
    assert "32 sequences of 160 tokens" in (tmp_path / "logs" / "probe" / "my-run.log").read_text()
