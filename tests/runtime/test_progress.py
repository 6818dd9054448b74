"""make demo's quiet console (headtrace.runtime.progress): one line per finished job with an estimate,
every line it does not know passed through, error blocks whole."""
from __future__ import annotations

import io

from headtrace.runtime import progress

RUN = """Assuming unrestricted shared filesystem usage.

SNAKEMAKE
=========
  Date: 2026-12-06 07:18:42
  Snakemake version: 9.27.1
headtrace: probe (tiny): 24 sequences of 64 tokens
Building DAG of jobs...
Using shell: /usr/bin/bash
Provided cores: 2
Job stats:
job        count
-------  -------
capture        2
all            1
total          3

Select jobs to execute...
Execute 2 jobs...

[Sun Dec  6 07:18:46 2026]
rule capture:
    input: resources/checkpoints/tiny
    output: results/cells/tiny/step4/attention.parquet
    log: logs/capture/tiny/step4.log
    jobid: 7
    reason: Missing output files
    wildcards: model=tiny, revision=step4
    resources: tmpdir=/tmp, mem_mb=4000

[Sun Dec  6 07:18:50 2026]
Finished jobid: 7 (Rule: capture)
1 of 3 steps (33%) done
a warning nobody planned for
[Sun Dec  6 07:18:52 2026]
Error in rule capture:
    jobid: 8
    log: logs/capture/tiny/step8.log (check log file(s) for error details)
"""


def test_one_line_per_job_unknown_lines_and_errors_kept():
    ticks = iter([0.0, 10.0])
    out = io.StringIO()
    progress.follow(io.StringIO(RUN), out, clock=lambda: next(ticks))
    lines = out.getvalue().splitlines()
    assert "[   1/3     33%] capture tiny step4 · 10 s, about 20 s left" in lines
    assert "headtrace: probe (tiny): 24 sequences of 64 tokens" in lines  # the config's notes
    assert "total          3" in lines  # the job statistics
    assert "a warning nobody planned for" in lines  # unknown: shown, not lost
    error = lines[lines.index("Error in rule capture:"):]
    assert len(error) == 3 and "logs/capture/tiny/step8.log" in error[2]
    for chatter in ("Select jobs", "Execute 2", "rule capture:", "    reason:", "Snakemake version", "[Sun Dec"):
        assert not any(line.startswith(chatter) for line in lines), chatter
    assert len(lines) < len(RUN.splitlines()) / 2
