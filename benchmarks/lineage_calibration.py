"""Calibration of the lineage check's descent test (headtrace.findings.lineage) on toy seeds.

Prints, from the toy checkpoints a finished `make demo` left in resources/checkpoints/:

1. every toy model's lineage (distance from step0 and from the previous revision, cosine to step0
   with its null noise, detour, flags): the healthy panel, which should raise no flag;
2. independent pairs: toy-neox against toy-neox-seed1 (same recipe, seeds 0 and 1) at every step
   both saved, and fresh inits of each toy recipe at seeds 0..5 (15 pairs per family): the z-score
   cos / cos_sd, which the test ``cos_from_first < max(Z * cos_sd, COS_FLOOR)`` reads as a standard
   normal under independence;
3. the smallest z of any healthy revision (how far above Z the descended ones lie).

Usage: .venv/bin/python benchmarks/lineage_calibration.py [--checkpoints resources/checkpoints]
(about 2 minutes on one core: fingerprints of ~140 checkpoints). docs/integrity.md records the output.
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from headtrace.core.revisions import toy_step
from headtrace.findings import lineage
from headtrace.models import fingerprint
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy


def fp_folder(folder: Path, model: str, revision: str) -> pl.DataFrame:
    return fingerprint.fingerprint_rows(sorted(folder.glob("*.safetensors")), model, revision)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoints", default="resources/checkpoints")
    args = ap.parse_args()
    root = Path(args.checkpoints)
    fps, healthy_z = {}, []
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        revs = sorted((d.name for d in model_dir.iterdir() if d.is_dir() and d.name.startswith("step")), key=toy_step)
        fps[model_dir.name] = {r: fp_folder(model_dir / r, model_dir.name, r) for r in revs}
        table = lineage.model_lineage(pl.concat(list(fps[model_dir.name].values())), {r: toy_step(r) for r in revs})
        with pl.Config(tbl_rows=200, tbl_width_chars=200, fmt_str_lengths=60):
            print(model_dir.name)
            print(table.select("revision", "dist_from_first", "dist_from_previous", "cos_from_first", "cos_sd",
                               "detour", "flags"))
        z = (table["cos_from_first"] / table["cos_sd"]).to_list()[1:]
        if z:
            healthy_z.append((min(z), model_dir.name, table["revision"][1 + int(np.argmin(z))]))
        print(f"  flagged: {lineage.flagged(table).height}; max detour {table['detour'].max()}")
    if "toy-neox" in fps and "toy-neox-seed1" in fps:
        zs = []
        for r in sorted(set(fps["toy-neox"]) & set(fps["toy-neox-seed1"]), key=toy_step):
            pair = pl.concat([fps["toy-neox"][r].with_columns(pl.lit("x").alias("model"), pl.lit("a").alias("revision")),
                              fps["toy-neox-seed1"][r].with_columns(pl.lit("x").alias("model"), pl.lit("b").alias("revision"))])
            s = lineage.pair_stats(lineage._Model(pair, ["a", "b"]), 0, 1)
            zs.append(s["cos"] / s["cos_sd"])
            print(f"seed 0 vs seed 1 at {r}: rel {s['rel']:.3f} cos {s['cos']:+.4f} sd {s['cos_sd']:.4f}")
        print(f"seed 0 vs 1, {len(zs)} steps: z in [{min(zs):.2f}, {max(zs):.2f}]")
    for family in ("gpt_neox", "olmo", "olmoe"):
        arch = toy_recipe.recipe(family)["arch"]
        rows = []
        with tempfile.TemporaryDirectory() as d:
            for seed in range(6):
                toy.build_model(family, arch, seed).save_pretrained(Path(d) / f"s{seed}")
                rows.append(fp_folder(Path(d) / f"s{seed}", "x", f"s{seed}"))
        mod = lineage._Model(pl.concat(rows), [f"s{i}" for i in range(6)])
        stats = [lineage.pair_stats(mod, i, j) for i, j in itertools.combinations(range(6), 2)]
        z = np.array([s["cos"] / s["cos_sd"] for s in stats])
        print(f"fresh inits {family} ({stats[0]['n']} matrices): 15 pairs, |cos| <= {max(abs(s['cos']) for s in stats):.3f}, "
              f"cos_sd {stats[0]['cos_sd']:.3f}, z mean {z.mean():+.2f} sd {z.std():.2f} max |z| {np.abs(z).max():.2f}; "
              f"rel {min(s['rel'] for s in stats):.3f}-{max(s['rel'] for s in stats):.3f}")
    for z, m, r in sorted(healthy_z):
        print(f"healthy: smallest z {z:.1f} ({m} {r})")


if __name__ == "__main__":
    main()
