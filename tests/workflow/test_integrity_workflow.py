"""End to end (Snakemake, --keep-going): a pickle-only checkpoint, single and sharded, gives the
same tables as its safetensors copy; a pickle with a code payload runs nothing and fails its own
cell by name; a checkpoint missing a tensor fails its own cell by name; the other cells finish.
Every cell that ran has a fingerprint table."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml
from helpers.checkpoints import Payload, save_pickle_copy
from tiny import tiny_model

from headtrace.core import tables
from headtrace.models import weights


ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
GOOD = ("st", "pk1", "pk3")
REVISIONS = (*GOOD, "evil", "broken")


@pytest.mark.slow
def test_pickle_cells_match_safetensors_and_bad_checkpoints_fail_their_own_cell(tmp_path, warm_jobs):
    work, ck = tmp_path, tmp_path / "ckpt"
    tiny_model("olmo", seed=5, vocab_size=128).save_pretrained(ck / "st")
    save_pickle_copy(ck / "st", ck / "pk1")
    save_pickle_copy(ck / "st", ck / "pk3", shards=3)
    marker = work / "payload-ran"
    save_pickle_copy(ck / "st", ck / "evil")
    sd = torch.load(ck / "evil" / weights.PICKLE_SINGLE, weights_only=True)
    sd["model.extra"] = Payload(marker)
    torch.save(sd, ck / "evil" / weights.PICKLE_SINGLE)
    save_pickle_copy(ck / "st", ck / "broken")
    sd = torch.load(ck / "broken" / weights.PICKLE_SINGLE, weights_only=True)
    gone = "model.layers.1.self_attn.o_proj.weight"
    del sd[gone]
    torch.save(sd, ck / "broken" / weights.PICKLE_SINGLE)

    cfg = {
        "models": {"tiny": {"source": "local", "path": str(ck), "family": "auto",
                            "tokens": {r: 1000 * (i + 1) for i, r in enumerate(REVISIONS)},
                            "revisions": list(REVISIONS)}},
        "probe": {"n_sequences": 16, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]},
        "capture": {"device": "cpu", "batch_size": 8},
        "ablation": {"enabled": False},
        "experiments": {"enabled": False},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    targets = [f"results/cells/tiny/{r}/{t}.parquet" for r in REVISIONS for t in ("screen", "pr")]
    env = {**warm_jobs, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # cannot switch our explicit weights_only off
    proc = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
                           str(work / "config.yaml"), "--cores", "2", "--keep-going", *targets],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode != 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not marker.exists()

    logs, cells = work / "logs" / "capture" / "tiny", work / "results" / "cells" / "tiny"
    evil = (logs / "evil.log").read_text()
    assert "revision 'evil'" in evil and "pytorch_model.bin refused" in evil and "posix.system" in evil
    broken = (logs / "broken.log").read_text()
    assert "revision 'broken'" in broken and "1 missing" in broken and gone in broken
    for r in ("evil", "broken"):
        assert not (cells / r / "attention.parquet").exists()

    def table(rev, name):
        return tables.read(cells / rev / f"{name}.parquet").drop("revision", "tokens", strict=False)

    for name in ("attention", "pr", "screen"):
        ref = table("st", name)
        for rev in ("pk1", "pk3"):
            assert table(rev, name).equals(ref), (rev, name)

    prov = {r: tables.read(cells / r / "provenance.parquet").row(0, named=True) for r in GOOD}
    assert [prov[r]["weights_format"] for r in GOOD] == ["safetensors", "pickle", "pickle"]
    assert prov["pk3"]["weight_files"] == [f"pytorch_model-0000{i}-of-00003.bin" for i in (1, 2, 3)]
    fps = {r: tables.conform(tables.read(cells / r / "fingerprint.parquet"), "fingerprint") for r in GOOD}
    tensors = {r: fps[r].filter(pl.col("kind") == "tensor").select("name", "sha256", "norm", "sketch").sort("name")
               for r in GOOD}
    assert tensors["pk1"].equals(tensors["pk3"])
    joined = tensors["st"].join(tensors["pk1"], on="name", suffix="_pk")  # the pickle may add tied copies
    assert joined.height == tensors["st"].height
    for col in ("sha256", "norm", "sketch"):
        assert joined[col].to_list() == joined[f"{col}_pk"].to_list(), col
    assert fps["pk3"].filter(pl.col("kind") == "file")["name"].to_list() == prov["pk3"]["weight_files"]
