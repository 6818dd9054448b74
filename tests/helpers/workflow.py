"""The Snakemake command the end-to-end tests run (tests/workflow/), what they read from it, and the
warm server their jobs run in (the ``warm_jobs`` fixture of tests/conftest.py)."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
HEADTRACE = str(Path(sys.executable).parent / "headtrace")

PROBE = {"n_sequences": 24, "seq_len": 64, "token_range": [2, 128], "seed": 42, "ab_range": [20, 40]}


def snakemake(workdir: Path, *args: str, warm: bool = False, env: dict | None = None) -> str:
    """Run the workflow in ``workdir`` on its config.yaml; its output. ``warm``: under ``headtrace warm``,
    as make demo runs it (its own server, its log in logs/warm.log); ``env``: the run's environment
    (``warm_jobs``: the session's warm server)."""
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), "--configfile",
           str(workdir / "config.yaml"), "--cores", "2", *args]
    if warm:  # as make demo runs it: the jobs in forks of one warm process (headtrace.runtime.warm)
        cmd = [HEADTRACE, "warm", "--log", str(workdir / "logs" / "warm.log"), "--", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc.stdout + proc.stderr


def job_counts(dry_run_output: str) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    block = dry_run_output.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M) if m.group(1) != "total"}


@contextlib.contextmanager
def warm_server(folder: Path):
    """A warm server (headtrace.runtime.warm) on ``folder``/socket with what ``headtrace warm`` preloads,
    its output in ``folder``/warm.log; yields os.environ with HEADTRACE_WARM naming it. Runs started
    before it listens run their jobs in their own processes; it stops when the block ends."""
    from headtrace.models import families
    from headtrace.runtime import warm

    socket = folder / "socket"
    with open(folder / "warm.log", "w") as log:
        server = warm.start(str(socket), warm.PRELOAD + families.warm_preload(), stdout=log)
        try:
            deadline = time.monotonic() + 120
            while not socket.exists() and server.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            yield {**os.environ, warm.ENV: str(socket)}
        finally:
            warm.stop(server)
