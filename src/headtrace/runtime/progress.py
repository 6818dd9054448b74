"""A quiet console for ``make demo``: one progress line per finished job instead of Snakemake's job blocks.

Snakemake prints every job's block (rule, input, output, log, reason, wildcards, resources: ~15 lines a
job, ~1,200 for the demo). :func:`follow` reads that output line by line and

* replaces each job block and the scheduler's chatter (timestamps, "Select jobs to execute...") by one
  line per finished job: ``[ 13/72  18%] capture toy-olmo step100 · 1 min 05 s, about 4 min left``,
  the estimate from the mean time per job so far (jobs differ: it is a rough guide, better as the run
  goes on);
* passes **every other line through unchanged**: the config's notes, the job statistics, warnings and
  every error block (``Error in rule ...`` with its log path), so that a line it does not know is
  shown rather than lost. A change of Snakemake's wording makes the console noisier, never silent.

``make demo`` writes Snakemake's full output to ``LOGS/snakemake.log`` before it reaches this filter
(``make demo VERBOSE=1`` shows it on the console instead).
"""
from __future__ import annotations

import re
import sys
import time
from typing import Iterable, TextIO

__all__ = ["follow", "main"]

_JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):\s*$|^(=+)$")  # a job's block; the run's banner
_FIELD = re.compile(r"^\s+(jobid|wildcards): (.*)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+)(?: \(Rule: (\S+)\))?")
_STEPS = re.compile(r"^(\d+) of (\d+) steps \((\d+%)\) done")
_TIMESTAMP = re.compile(r"^\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]$")
_CHATTER = ("Select jobs to execute...", "Building DAG of jobs...", "Using shell:", "Provided cores:",
            "Rules claiming more threads will be scaled down.", "Conda environments: ignored",
            "Singularity containers: ignored", "Assuming unrestricted shared filesystem usage.", "host:",
            "Execute ", "Waiting at most ", "SNAKEMAKE")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def follow(lines: Iterable[str], out: TextIO = sys.stdout, clock=time.monotonic) -> None:
    """Filter Snakemake's console output ``lines`` onto ``out`` (see the module docstring)."""
    start = clock()
    jobs: dict[str, str] = {}  # jobid -> "rule wildcard values"
    in_block: str | None = None  # the rule of the job block being read
    block_id = block_wildcards = None
    last = ""
    for raw in lines:
        line = raw.rstrip("\n")
        if in_block is not None:
            if line.startswith((" ", "\t")) and line.strip():
                m = _FIELD.match(line)
                if m and m.group(1) == "jobid":
                    block_id = m.group(2).strip()
                elif m:
                    block_wildcards = " ".join(v.split("=", 1)[-1] for v in m.group(2).split(", "))
                continue
            if block_id is not None and in_block:
                jobs[block_id] = " ".join(w for w in (in_block, block_wildcards) if w)
            in_block = block_id = block_wildcards = None
        m = _JOB.match(line)
        if m:
            in_block = m.group(1) or ""  # the banner: its indented lines dropped, no job recorded
            continue
        m = _FINISHED.match(line)
        if m:
            last = jobs.get(m.group(1)) or m.group(2) or f"job {m.group(1)}"
            continue
        m = _STEPS.match(line)
        if m:
            done, total = int(m.group(1)), int(m.group(2))
            elapsed = clock() - start
            left = f", about {_duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
            out.write(f"[{done:>4}/{total:<4} {m.group(3):>4}] {last} · {_duration(elapsed)}{left}\n")
            out.flush()
            continue
        if not line.strip() or _TIMESTAMP.match(line) or line.startswith(_CHATTER):
            continue
        out.write(line + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    """``python -m headtrace.runtime.progress``: filter standard input onto standard output."""
    follow(sys.stdin)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
