"""Calibration of the lineage check's descent test beyond the demo's toys: a long run, a shift run,
another init and a sparse panel (docs/integrity.md, "Calibration").

1. trains the toy-olmo recipe (``headtrace.models.toy.recipe.DEFAULTS["olmo"]``, seed 0, unchanged)
   twice as long as the demo (2000 steps; checkpoints at 0, 1, 2, 5, 10, 20, 50 and every 100 steps),
   and a shift continuation of 100 steps from its step1000 (the demo's data_shift settings: zipf data,
   warmup 10, seed 1);
2. prints each revision's cosine to step0 with its null SD and z, the link to the previous revision, the
   descent (direct / chain / none) and the flags: the long run, the shift run, the long run behind another
   seed's init (EleutherAI/pythia#203's case), a sparse panel (step0, step1000, step2000), and a panel
   starting at step100 (the reference warning).

Usage: .venv/bin/python benchmarks/lineage_drift.py [--out DIR]  (about 6 minutes on one core).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import polars as pl
import torch

from headtrace.core.revisions import toy_step
from headtrace.findings import lineage
from headtrace.models import fingerprint
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy

STEPS = sorted({0, 1, 2, 5, 10, 20, 50, *range(100, 2001, 100)})


def fp_folder(folder: Path, model: str, revision: str) -> pl.DataFrame:
    return fingerprint.fingerprint_rows(sorted(folder.glob("*.safetensors")), model, revision)


def show(name: str, fp: pl.DataFrame) -> None:
    revs = fp["revision"].unique().to_list()
    t = lineage.model_lineage(fp, {r: toy_step(r) for r in revs})
    mod = lineage._Model(fp, t["revision"].to_list())
    print(name)
    for i, r in enumerate(t.iter_rows(named=True)):
        link = lineage.pair_stats(mod, i - 1, i) if i else None
        z = r["cos_from_first"] / r["cos_sd"]
        print(f"  {r['revision']:>9} cos {r['cos_from_first']:+.3f} ± {r['cos_sd']:.3f} (z {z:5.1f})"
              + (f"  link z {link['cos'] / link['cos_sd']:5.1f}" if link else "")
              + f"  {r['descent']:<9} {', '.join(r['flags']) or '-'}")
    for w in lineage.reference_warnings(t):
        print("  warning:", w)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="keep the checkpoints here (default: a temporary folder)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        r = toy_recipe.recipe("olmo")
        toy.train("olmo", root / "long", arch=r["arch"], data=r["data"], optim=r["optim"], max_steps=2000,
                  checkpoint_steps=STEPS, seed=0, progress=False)
        toy.train("olmo", root / "shift", arch=r["arch"], data={"kind": "zipf", "token_low": 32, "token_high": 127},
                  optim={**r["optim"], "warmup": 10}, max_steps=100, checkpoint_steps=[0, 10, 50, 100], seed=1,
                  init_from=str(root / "long" / "step1000"), progress=False)
        toy.build_model("olmo", r["arch"], 1).save_pretrained(root / "seed1-init")
        long = pl.concat([fp_folder(root / "long" / f"step{s}", "long", f"step{s}") for s in STEPS])
        shift = pl.concat([fp_folder(root / "shift" / f"step{s}", "shift", f"step{s}") for s in (0, 10, 50, 100)])
        show("long run (toy-olmo recipe, 2000 steps)", long)
        show("shift run (100 steps from step1000)", shift)
        show("another init behind the long run (seed 1's init as step0)",
             pl.concat([fp_folder(root / "seed1-init", "long", "step0"), long.filter(pl.col("revision") != "step0")]))
        show("sparse panel", long.filter(pl.col("revision").is_in(["step0", "step1000", "step2000"])))
        show("panel without its init", long.filter(pl.col("revision").is_in(["step100", "step500", "step1000"])))
        same = set(shift.filter((pl.col("revision") == "step0") & (pl.col("kind") == "tensor"))["sha256"].to_list()) == \
            set(long.filter((pl.col("revision") == "step1000") & (pl.col("kind") == "tensor"))["sha256"].to_list())
        print("shift step0 tensors = long step1000 tensors:", same)


if __name__ == "__main__":
    main()
