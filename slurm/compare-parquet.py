#!/usr/bin/env python
"""Compare every *.parquet under DIR_A with the same relative path under DIR_B.

    python slurm/compare-parquet.py RESULTS_LOCAL RESULTS_SLURM [--atol 0]

Exit 0 when both trees hold the same set of files and every pair is equal (exactly, or within
--atol for float columns); prints one line per difference otherwise (exit 1).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--atol", type=float, default=0.0)
    args = ap.parse_args(argv)
    fa = {p.relative_to(args.a) for p in args.a.rglob("*.parquet")}
    fb = {p.relative_to(args.b) for p in args.b.rglob("*.parquet")}
    bad = [f"only in {args.a}: {p}" for p in sorted(fa - fb)] + [f"only in {args.b}: {p}" for p in sorted(fb - fa)]
    for rel in sorted(fa & fb):
        try:
            assert_frame_equal(pl.read_parquet(args.a / rel), pl.read_parquet(args.b / rel),
                               check_exact=args.atol == 0, abs_tol=args.atol, rel_tol=0)
        except AssertionError as e:
            bad.append(f"differs: {rel}: {str(e).splitlines()[0]}")
    for line in bad:
        print(line)
    print(f"compared {len(fa & fb)} parquet files: {'OK' if not bad else f'{len(bad)} problem(s)'}")
    return 1 if bad or not (fa & fb) else 0


if __name__ == "__main__":
    sys.exit(main())
