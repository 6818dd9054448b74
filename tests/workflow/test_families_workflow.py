"""End to end over several families at once: one two-revision ``source: local`` Snakemake run on
tiny random checkpoints of Llama (grouped-query), Qwen3 (QK-norm), OLMo-3 (sliding window),
GPT-2 (Conv1D, learned positions) and SmolLM3 (no-rotary layers), one model each.

Every cell must get its screen and verdict tables (the per-cell jobs: capture, pr, screen,
ablate) and every model a trajectory over both revisions, in training order, with the weights
each cell ran (provenance). The per-cell numbers themselves are checked elsewhere: against eager
attention per family (tests/models/test_families.py), against ``headtrace.analyze`` per family on one
revision (tests/test_api.py).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import tiny
import yaml

from headtrace.core import tables

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
FAMILIES = ("llama", "qwen3", "olmo3", "gpt2", "smollm3")
REVISIONS = {"step100": 100 * 4096, "step900": 900 * 4096}
PROBE = {"n_sequences": 16, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ran(tmp_path_factory, warm_jobs):
    work = tmp_path_factory.mktemp("families-wf")
    models = {}
    for i, fam in enumerate(FAMILIES):
        path = work / "ckpt" / fam
        for j, rev in enumerate(REVISIONS):
            tiny.tiny_model(fam, seed=100 + 10 * i + j, n_layers=2, n_heads=4).save_pretrained(path / rev)
        models[f"tiny-{fam}"] = {"source": "local", "path": str(path), "family": "auto",
                                 "tokens_per_step": 4096, "revisions": list(REVISIONS)}
    cfg = {"models": models, "probe": PROBE, "capture": {"device": "cpu", "batch_size": 8},
           "ablation": {"n_random": 2, "batch_size": 8}, "experiments": {"enabled": False}}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    targets = [f"results/models/{m}/trajectory.parquet" for m in models] + [
        f"results/cells/{m}/{r}/verdict.parquet" for m in models for r in REVISIONS]
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
                           str(work / "config.yaml"), "--cores", "2", *targets],
                          capture_output=True, text=True, timeout=600, env=warm_jobs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return work, cfg


@pytest.mark.parametrize("family", FAMILIES)
def test_every_cell_has_screen_and_verdict(ran, family):
    work, _ = ran
    name = f"tiny-{family}"
    for revision in REVISIONS:
        cell = work / "results" / "cells" / name / revision
        screen = tables.conform(pl.read_parquet(cell / "screen.parquet"), "screen")
        assert screen.height == 2 * 4  # every head of the tiny model: 2 layers x 4 (query) heads
        assert set(screen["revision"]) == {revision} and set(screen["model"]) == {name}
        verdict = tables.conform(pl.read_parquet(cell / "verdict.parquet"), "verdict")
        assert verdict.filter(pl.col("circuit") == "circuit").height == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_trajectory_has_both_revisions_in_order(ran, family):
    work, _ = ran
    name = f"tiny-{family}"
    traj = pl.read_parquet(work / "results" / "models" / name / "trajectory.parquet")
    order = traj.select("revision", "tokens").unique(maintain_order=True)
    assert order["revision"].to_list() == list(REVISIONS)
    assert order["tokens"].to_list() == list(REVISIONS.values())
    assert traj.group_by("revision").len()["len"].to_list() == [8, 8]
    # each revision ran its own checkpoint (different random weights, so different hashes)
    assert traj["weights_sha256"].n_unique() == 2
