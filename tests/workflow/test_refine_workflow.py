"""End-to-end: adaptive refinement (checkpoint rounds) and a live panel on tiny local checkpoints.

One module-scoped workdir with two local models:

* ``tiny-refine``: eight checkpoint folders step0 ... step64, two of them configured (step4,
  step64); refinement on (milestone ``induction_1_heads``, per_round 1, max_rounds 2).
* ``tiny-live``: ``revisions: {glob: "checkpoint-*"}`` over a folder the test adds checkpoints to.

Test-only device (documented in docs/refinement.md): tiny random models do not form induction heads, so
the fixture makes a "training run" in which the milestone is crossed at a known place. It screens
eight random tiny models in-process with the workflow's own functions, names them step0 ... step64
in increasing order of their largest induction selectivity, and sets ``screen.induction_threshold``
between the values of step32 and step64. The milestone is then first reached at step64 among the
configured revisions (bracket step4 -> step64); round 1 adds the geometric midpoint step16 (not
reached), round 2 the only candidate left between step16 and step64, step32 (not reached); the
bracket (step32, step64] has ratio 2 > target 1.5 when max_rounds stops it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import tiny
import torch
import yaml
from helpers.workflow import job_counts, snakemake

from headtrace.cell import capture, screen
from headtrace.core import schema
from headtrace.models import hub
from headtrace.panel import config as panel
from headtrace.panel import refine
from headtrace.probe import synthetic

pytestmark = pytest.mark.slow

STEPS = [0, 1, 2, 4, 8, 16, 32, 64]
CONFIGURED = ["step4", "step64"]
PROBE = {"n_sequences": 24, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}


def base_config(refine_dir: Path, live_dir: Path, threshold: float) -> dict:
    return {
        "models": {
            "tiny-refine": {"source": "local", "path": str(refine_dir), "family": "olmo",
                            "tokens_per_step": 1000, "revisions": list(CONFIGURED)},
            "tiny-live": {"source": "local", "path": str(live_dir), "family": "olmo", "tokens_per_step": 100,
                          "revisions": {"glob": "checkpoint-*"}, "refine": {"enabled": False}},
        },
        "probe": PROBE,
        # the test-only threshold (see the module docstring); the class threshold is left alone
        "screen": {"induction_threshold": threshold},
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"n_random": 2, "batch_size": 8},
        "experiments": {"enabled": False},
        "refine": {"enabled": True, "milestones": ["induction_1_heads"], "max_rounds": 2, "per_round": 1,
                   "target_ratio": 1.5},
    }


def max_induction(folder: Path, cfg: dict) -> float:
    """The largest induction selectivity of a checkpoint, computed as the workflow computes it."""
    spec = {"source": "local", "path": str(folder.parent), "family": "olmo"}
    batch = synthetic.make_batch(**panel.probe_kwargs({**panel.PROBE_DEFAULTS, **PROBE}))
    model, family, device, bs = hub.load_for_cell(spec, "m", folder.name, "cpu", 8, seq_len=batch.seq_len)
    res = capture.run(model, family, batch, batch_size=bs, device=device)
    sc = screen.screen(capture.attention_table(res, "m", folder.name, 0), baseline=schema.defaults("screen")["baseline"])
    return float(sc["sel_induction"].max())


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    torch.set_num_threads(1)
    work = tmp_path_factory.mktemp("refine")
    scratch, refine_dir, live_dir = work / "scratch", work / "refine-ckpts", work / "live-ckpts"
    values = {}
    for seed in range(len(STEPS)):
        tiny.tiny_model("olmo", seed=100 + seed).save_pretrained(scratch / f"s{seed}")
        values[seed] = max_induction(scratch / f"s{seed}", {})
    order = sorted(values, key=values.get)  # ascending: a run whose induction selectivity only grows
    assert len(set(values.values())) == len(values)
    for step, seed in zip(STEPS, order):
        shutil.copytree(scratch / f"s{seed}", refine_dir / f"step{step}")
    threshold = (values[order[-2]] + values[order[-1]]) / 2  # between step32 and step64
    for i, step in enumerate((10, 20)):
        tiny.tiny_model("olmo", seed=200 + i).save_pretrained(live_dir / f"checkpoint-{step}")
    (live_dir / "checkpoint-25-partial").mkdir()  # a folder without weights is not a checkpoint yet
    (work / "config.yaml").write_text(yaml.safe_dump(base_config(refine_dir, live_dir, threshold)))
    return work


def cells(model, revisions):
    return [f"results/cells/{model}/{r}/{f}.parquet" for r in revisions for f in ("verdict", "pr")]


@pytest.fixture(scope="module")
def first_pass(work, warm_jobs):
    """Round 1 and every configured cell, nothing else: the state after the first pass."""
    snakemake(work, "results/refine/tiny-refine/round1.json", *cells("tiny-refine", CONFIGURED),
              *cells("tiny-live", ["checkpoint-10", "checkpoint-20"]), env=warm_jobs)
    return json.loads((work / "results" / "refine" / "tiny-refine" / "round1.json").read_text())


@pytest.fixture(scope="module")
def dry_after_first(work, first_pass):
    return job_counts(snakemake(work, "-n"))


@pytest.fixture(scope="module")
def full(work, dry_after_first, warm_jobs):
    snakemake(work, env=warm_jobs)
    return work / "results"


def test_round_one_adds_the_geometric_midpoint_of_the_bracket(first_pass):
    plan = first_pass["milestones"][0]
    assert (plan["lo_revision"], plan["hi_revision"]) == ("step4", "step64")
    assert first_pass["added"] == ["step16"] and first_pass["pool_size"] == len(STEPS)


def test_dry_run_after_the_first_pass_shows_exactly_the_added_cells(dry_after_first, first_pass):
    n = len(first_pass["added"])
    for rule in ("capture", "pr", "screen", "ablate"):
        assert dry_after_first.get(rule) == n, (rule, dry_after_first)
    assert dry_after_first.get("refine") == 1  # round 2 of tiny-refine
    assert "probe" not in dry_after_first and "hub_branches" not in dry_after_first


def test_rounds_narrow_the_bracket_and_every_aggregate_uses_them(full):
    r2 = json.loads((full / "refine" / "tiny-refine" / "round2.json").read_text())
    assert r2["added"] == ["step32"]
    onsets = pl.read_parquet(full / "findings" / "f3_onsets.parquet")
    row = onsets.filter(pl.col("model") == "tiny-refine").row(0, named=True)
    assert (row["lo_revision"], row["hi_revision"], row["rounds"], row["n_added"]) == ("step32", "step64", 2, 2)
    assert row["bracket_ratio"] == pytest.approx(2.0) and not row["target_met"] and row["stop"] == refine.MAX_ROUNDS
    assert (row["unrefined_lo_revision"], row["unrefined_hi_revision"]) == ("step4", "step64")
    assert row["unrefined_ratio"] == pytest.approx(16.0)
    assert "tiny-refine induction_1_heads: onset bracket (step4, step64] 16x" in (full / "findings" / "summary.md").read_text()
    live = onsets.filter(pl.col("model") == "tiny-live").row(0, named=True)
    assert (live["n_added"], live["stop"]) == (0, refine.OFF)
    traj = pl.read_parquet(full / "models" / "tiny-refine" / "trajectory.parquet")
    assert sorted(traj["revision"].unique()) == sorted(CONFIGURED + ["step16", "step32"])
    assert (full / "cells" / "tiny-refine" / "step32" / "verdict.parquet").exists()
    circuit = pl.read_parquet(full / "findings" / "circuit_size.parquet")
    assert circuit.filter(pl.col("model") == "tiny-refine").height == 4


def test_second_run_adds_nothing(full, work):
    assert "Nothing to be done" in snakemake(work, "-n")


def test_adding_a_configured_revision_reruns_no_other_cell(full, work):
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    cfg["models"]["tiny-refine"]["revisions"] = ["step4", "step8", "step64"]
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    try:
        counts = job_counts(snakemake(work, "-n"))
    finally:
        cfg["models"]["tiny-refine"]["revisions"] = list(CONFIGURED)
        (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    for rule in ("capture", "pr", "screen", "ablate"):
        assert counts.get(rule) == 1, (rule, counts)
    assert counts.get("refine") == 2  # round 1 reruns (its screens changed), round 2 reads round 1


def test_live_panel_schedules_only_a_new_checkpoint(full, work):
    live = work / "live-ckpts"
    tiny.tiny_model("olmo", seed=300).save_pretrained(live / "checkpoint-15")
    try:
        counts = job_counts(snakemake(work, "-n"))
        assert all(counts.get(r) == 1 for r in ("capture", "pr", "screen", "ablate")), counts
        assert counts.get("trajectory") == 1 and "refine" not in counts and "probe" not in counts
        # a new *final* checkpoint also moves the final circuit every cell's ablation compares with
        tiny.tiny_model("olmo", seed=301).save_pretrained(live / "checkpoint-30")
        counts = job_counts(snakemake(work, "-n"))
        assert all(counts.get(r) == 2 for r in ("capture", "pr", "screen")), counts
        assert counts.get("ablate") == 4 and counts.get("trajectory") == 1, counts
    finally:
        shutil.rmtree(live / "checkpoint-15")
        shutil.rmtree(live / "checkpoint-30", ignore_errors=True)


def test_hub_pool_is_cached_by_a_local_rule_offline(tmp_path):
    """A hub model's pool: the recorded branch list (branch_list) through the hub_branches rule, no
    network; the refinement rounds read the cached file (resources/branches/{model}.txt)."""
    fixture = Path(__file__).parents[1] / "fixtures" / "pythia_branches.txt"
    cfg = {"models": {"pythia": {"source": "hub", "hf_id": "EleutherAI/pythia-14m", "family": "gpt_neox",
                                 "tokens_per_step": 2097152, "revisions": ["step512", "step3000"],
                                 "branch_list": str(fixture)}},
           "experiments": {"enabled": False}, "refine": {"enabled": True}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    counts = job_counts(snakemake(tmp_path, "-n"))
    assert counts.get("hub_branches") == 1 and counts.get("refine") == 2 and counts.get("fetch") == 2
    snakemake(tmp_path, "resources/branches/pythia.txt")
    cached = refine.read_branch_list(tmp_path / "resources" / "branches" / "pythia.txt")
    assert cached == refine.read_branch_list(fixture) and len(cached) == 154
