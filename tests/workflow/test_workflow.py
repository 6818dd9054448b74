"""End-to-end Snakemake runs on a two-revision mini config (local tiny checkpoints + a tiny toy).

The session's tiny panel (the ``tiny_panel`` fixture, helpers/tiny_panel.py: one run for every module,
both xdist workers) is read by the tests: dry run -> run -> nothing left to do; the tests that change
the run do it on this module's copy of it: adding a revision schedules only that cell -> a rerun of one
cell is bit-identical -> the lineage check's on_suspect.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import polars as pl
import pytest
import yaml
from helpers.workflow import PROBE, ROOT, SNAKEMAKE, job_counts, snakemake

from headtrace.core import tables
from headtrace.probe import synthetic

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def workdir(tiny_panel):
    """The session's tiny panel (helpers.tiny_panel): read-only, for the tests that only read the run."""
    return tiny_panel.workdir


@pytest.fixture(scope="module")
def ran(tiny_panel):
    """(the dry run's output before the run, the run's output)."""
    return tiny_panel.dry, tiny_panel.out


@pytest.fixture(scope="module")
def own(tiny_panel, tmp_path_factory):
    """This module's copy of the run, for the tests that change it (a config, a rerun, a deleted cell):
    shared by them in file order, as the module's own run was; each restores what the later ones read."""
    return tiny_panel.copy(tmp_path_factory.mktemp("wf") / "run")


def test_dry_run_lists_the_per_cell_jobs(ran):
    counts = job_counts(ran[0])
    for rule in ("capture", "pr", "screen", "positional", "ablate"):
        assert counts[rule] == 6, (rule, counts)
    assert counts["train_toy"] == 1 and counts["probe"] == 3 and counts["trajectory"] == 3
    assert counts["lineage"] == 3  # one per model run here (docs/integrity.md)


def test_gguf_checkpoints_run_end_to_end(ran, workdir):
    """A local model whose revisions are GGUF files: every cell ran from its file (format, quantization and
    the safetensors copy in provenance; its tensors fingerprinted), the text probe read its own tokenizer."""
    res = workdir / "results"
    for rev in ("rev-a", "rev-c"):
        cell = res / "cells" / "tiny-gguf" / rev
        prov = tables.conform(pl.read_parquet(cell / "provenance.parquet"), "provenance").row(0, named=True)
        assert prov["weights_format"] == "gguf" and prov["weight_files"] == [f"{rev}.gguf"]
        assert prov["quantization"] == ["F32", "Q8_0"]
        assert (workdir / prov["dequantized_copy"] / "model.safetensors").is_file()  # relative to the run
        fp = pl.read_parquet(cell / "fingerprint.parquet")
        assert "Q8_0" in fp["dtype"].to_list()
        tables.conform(pl.read_parquet(cell / "verdict.parquet"), "verdict")
    text = pl.read_parquet(res / "probes" / "tiny-gguf" / "text_batch.parquet")
    assert text.height > 0
    lineage = pl.read_parquet(res / "models" / "tiny-gguf" / "lineage.parquet")
    assert lineage.height == 2


def test_outputs_follow_the_contract(ran, workdir):
    res = workdir / "results"
    for model in ("tiny-olmo", "tiny-toy"):
        tables.conform(pl.read_parquet(res / "probes" / model / "induction_batch.parquet"), "probe")
        traj = tables.conform(pl.read_parquet(res / "models" / model / "trajectory.parquet"), "trajectory")
        assert traj["revision"].n_unique() == 2
    cell = res / "cells" / "tiny-olmo" / "rev-a"
    screen = tables.conform(pl.read_parquet(cell / "screen.parquet"), "screen")
    assert screen.height == 2 * 4 and set(screen["tokens"]) == {1000}
    tables.conform(pl.read_parquet(cell / "pr.parquet"), "pr")
    abl = tables.conform(pl.read_parquet(cell / "ablation.parquet"), "ablation")
    assert {"baseline", "circuit", "matched_random", "upper_bound", "final_circuit"} <= set(abl["condition"])
    tables.conform(pl.read_parquet(cell / "verdict.parquet"), "verdict")
    boot = tables.conform(pl.read_parquet(cell / "bootstrap.parquet"), "bootstrap")
    assert boot.height == 2 * 4 * 6 and (boot["n_resamples"] == 1000).all()
    tables.conform(pl.read_parquet(cell / "bootstrap_milestones.parquet"), "bootstrap_milestones")
    assert (cell / "class_masses.safetensors").exists()
    pos = tables.conform(pl.read_parquet(cell / "positional.parquet"), "positional")
    assert pos.height == 2 * 4 and (pos["n_ab"] > 1).all()
    assert "## Screen check: positional heads" in (res / "findings" / "summary.md").read_text()
    ob = tables.conform(pl.read_parquet(res / "findings" / "f3_onset_bootstrap.parquet"), "f3_onset_bootstrap")
    assert set(ob["model"]) == {"tiny-olmo", "tiny-gguf", "tiny-toy"} and (ob["n_resamples"] == 1000).all()
    assert not (cell / "head_outputs.safetensors").exists(), "per-head outputs are temp() by default"
    assert (workdir / "resources" / "checkpoints" / "tiny-toy" / "step4" / "model.safetensors").exists()
    assert (workdir / "logs" / "capture" / "tiny-olmo" / "rev-a.log").exists()


def test_measures_run_end_to_end(ran, workdir):
    """Every run cell writes the field's measures (repeated-random and text probes); the text probe is
    built once per model; the findings tables compare them with the synthetic probe's."""
    res = workdir / "results"
    counts = job_counts(ran[0])
    assert counts["text_probe"] == 3 and counts["measures_findings"] == 1
    for model, revisions in (("tiny-olmo", ("rev-a", "rev-c")), ("tiny-toy", ("step0", "step4"))):
        text = tables.conform(pl.read_parquet(res / "probes" / model / "text_batch.parquet"), "text_probe")
        assert text.height == 6 and text["file"][0] == "text/*.txt"
        assert text["tokenizer"][0] == ("bytes" if model == "tiny-toy" else str(workdir / "local-ckpts" / "rev-a"))
        for rev in revisions:
            m = tables.conform(pl.read_parquet(res / "cells" / model / rev / "measures.parquet"), "measures")
            assert set(m["probe"]) == {"repeated", "text"}
            assert m.filter(pl.col("probe") == "repeated")["prefix_matching"].null_count() == 0
    over = tables.conform(pl.read_parquet(res / "findings" / "measures" / "measures_over_training.parquet"),
                          "measures_over_training")
    # 3 models x 2 revisions x the default measures.sink_eps [0.3, 0.2, 0.5], the headline's eps first
    assert over.height == 18 and over["text_sink_rate"].null_count() == 0 and over["eps"][:3].to_list() == [0.3, 0.2, 0.5]
    assert set(over.select("model", "text_n_documents", "text_windows", "synthetic_training").unique().rows()) == {
        ("tiny-olmo", 6, "start", False), ("tiny-gguf", 6, "start", False), ("tiny-toy", 6, "start", True)}
    tables.conform(pl.read_parquet(res / "findings" / "measures" / "measures_onsets.parquet"), "f3_milestones")
    cmp = tables.conform(pl.read_parquet(res / "findings" / "measures" / "measures_comparison.parquet"),
                         "measures_comparison")
    assert set(cmp["model"]) <= {"tiny-olmo", "tiny-gguf", "tiny-toy"}


def test_empty_text_file_fails_before_any_job(workdir, tmp_path):
    cfg = yaml.safe_load((workdir / "config.yaml").read_text())
    (tmp_path / "empty.txt").write_text("\n")
    cfg["text_probe"]["file"] = str(tmp_path / "empty.txt")
    bad = tmp_path / "config.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(bad), "-n"], capture_output=True, text=True)
    assert proc.returncode != 0 and "empty.txt' holds no text" in proc.stdout + proc.stderr


def test_verdicts_record_a_held_out_ablation(ran, workdir):
    """ablation.probe: held_out (the default): every cell's ablation ran on the probe's settings with
    seed probe.seed + 1, none of its sequences one the screen read, and both tables say so."""
    import numpy as np

    from headtrace import api

    res = workdir / "results"
    for model, revisions in (("tiny-olmo", ("rev-a", "rev-c")), ("tiny-toy", ("step0", "step4"))):
        screen_batch = synthetic.batch_from_table(pl.read_parquet(res / "probes" / model / "induction_batch.parquet"))
        held, _ = api.ablation_probe(screen_batch, PROBE)
        assert not {r.tobytes() for r in held.tokens} & {r.tobytes() for r in screen_batch.tokens}
        assert np.array_equal(held.tokens, api.probe_batch({**PROBE, "seed": PROBE["seed"] + 1}).tokens)
        for rev in revisions:
            for what in ("ablation", "verdict"):
                t = pl.read_parquet(res / "cells" / model / rev / f"{what}.parquet")
                assert t.height or what == "verdict"  # the ablation table always has its baseline row
                assert t.height == 0 or t.select("ablation_probe", "ablation_probe_seed", "ablation_probe_sha256", "n_sequences",
                                "ablation_probe_redrawn").unique().rows() == [
                    ("held_out", PROBE["seed"] + 1, synthetic.tokens_sha256(held.tokens), PROBE["n_sequences"], 0)], (model, rev, what)


def test_second_dry_run_has_nothing_to_do(ran, workdir):
    assert "Nothing to be done" in snakemake(workdir, "-n")


def test_adding_a_revision_schedules_only_that_cell(ran, own):
    workdir = own  # a change of config: on this module's copy of the run
    cfg = yaml.safe_load((workdir / "config.yaml").read_text())
    cfg["models"]["tiny-olmo"]["revisions"] = ["rev-a", "rev-b", "rev-c"]
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    try:
        counts = job_counts(snakemake(workdir, "-n"))
    finally:
        cfg["models"]["tiny-olmo"]["revisions"] = ["rev-a", "rev-c"]
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert counts.get("capture") == 1 and counts.get("pr") == 1 and counts.get("screen") == 1
    assert counts.get("ablate") == 1 and counts.get("trajectory") == 1 and counts.get("lineage") == 1
    assert "train_toy" not in counts and "probe" not in counts


def test_jobs_ran_in_forks_of_the_warm_server(ran, workdir):
    log = (workdir / "logs" / "warm.log").read_text()
    forks = re.findall(r"^fork \d+: (\S+)$", log, re.M)
    exits = re.findall(r"^fork \d+: exit (\d+)$", log, re.M)
    assert any(f.endswith("capture.py") for f in forks) and any(f.endswith("ablate.py") for f in forks), log[-2000:]
    assert len(exits) == len(forks) and set(exits) == {"0"}


def test_rerun_is_identical(ran, own):
    """The first run's jobs ran in forks of the warm server; this rerun of one cell (of this module's
    copy of the run) runs each job in its own process, as a cluster does: the tables are the same."""
    workdir = own
    cell = workdir / "results" / "cells" / "tiny-olmo" / "rev-c"
    before = {f: pl.read_parquet(cell / f) for f in ("screen.parquet", "pr.parquet", "ablation.parquet",
                                                      "attention.parquet", "measures.parquet", "verdict.parquet")}
    shutil.rmtree(cell)
    snakemake(workdir)
    for f, df in before.items():
        assert pl.read_parquet(cell / f).equals(df), f


def test_bad_config_fails_before_any_job(workdir, tmp_path):
    cfg = yaml.safe_load((workdir / "config.yaml").read_text())
    cfg["screen"] = {"baseline": "median"}
    bad = tmp_path / "config.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(bad), "-n"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "baseline" in proc.stdout + proc.stderr


def test_lineage_table_flags_the_independent_local_revision_and_on_suspect(ran, own, warm_jobs):
    """results/models/{model}/lineage.parquet per run model: the toy run (step0 -> step4) raises no
    flag; the local tiny-olmo's rev-a and rev-c are inits of two seeds (tiny.tiny_model), so rev-c
    does not descend from rev-a. provenance.on_suspect: fail stops the lineage job naming it; drop
    leaves it out of the trajectory. (Last in this module: it rewrites the trajectory of this module's
    copy of the run.)"""
    workdir = own
    res = workdir / "results" / "models"
    toy = tables.conform(pl.read_parquet(res / "tiny-toy" / "lineage.parquet"), "lineage")
    assert toy["revision"].to_list() == ["step0", "step4"] and toy["flags"].list.len().sum() == 0
    olmo = tables.conform(pl.read_parquet(res / "tiny-olmo" / "lineage.parquet"), "lineage")
    by = {r["revision"]: r for r in olmo.iter_rows(named=True)}
    assert by["rev-a"]["flags"] == [] and "not_descended_from_init" in by["rev-c"]["flags"]
    assert by["rev-c"]["tokens"] == 3000 and by["rev-c"]["reference"] == "rev-a"
    assert "lineage flag: model 'tiny-olmo' revision 'rev-c'" in (workdir / "logs" / "lineage" / "tiny-olmo.log").read_text()
    cfg = yaml.safe_load((workdir / "config.yaml").read_text())
    try:
        cfg["provenance"] = {"on_suspect": "fail"}
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
        with pytest.raises(AssertionError, match="lineage"):
            snakemake(workdir, "results/models/tiny-olmo/lineage.parquet", "--forcerun", "lineage", env=warm_jobs)
        log = (workdir / "logs" / "lineage" / "tiny-olmo.log").read_text()
        assert "on_suspect is 'fail'" in log and "revision 'rev-c': not descended from the first revision's init" in log
        cfg["provenance"] = {"on_suspect": "drop"}
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
        snakemake(workdir, "results/models/tiny-olmo/trajectory.parquet", env=warm_jobs)
        assert pl.read_parquet(res / "tiny-olmo" / "trajectory.parquet")["revision"].unique().to_list() == ["rev-a"]
    finally:
        cfg.pop("provenance")
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))


@pytest.mark.slow
def test_the_workflow_is_lint_clean():
    """`snakemake --lint` on the embedded config: every rule has its log, resources and environment, no rule
    file mixes in functions (they live in common.smk); a new rule that skips one fails here, not in review."""
    proc = subprocess.run([SNAKEMAKE, "--lint", "-s", str(ROOT / "Snakefile"), "--directory", str(ROOT)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "SLURM_CONF": os.devnull})
    assert proc.returncode == 0 and "Congratulations" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
