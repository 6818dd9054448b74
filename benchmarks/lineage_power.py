"""Detection power of the lineage check (docs/integrity.md, "Power"): how often a revision that is not
what its name says is flagged, where the calibration (benchmarks/lineage_panel_calibration.py) measured
false alarms only.

1. **Trained toy, 30 layers.** The toy GPT-NeoX recipe at SmolLM2's depth (30 layers, d_model 32, 2 heads,
   MLP 64, the toy byte vocabulary), trained twice from random init, seeds 0 and 1, 200 steps each
   (AdamW, lr 1e-3, weight decay 0.01, batch 4 x 32 tokens of the repeat task), checkpoints at steps 0,
   5, 20, 50, 100 and 200. The faulty revision is step50, between step20 and step100:
   - *re-init k of 30 layers* (k = 1, 3, 10; 10 draws each): every tensor of k layers drawn at random
     (numpy RandomState(draw)) replaced by a fresh init's (the recipe's init, seed 1000 + draw);
   - *another seed's checkpoint at the same step*: seed 1's step50 in place of seed 0's.
   Each fault is read in two panels: with the run's step 0 (step0 ... step200) and without it
   (step5 ... step200: the earliest revision is then the reference). A fault counts as detected when the
   faulty revision carries any flag; the table also gives the flags raised and the other revisions
   flagged (false alarms beside it).
2. **Real size, one checkpoint** (``--gguf``: SmolLM2-135M-Instruct's Q4_1 GGUF, dequantized; 30 layers,
   211 matrices after the tied unembedding). With one checkpoint there is no path of training, so only
   the descent test is measured: the trained weights against themselves with k of 30 layers re-initialised
   (every tensor of the layers from a fresh init of its config, transformers ``from_config``, seeds 0-1;
   5 draws per k), z = cos / cos_sd against the threshold max(4 cos_sd, 0.05) / cos_sd.

Usage: .venv/bin/python benchmarks/lineage_power.py [--gguf PATH] [--draws 10]
(part 1 about 1 minute on one core; part 2 about 2 minutes and 3 GB of memory; a few hundred MB of
temporary files).
"""
from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import torch

from headtrace.core import tables
from headtrace.core.revisions import toy_step
from headtrace.findings import lineage
from headtrace.models import fingerprint
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy

N_LAYERS = 30
ARCH = {"n_layers": N_LAYERS, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": toy_recipe.VOCAB_SIZE,
        "max_position_embeddings": 64, "rotary_pct": 1.0}
OPTIM = {"lr": 1e-3, "warmup": 2, "batch_size": 4, "seq_len": 32, "weight_decay": 0.01, "log_every": 0}
DATA = {"kind": "repeat", "token_low": 0, "token_high": 256, "repeat_min": 4, "repeat_max": 10}
STEPS = [0, 5, 20, 50, 100, 200]
FAULTY = "step50"
K = (1, 3, 10)
LAYER = re.compile(r"\.layers\.(\d+)\.")


def fp_folder(folder: Path, revision: str, model: str = "toy") -> pl.DataFrame:
    return tables.conform(fingerprint.fingerprint_rows(sorted(folder.glob("*.safetensors")), model, revision),
                          "fingerprint")


def fp_model(model, revision: str, tmp: Path) -> pl.DataFrame:
    model.save_pretrained(tmp / revision, safe_serialization=True)
    return fp_folder(tmp / revision, revision)


def reinit(fp: pl.DataFrame, init: pl.DataFrame, layers: set[int]) -> pl.DataFrame:
    """``fp`` with every tensor of ``layers`` taken from ``init`` (same names), and its file row given a
    digest of its own (the revision is a new file)."""
    def in_layers(name: str) -> bool:
        m = LAYER.search(name)
        return bool(m) and int(m.group(1)) in layers

    names = [n for n in fp.filter(pl.col("kind") == "tensor")["name"].to_list() if in_layers(n)]
    swapped = init.filter((pl.col("kind") == "tensor") & pl.col("name").is_in(names)).with_columns(
        pl.lit(fp["revision"][0]).alias("revision"), pl.lit(fp["model"][0]).alias("model"))
    kept = fp.filter(~((pl.col("kind") == "tensor") & pl.col("name").is_in(names)))
    tag = hashlib.sha256(f"reinit {sorted(layers)}".encode()).hexdigest()
    kept = kept.with_columns(pl.when(pl.col("kind") == "file").then(pl.lit(tag)).otherwise(pl.col("sha256"))
                             .alias("sha256"))
    return pl.concat([kept, swapped.select(kept.columns)])


def verdict(fps: dict[str, pl.DataFrame]) -> tuple[list[str], list[str], dict]:
    """(the faulty revision's flags, the other revisions flagged, its lineage row)."""
    table = lineage.model_lineage(pl.concat(list(fps.values())), {r: toy_step(r) for r in fps})
    flags = {r: f for r, f in table.select("revision", "flags").iter_rows()}
    row = table.filter(pl.col("revision") == FAULTY).row(0, named=True)
    return list(flags[FAULTY]), sorted(r for r, f in flags.items() if f and r != FAULTY), row


def toy_power(draws: int) -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs = {}
        for seed in (0, 1):
            dirs = toy.train("gpt_neox", tmp / f"seed{seed}", arch=ARCH, data=DATA, optim=OPTIM, max_steps=STEPS[-1],
                             checkpoint_steps=STEPS, seed=seed, progress=False)
            runs[seed] = {p.name: fp_folder(p, p.name) for p in dirs}
        inits = {s: fp_model(toy.build_model("gpt_neox", ARCH, seed=s), "init", tmp / f"init{s}")
                 for s in range(1000, 1000 + draws)}
    healthy = runs[0]
    n_mats = healthy[FAULTY].filter((pl.col("kind") == "tensor") & (pl.col("shape").list.len() >= 2)).height
    print(f"1. trained toy, {N_LAYERS} layers ({n_mats} matrices), faulty revision {FAULTY} of "
          f"{', '.join(healthy)}")
    clean = {p: verdict({r: f for r, f in healthy.items() if p == "with step0" or r != "step0"})[1]
             for p in ("with step0", "without step0")}
    print(f"   healthy panel, flagged: with step0 {clean['with step0'] or 'none'}; "
          f"without step0 {clean['without step0'] or 'none'}")
    mod = lineage._Model(pl.concat([healthy["step20"], healthy["step100"]]), ["step20", "step100"])
    print(f"   its neighbours step20 and step100 lie {lineage.pair_stats(mod, 0, 1)['rel']:.3f} apart (relative "
          "distance; independent weights: 1.414)")
    print("   | fault | panel | detected | flags on the faulty revision (draws) | detour | z to the reference "
          "| other revisions flagged |")
    print("   | --- | --- | --- | --- | --- | --- | --- |")
    cases = [(f"re-init {k} of {N_LAYERS} layers", k) for k in K] + [("seed 1's step50 (another seed, same step)", None)]
    for name, k in cases:
        for panel in ("with step0", "without step0"):
            hits, kinds, others, detours, zs = 0, Counter(), Counter(), [], []
            trials = draws if k is not None else 1
            for draw in range(trials):
                fps = {r: f for r, f in healthy.items() if panel == "with step0" or r != "step0"}
                if k is None:
                    fps[FAULTY] = runs[1][FAULTY]
                else:
                    layers = set(np.random.RandomState(draw).choice(N_LAYERS, k, replace=False).tolist())
                    fps[FAULTY] = reinit(healthy[FAULTY], inits[1000 + draw], layers)
                flags, other, row = verdict(fps)
                detours.append(row["detour"])
                zs.append(row["cos_from_first"] / row["cos_sd"])
                hits += bool(flags)
                kinds[", ".join(flags) or "none"] += 1
                others.update(other)
            print(f"   | {name} | {panel} | {hits} of {trials} | "
                  f"{'; '.join(f'{f} ({n})' for f, n in kinds.most_common())} | "
                  f"{min(detours):.2f} … {max(detours):.2f} | {min(zs):.1f} … {max(zs):.1f} | "
                  f"{', '.join(f'{r} ({n})' for r, n in sorted(others.items())) or 'none'} |")


def real_size(gguf: Path, draws: int = 5) -> None:
    import transformers

    from headtrace.models import dequantize

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        folder = dequantize.dequantized(gguf, "smollm2", root=tmp / "cache")
        trained = fp_folder(folder, "trained")
        config = transformers.AutoConfig.from_pretrained(folder)
        inits = {}
        for seed in (0, 1):
            torch.manual_seed(seed)
            inits[seed] = fp_model(transformers.AutoModelForCausalLM.from_config(config), "init", tmp / f"init{seed}")
    n_mats = trained.filter((pl.col("kind") == "tensor") & (pl.col("shape").list.len() >= 2)).height
    print(f"2. real size: SmolLM2-135M-Instruct ({gguf.name}, dequantized; {n_mats} matrices): the trained "
          "weights against themselves with k of 30 layers re-initialised")
    print("   | layers re-initialised | cos (range over draws) | z = cos / cos_sd | threshold z | descent test "
          "flags | distance moved (rel) | detour flags when neighbours lie closer than |")
    print("   | --- | --- | --- | --- | --- | --- | --- |")
    for k in (0, *K, 30):
        cos, z, thr, flagged, rel = [], [], [], 0, []
        for draw in range(draws if 0 < k < 30 else 1):
            layers = set(np.random.RandomState(draw).choice(30, k, replace=False).tolist())
            fault = reinit(trained.with_columns(pl.lit("fault").alias("revision")), inits[draw % 2], layers)
            both = pl.concat([trained, fault])
            s = lineage.pair_stats(lineage._Model(both, ["trained", "fault"]), 0, 1)
            cos.append(s["cos"])
            z.append(s["cos"] / s["cos_sd"])
            thr.append(max(lineage.Z * s["cos_sd"], lineage.COS_FLOOR) / s["cos_sd"])
            flagged += s["cos"] < max(lineage.Z * s["cos_sd"], lineage.COS_FLOOR)
            rel.append(s["rel"])
        n = len(cos)
        # a revision midway between neighbours delta apart, moved off the path by rel: detour
        # 2 sqrt(delta²/4 + rel²) / delta > DETOUR = 2 while delta < 2 rel / sqrt(3)
        print(f"   | {k} of 30 | {min(cos):.3f} … {max(cos):.3f} | {min(z):.1f} … {max(z):.1f} | "
              f"{min(thr):.1f} … {max(thr):.1f} | {flagged} of {n} | {min(rel):.3f} … {max(rel):.3f} | "
              f"{2 * min(rel) / np.sqrt(3):.3f} … {2 * max(rel) / np.sqrt(3):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--gguf", default=None, help="a GGUF checkpoint for part 2 (default: part 1 only)")
    args = ap.parse_args()
    toy_power(args.draws)
    if args.gguf:
        real_size(Path(args.gguf))


if __name__ == "__main__":
    main()
