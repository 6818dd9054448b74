"""The toy-recipe trial: a live screen at each checkpoint that leaves training untouched."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from safetensors.torch import load_file

from headtrace import cli, tables, toy, toy_trial

TINY = {"arch": {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64},
        "optim": {"batch_size": 2, "seq_len": 128, "warmup": 1, "log_every": 0}}


def _screen(sel_induction, sel_first_token, n_heads=3, induction_threshold=50.0):
    """A hand-built screen (the columns the trial reads), its circuit at ``induction_threshold``."""
    n = len(sel_induction)
    df = pl.DataFrame({"model": ["m"] * n, "revision": ["r"] * n, "tokens": [None] * n,
                       "layer": [i // n_heads for i in range(n)], "head": [i % n_heads for i in range(n)],
                       "sel_induction": sel_induction, "sel_first_token": sel_first_token},
                      schema_overrides={"layer": pl.Int32, "head": pl.Int32, "tokens": pl.Int64})
    return df.with_columns(in_induction_circuit=pl.col("sel_induction").fill_nan(None).fill_null(0.0)
                           >= induction_threshold)


def test_summarize_counts_the_circuit_and_the_first_token_heads_per_layer():
    sel_induction, sel_first_token = [1.0, 50.0, 49.9, 80.0, math.nan, 2.0], [30.0, 1.0, 29.9, math.nan, 300.0, 31.0]
    screen = _screen(sel_induction, sel_first_token)
    positional = pl.DataFrame({"model": ["m"], "revision": ["r"], "layer": [1], "head": [0],
                               "induction_peak_share": [0.9], "induction_peak_ab": [70],
                               "uniform_peak_share": [0.043], "positional_induction": [True]},
                              schema_overrides={"layer": pl.Int32, "head": pl.Int32})
    row = toy_trial.summarize(screen, positional, step=7, top1=0.25)
    assert row["induction_heads"] == ["L0H1", "L1H0"]  # 50.0 passes, 49.9 and NaN do not
    assert row["positional_heads"] == ["L1H0"]
    assert row["first_token_by_layer"] == [1, 2] and row["n_first_token"] == 3
    assert row["bos_fraction"] == pytest.approx(0.5)
    assert row["max_induction"] == 80.0 and row["max_first_token"] == 300.0
    assert (row["step"], row["top1"]) == (7, 0.25)
    strict = toy_trial.summarize(_screen(sel_induction, sel_first_token, induction_threshold=60.0), positional,
                                 step=7, top1=0.25, class_threshold=100.0)
    assert strict["induction_heads"] == ["L1H0"] and strict["first_token_by_layer"] == [0, 1]


@pytest.mark.parametrize("family", ("gpt_neox", "olmo", "olmoe"))
def test_on_checkpoint_sees_each_saved_step_in_eval_mode_and_leaves_training_unchanged(family, tmp_path):
    seen, batch = [], toy_trial.probe_batch(n_sequences=16)

    def look(model, step, path):
        seen.append((step, model.training, torch.is_grad_enabled(), path.name))
        toy_trial.checkpoint_row(model, batch, step)  # the whole live screen: capture, screen, top-1

    r = toy.recipe(family, TINY)
    kw = dict(arch=r["arch"], data=r["data"], optim=r["optim"], max_steps=4, checkpoint_steps=[0, 2, 4], seed=0,
              progress=False)
    toy.train(family, tmp_path / "a", on_checkpoint=look, **kw)
    toy.train(family, tmp_path / "b", **kw)
    assert seen == [(0, False, False, "step0"), (2, False, False, "step2"), (4, False, False, "step4")]
    a, b = load_file(tmp_path / "a/step4/model.safetensors"), load_file(tmp_path / "b/step4/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cli_toy_trial_prints_a_line_per_checkpoint_and_writes_the_table(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"train": TINY}))
    out = tmp_path / "trial.parquet"
    argv = ["toy-trial", "gpt_neox", "--recipe", str(recipe), "--max-steps", "3", "--every", "2",
            "--out", str(tmp_path / "ckpt"), "--table", str(out)]
    assert cli.main(argv) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step")]
    assert [int(ln.split()[1]) for ln in lines] == [0, 2, 3]  # every 2 steps, and the last
    table = tables.read(out)
    assert table.columns[:len(tables.SCHEMAS["toy_trial"])] == list(tables.SCHEMAS["toy_trial"])
    assert table["step"].to_list() == [0, 2, 3]
    assert all(len(x) == 2 for x in table["first_token_by_layer"].to_list())
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step0", "step2", "step3"]


def test_cli_toy_trial_refuses_bad_input(tmp_path, capsys):
    assert cli.main(["toy-trial", "olmo", "--max-steps", "3", "--every", "0", "--out", str(tmp_path)]) == 2
    assert "every" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2]\n")
    assert cli.main(["toy-trial", "olmo", "--recipe", str(bad), "--max-steps", "3", "--every", "1",
                     "--out", str(tmp_path)]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    bad.write_text("- 1\n- 2\n")
    assert cli.main(["toy-trial", "olmo", "--recipe", str(bad), "--max-steps", "3", "--every", "1",
                     "--out", str(tmp_path)]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    assert cli.main(["toy-trial", "olmo", "--probe-tokens", "64", "40", "--max-steps", "3", "--every", "1",
                     "--out", str(tmp_path)]) == 2
    assert "--probe-tokens 64 40" in capsys.readouterr().err


def test_cli_toy_trial_probe_tokens_narrow_the_probe(tmp_path, monkeypatch):
    seen = {}

    def fake_run(family, train, out, *, probe, **kw):
        seen["probe"] = probe
        return pl.DataFrame(schema=tables.SCHEMAS["toy_trial"])

    monkeypatch.setattr(toy_trial, "run", fake_run)
    assert cli.main(["toy-trial", "gpt_neox", "--probe-tokens", "32", "64", "--max-steps", "3", "--every", "1",
                     "--out", str(tmp_path)]) == 0
    toks = seen["probe"].tokens
    assert toks.min() >= 32 and toks.max() < 64 and len(np.unique(toks)) == 32
