"""`headtrace cell run/step1500` names the model after the run folder and the revision after the
checkpoint folder, as a local config names them (not model 'step1500' with an empty revision)."""
from __future__ import annotations

import polars as pl
from tiny import tiny_model

from headtrace import cli


def test_a_checkpoint_folder_is_revision_of_its_run(tmp_path, capsys):
    tiny_model("gpt2", vocab_size=128).save_pretrained(tmp_path / "my-run" / "step1500")
    rc = cli.main(["cell", str(tmp_path / "my-run" / "step1500"), "--n-sequences", "16", "--no-ablate",
                   "--probe", "auto", "--device", "cpu", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0 and "my-run step1500: induction circuit" in out
    screen = pl.read_parquet(tmp_path / "out" / "screen.parquet")
    assert screen["model"].unique().to_list() == ["my-run"] and screen["revision"].unique().to_list() == ["step1500"]
