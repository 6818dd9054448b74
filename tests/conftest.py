"""Settings for the whole test session.

**Imports.** The tests live in folders that mirror the package (tests/cell for headtrace.cell, ...;
CONTRIBUTING.md, Tests). What several of them share sits at the top of tests/ and is imported by
name from any folder: ``tiny`` (tiny random models of every family), ``naive_ablation`` (the
ablation oracle) and ``helpers`` (the Snakemake command of the end-to-end tests, hand-built tables,
checkpoint layouts). This file puts tests/ on ``sys.path`` once, for every test; a test module never
imports another test module.

**Slurm.** Snakemake's Slurm executor plugin runs ``scontrol show config`` when Snakemake's command line is
imported, that is at the start of every ``snakemake`` run these tests make. Where Slurm is
installed but no controller runs (this machine between ``make test-slurm`` runs), scontrol retries
the controller once a second for ``MessageTimeout`` (10 s by default) before it gives up: ~9 s of
waiting per workflow test. No test here talks to Slurm (``make test-slurm`` does, outside
pytest), so unless the environment names a Slurm configuration, the session points
``SLURM_CONF`` at an empty file: scontrol fails at once and the plugin keeps its defaults.

**Warm jobs.** A workflow job in a fresh Python spends seconds importing torch and transformers, more
than a tiny cell computes. The end-to-end tests' runs take ``warm_jobs``: the environment of one warm
server for the whole session (``headtrace.runtime.warm``, what ``make demo`` runs through
``headtrace warm``), so that their jobs run in forks of a process that imported them once. A job the
server does not take (other thread settings) runs in its own process, as without it.
``tests/workflow/test_workflow.py`` still runs ``headtrace warm`` itself (its log is checked) and reruns
a cell in plain processes, as a cluster runs it.
"""
import os
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

os.environ.setdefault("SLURM_CONF", os.devnull)

# make test runs two pytest-xdist workers on a 2-core machine: one torch thread each (read when torch loads),
# not two workers of two threads fighting for the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def warm_jobs():
    """os.environ with HEADTRACE_WARM naming a warm server that lives as long as the session."""
    from helpers.workflow import warm_server

    with tempfile.TemporaryDirectory(prefix="headtrace-test-warm-") as folder:
        with warm_server(Path(folder)) as env:
            yield env
