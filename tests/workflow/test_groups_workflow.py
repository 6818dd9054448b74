"""End-to-end: a seed group of two tiny toy seeds (issue 35), the seed experiment beside it.

``tiny-toy`` (revisions step0, step2, step4) and ``tiny-toy-seed1``, which the seed experiment
adds with the base's ends only (step0, step4: a revision the other member has is missing), form
the group ``tiny``. The group's cross-seed ablation runs through its own rules over the same
members, checkpoints, probes and settings as the seed experiment's: its table must be the
experiment's, value for value.

Test-only device: tiny toys trained 4 steps form no induction heads at the papers' 50x, so the
circuits would be empty and the ablation would compare nothing; ``screen.induction_threshold`` is
set to 1.0 here (every head at or above chance-level selectivity), which gives both seeds
non-empty circuits of the tiny model's heads.
"""
from __future__ import annotations

import subprocess

import polars as pl
import pytest
import yaml
from helpers.workflow import PROBE, ROOT, SNAKEMAKE, job_counts, snakemake
from polars.testing import assert_frame_equal

pytestmark = pytest.mark.slow

TRAIN = {
    "arch": {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64, "vocab_size": 128, "max_position_embeddings": 128},
    "optim": {"batch_size": 4, "seq_len": 64},
    "data": {"repeat_min": 8, "repeat_max": 24, "token_low": 2, "token_high": 128},
}


def group_config() -> dict:
    return {
        "models": {"tiny-toy": {"source": "toy", "family": "gpt_neox", "revisions": ["step0", "step2", "step4"],
                                "train": TRAIN, "pool": 0}},
        "groups": {"tiny": {"members": {"tiny-toy": 0, "tiny-toy-seed1": 1}}},
        "probe": PROBE,
        "screen": {"induction_threshold": 1.0},
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"n_random": 3, "batch_size": 8},
        "bootstrap": {"n_resamples": 0},
        "experiments": {"seeds": {"base": "tiny-toy", "seeds": [0, 1]}, "n_random": 3},
    }


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = tmp_path_factory.mktemp("groups")
    (work / "config.yaml").write_text(yaml.safe_dump(group_config()))
    return work


@pytest.fixture(scope="module")
def ran(workdir, warm_jobs):
    dry = snakemake(workdir, "-n")
    out = snakemake(workdir, env=warm_jobs)  # jobs in forks of a warm server, as make demo runs them
    return dry, out


def test_dry_run_lists_the_group_jobs(ran):
    counts = job_counts(ran[0])
    assert counts["group_cross_seed_table"] == 1 and counts["findings"] == 1  # the findings job writes the group tables
    assert counts["group_cross_seed_ablation"] == 2 and counts["cross_seed_ablation"] == 2
    assert counts["train_toy"] == 2


def test_group_tables_carry_every_member(ran, workdir):
    res = workdir / "results" / "groups" / "tiny"
    mem = pl.read_parquet(res / "group_members.parquet")
    assert mem["member"].to_list() == ["tiny-toy", "tiny-toy-seed1"] and mem["seed"].to_list() == [0, 1]
    assert mem["n_revisions"].to_list() == [3, 2] and mem["present"].all()
    assert mem["n_circuit"].min() > 0  # the test-only threshold gives both seeds a circuit
    ms = pl.read_parquet(res / "group_milestones.parquet")
    assert (ms["n_members"] == 2).all() and (ms["n_used"] == 2).all()
    gaps = pl.read_parquet(res / "group_gaps.parquet")
    assert (gaps["n_decided"] + gaps["n_undecided"] + gaps["n_absent"] == 2).all()
    s = pl.read_parquet(res / "group_summary.parquet").row(0, named=True)
    assert s["n_members"] == 2 and s["jaccard_n_pairs"] == 1


def test_group_cross_seed_ablation_reproduces_the_seed_experiment(ran, workdir):
    """Identical inputs (members, seeds, checkpoints, probes, n_random, seed, exact_max): identical
    tables, through the group's rules."""
    exp = pl.read_parquet(workdir / "results" / "experiments" / "cross_seed_ablation.parquet")
    grp = pl.read_parquet(workdir / "results" / "groups" / "tiny" / "group_cross_seed.parquet")
    assert exp.height == 4 and exp["n_heads"].min() > 0
    assert_frame_equal(grp.sort("circuit_seed", "model_seed"), exp.sort("circuit_seed", "model_seed"))
    assert (workdir / "results" / "groups" / "tiny" / "figures" / "cross_seed.png").exists()


def test_a_group_of_two_geometries_fails_before_any_job(tmp_path):
    cfg = group_config()
    cfg["models"]["tiny-wide"] = {"source": "toy", "family": "gpt_neox", "revisions": ["step0", "step4"], "pool": 0,
                                  "train": {**TRAIN, "seed": 2, "arch": {**TRAIN["arch"], "n_heads": 8}}}
    cfg["groups"]["tiny"]["members"]["tiny-wide"] = 2
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(tmp_path / "config.yaml"), "-n"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "groups.tiny.members.tiny-wide: geometry differs from tiny-toy (heads 8 vs 4, d_head 4 vs 8" \
        in proc.stdout + proc.stderr
    assert "Job stats" not in proc.stdout


def test_the_first_screen_shows_the_group_row_before_its_members(ran, workdir):
    page = (workdir / "results" / "findings" / "summary.html").read_text()
    assert page.index('<tr class="group" data-group="tiny">') < page.index('<tr data-model="tiny-toy">') \
        < page.index('<tr data-model="tiny-toy-seed1">')
    assert '<section id="group-tiny">' in page and "Cross-seed ablation" in page
    head = (workdir / "results" / "findings" / "headline.html").read_text()
    assert 'data-group="tiny"' in head and "Across the 2 seeds of tiny" in head
    md = (workdir / "results" / "findings" / "summary.md").read_text()
    assert "**tiny (seeds 0, 1)**" in md and "Across the 2 seeds of tiny" in md
    # the sentence's words are the html's: one structure behind both
    sent = next(line[2:] for line in md.splitlines() if line.startswith("- Across the 2 seeds of tiny"))
    import html as H
    assert H.escape(sent) in page


def test_a_group_without_its_own_cross_seed_ablation_reads_the_seed_experiment_s(ran, workdir, warm_jobs):
    """groups.NAME.cross_seed_ablation: false (the demo's choice) on a group whose members and seeds are
    the seed experiment's: no second ablation; the group's sentence reads the experiment's table."""
    cfg = yaml.safe_load((workdir / "config.yaml").read_text())
    cfg["groups"]["tiny"]["cross_seed_ablation"] = False
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    counts = job_counts(snakemake(workdir, "-n"))
    assert "group_cross_seed_ablation" not in counts and "cross_seed_ablation" not in counts
    snakemake(workdir, env=warm_jobs)
    md = (workdir / "results" / "findings" / "summary.md").read_text()
    sent = next(line for line in md.splitlines() if line.startswith("- Across the 2 seeds of tiny"))
    assert "cross-seed ablation, top-1 drop in a seed's final model" in sent
