"""The Snakemake command the end-to-end tests run (tests/workflow/), and what they read from it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
HEADTRACE = str(Path(sys.executable).parent / "headtrace")

PROBE = {"n_sequences": 24, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}


def snakemake(workdir: Path, *args: str, warm: bool = False) -> str:
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), "--configfile",
           str(workdir / "config.yaml"), "--cores", "2", *args]
    if warm:  # as make demo runs it: the jobs in forks of one warm process (headtrace.runtime.warm)
        cmd = [HEADTRACE, "warm", "--log", str(workdir / "logs" / "warm.log"), "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc.stdout + proc.stderr


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    block = dry_run_output.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M) if m.group(1) != "total"}
