"""headtrace.analyze and `headtrace cell`: the per-cell recipe on an in-memory model.

The workflow runs once on a local panel holding one tiny random checkpoint of each family; for
each, ``analyze`` on the same checkpoint and probe must give the same screen and verdict tables.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

import headtrace
from headtrace import api
from headtrace.core import probe, tables
from headtrace.models import hub

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBE = {"n_sequences": 24, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}
N_RANDOM = 4


def test_defaults_are_the_schema_defaults():
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())["properties"]
    for block, values in api.DEFAULTS.items():
        props = schema[block]["properties"]
        for key, value in values.items():
            assert props[key].get("default") == value, f"api.DEFAULTS[{block}][{key}] != schema default"


def test_family_detection_and_bad_input():
    for fam in tiny.FAMILY_NAMES:
        assert api.family_of(tiny.tiny_model(fam)).name == fam
    with pytest.raises(ValueError, match="config.model_type"):
        api.family_of(object())
    with pytest.raises(ValueError, match="vocabulary has 128"):
        headtrace.analyze(tiny.tiny_model("olmo"), probe={"n_sequences": 4, "seq_len": 64, "ab_range": [10, 40]}, ablate=False)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['ab_low', 'token_low'\].*token_range"):
        headtrace.analyze(tiny.tiny_model("olmo"), probe={"token_low": 2, "ab_low": 10}, ablate=False)
    with pytest.raises(ValueError, match="exceeds the model's context length of 256"):
        headtrace.analyze(tiny.tiny_model("olmo"), probe={"n_sequences": 4, "seq_len": 300,
                                                          "token_range": [2, 128]}, ablate=False)


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    work = tmp_path_factory.mktemp("api")
    models = {}
    for i, fam in enumerate(tiny.FAMILY_NAMES):
        path = work / "ckpt" / fam
        tiny.tiny_model(fam, seed=10 + i, n_layers=2, n_heads=4).save_pretrained(path / "final")
        models[f"tiny-{fam}"] = {"source": "local", "path": str(path), "family": "auto",
                                 "tokens": {"final": 1000}, "revisions": ["final"]}
    cfg = {"models": models, "probe": PROBE, "capture": {"device": "cpu", "batch_size": 8},
           "ablation": {"n_random": N_RANDOM, "batch_size": 8}, "experiments": {"enabled": False}}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake = str(Path(sys.executable).parent / "snakemake")
    targets = [f"results/cells/{m}/final/{t}.parquet" for m in models for t in ("screen", "positional", "verdict")]
    proc = subprocess.run([snakemake, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
                           str(work / "config.yaml"), "--cores", "2", *targets],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return work, cfg


@pytest.mark.slow
@pytest.mark.parametrize("family", tiny.FAMILY_NAMES)
def test_analyze_equals_the_workflow(panel, family):
    work, cfg = panel
    name = f"tiny-{family}"
    model, _ = hub.load_model("local", cfg["models"][name]["path"] + "/final", "final")
    batch = probe.batch_from_table(tables.read(work / f"results/probes/{name}/induction_batch.parquet"))
    cell = headtrace.analyze(model, probe=batch, n_random=N_RANDOM, batch_size=8, device="cpu", name=name,
                             revision="final", tokens=1000, progress=False)
    cells = work / "results" / "cells" / name / "final"
    for what in ("screen", "positional", "verdict"):
        ours = tables.conform(getattr(cell, what), what)
        theirs = pl.read_parquet(cells / f"{what}.parquet")
        assert_frame_equal(ours.select(theirs.columns), theirs, check_dtypes=False)
    assert cell.verdict.filter(pl.col("circuit") == "circuit").height == 1


@pytest.mark.slow
def test_cli_cell_writes_tables(panel, tmp_path):
    work, cfg = panel
    exe = str(Path(sys.executable).parent / "headtrace")
    ckpt = cfg["models"]["tiny-olmoe"]["path"] + "/final"
    proc = subprocess.run([exe, "cell", ckpt, "--out", str(tmp_path / "out"), "--n-sequences", "16",
                           "--seq-len", "64", "--ab-range", "20", "40", "--token-range", "2", "128", "--n-random", "2", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "induction circuit" in proc.stdout
    assert "unablated top-1: B " in proc.stdout and "a shuffled-B control token" in proc.stdout
    for what in api.TABLES:
        df = pl.read_parquet(tmp_path / "out" / f"{what}.parquet")
        tables.conform(df, what)
        assert df.height > 0
    proc = subprocess.run([exe, "cell", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no config.json" in proc.stderr


def test_ablation_n_sequences_uses_the_first_sequences():
    """ablation.n_sequences: every condition sees the first n probe sequences; the screen all of them."""
    model = tiny.tiny_model("gpt_neox", n_layers=2, n_heads=4)
    kw = dict(probe={"n_sequences": 12, "seq_len": 64, "token_range": [2, 128], "ab_range": [20, 40]},
              n_random=2, batch_size=8, device="cpu", progress=False)
    cell = headtrace.analyze(model, settings={"ablation": {"n_sequences": 5}}, **kw)
    assert set(cell.ablation["n_sequences"].to_list()) == {5}
    full = headtrace.analyze(model, **kw)
    assert set(full.ablation["n_sequences"].to_list()) == {12}
    assert_frame_equal(cell.screen, full.screen)
