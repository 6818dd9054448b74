"""Calibration of the lineage check on a whole demo panel and at a real model's size (docs/integrity.md,
"Calibration").

1. **The demo's toy panel** (every model under ``results/cells`` whose cells wrote a fingerprint: the toys,
   the seed run and the shift run): per model, the descent test's z = cos_from_first / cos_sd of every
   revision against its threshold ``max(Z · cos_sd, COS_FLOOR) / cos_sd``, the smallest margin, the flags of
   its own lineage table and those :func:`headtrace.findings.lineage_panel.across_models` adds with the
   config's declaration (the shift run continues its base);
2. **independent trained pairs across models**: the base toy against its seed twin at every common step,
   and the shift run's last revision against the base's init (descent through the base, by chain);
3. **a real model's size** (SmolLM2-135M's dequantized GGUF copy in ``resources/gguf-cache/``, 30 layers,
   211 matrices after the tie): fresh inits of its config with transformers (seeds 0..3) against each
   other and against the trained weights (independent by construction), and the trained weights with
   the first 3 of 30 layers' matrices replaced by a fresh init (a partial re-init).

Usage: .venv/bin/python benchmarks/lineage_panel_calibration.py [--results results]
    [--gguf-cache resources/gguf-cache] (about 1 minute on one core; ~3 GB of memory).
"""
from __future__ import annotations

import argparse
import itertools
import re
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from headtrace.core import tables
from headtrace.findings import lineage
from headtrace.models import fingerprint


def threshold_z(cos_sd: float) -> float:
    """The descent test's threshold in units of the null's SD."""
    return max(lineage.Z * cos_sd, lineage.COS_FLOOR) / cos_sd


def pair(fp_a: pl.DataFrame, fp_b: pl.DataFrame) -> dict:
    both = pl.concat([fp_a.with_columns(pl.lit("x").alias("model"), pl.lit("a").alias("revision")),
                      fp_b.with_columns(pl.lit("x").alias("model"), pl.lit("b").alias("revision"))])
    s = lineage.pair_stats(lineage._Model(both, ["a", "b"]), 0, 1)
    return {**s, "z": s["cos"] / s["cos_sd"], "threshold_z": threshold_z(s["cos_sd"])}


def demo_panel(results: Path) -> None:
    fp = tables.read_many(sorted(results.glob("cells/*/*/fingerprint.parquet")))
    prov = tables.read_many(sorted(results.glob("cells/*/*/provenance.parquet")))
    tokens = {(m, r): t for m, r, t in prov.select("model", "revision", "tokens").iter_rows()}
    toys = sorted(m for m in fp["model"].unique().to_list() if m.startswith("toy-"))
    fp = fp.filter(pl.col("model").is_in(toys))
    cont = {m: re.sub(r"-shift$", "", m) for m in toys if m.endswith("-shift")}  # the demo's declaration
    table = lineage.lineage(fp, tokens, continues=cont)
    print("1. the demo's toy panel: z = cos / cos_sd against the threshold max(Z·sd, floor)/sd")
    for m in toys:
        t = table.filter(pl.col("model") == m).sort("order")
        rest = t.filter(pl.col("order") > 0)
        z = (rest["cos_from_first"] / rest["cos_sd"]).to_numpy()
        thr = np.array([threshold_z(s) for s in rest["cos_sd"]])
        i = int(np.argmin(z - thr))
        print(f"  {m:<16} {t.height:>2} revisions, {t['n_matrices'][0]} matrices: z {z.min():5.1f} … {z.max():5.1f} "
              f"against {thr.min():.1f} … {thr.max():.1f}; smallest margin {z[i] - thr[i]:+.1f} at "
              f"{rest['revision'][i]}; descent {sorted(set(rest['descent']))}; "
              f"flags {int(t['flags'].list.len().sum())}")
    annotated = lineage.across_models(table)
    for r in annotated.filter(pl.col("same_weights_as").list.len() > 0).iter_rows(named=True):
        print(f"  across models: {r['model']} {r['revision']} = {r['same_weights_as']} "
              f"(declared {r['declared_same']}), flags {r['flags']}")
    print("  declared pairs:", lineage.declared_pairs(table))
    undeclared = lineage.across_models(lineage.lineage(fp, tokens))
    print("  without the declaration:", {(m, r): f for m, r, f in
                                         undeclared.select("model", "revision", "flags").iter_rows() if f})

    print("2. independent trained pairs across models")
    by = {(m, r): fp.filter((pl.col("model") == m) & (pl.col("revision") == r)) for m, r in
          fp.select("model", "revision").unique().iter_rows()}
    for base in toys:
        twin = f"{base}-seed1"
        if twin not in toys:
            continue
        common = sorted({r for m, r in by if m == base} & {r for m, r in by if m == twin}, key=lambda r: int(r[4:]))
        for r in common:
            s = pair(by[(base, r)], by[(twin, r)])
            print(f"  {base} vs {twin} at {r}: cos {s['cos']:+.3f} ± {s['cos_sd']:.3f} (z {s['z']:+.2f}, "
                  f"threshold {s['threshold_z']:.1f}), rel {s['rel']:.3f}")
    for child, parent in cont.items():
        last = table.filter(pl.col("model") == child).sort("order")["revision"][-1]
        s = pair(by[(parent, "step0")], by[(child, last)])
        print(f"  {child} {last} vs {parent} step0: cos {s['cos']:+.3f} ± {s['cos_sd']:.3f} (z {s['z']:.1f}, "
              f"threshold {s['threshold_z']:.1f})")


def real_size(cache: Path, seeds=(0, 1, 2, 3)) -> None:
    # transformers and torch only here: the toy part runs on the tables alone
    import torch
    import transformers

    folders = sorted(p for p in cache.iterdir() if (p / "model.safetensors").exists()) if cache.exists() else []
    if not folders:
        print(f"3. no GGUF copy under {cache}: run make demo first")
        return
    trained_dir = folders[0]
    trained = fingerprint.fingerprint_rows([trained_dir / "model.safetensors"], "x", "trained")
    config = transformers.AutoConfig.from_pretrained(trained_dir)
    inits = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            torch.manual_seed(seed)
            model = transformers.AutoModelForCausalLM.from_config(config)
            model.save_pretrained(Path(tmp) / f"init{seed}")
            del model
            inits[seed] = fingerprint.fingerprint_rows([Path(tmp) / f"init{seed}" / "model.safetensors"], "x",
                                                       f"init{seed}")
    mats = trained.filter((pl.col("kind") == "tensor") & (pl.col("shape").list.len() >= 2))
    print(f"3. real size: {trained_dir.name[:12]}… ({mats.height} matrices, "
          f"{int(mats['numel'].sum()) / 1e6:.0f}M elements)")
    rows = []
    for a, b in itertools.combinations(seeds, 2):
        rows.append(("fresh inits", f"{a} vs {b}", pair(inits[a], inits[b])))
    for a in seeds:
        rows.append(("trained vs fresh init", f"seed {a}", pair(trained, inits[a])))
    layer = re.compile(r"\.layers\.(\d+)\.")
    reinit = [n for n in mats["name"].to_list() if (m := layer.search(n)) and int(m.group(1)) < 3]
    part = pl.concat([trained.filter(~pl.col("name").is_in(reinit)), inits[0].filter(pl.col("name").is_in(reinit))])
    rows.append(("trained vs itself with layers 0-2 re-initialised", f"{len(reinit)} matrices", pair(trained, part)))
    for what, which, s in rows:
        print(f"  {what:<48} {which:<12} cos {s['cos']:+.4f} ± {s['cos_sd']:.4f} (z {s['z']:+6.2f}, threshold "
              f"{s['threshold_z']:.1f}), rel {s['rel']:.3f}")
    z = np.array([s["z"] for w, _, s in rows if w != rows[-1][0]])
    print(f"  independent pairs: {len(z)}, z mean {z.mean():+.2f} sd {z.std(ddof=1):.2f} max |z| {np.abs(z).max():.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default="results")
    ap.add_argument("--gguf-cache", default="resources/gguf-cache")
    args = ap.parse_args()
    demo_panel(Path(args.results))
    real_size(Path(args.gguf_cache))


if __name__ == "__main__":
    main()
