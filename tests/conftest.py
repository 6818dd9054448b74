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
The session's tiny panel (``tiny_panel``) runs under ``headtrace warm`` itself (its log is checked in
``tests/workflow/test_workflow.py``, which also reruns a cell of a copy in plain processes, as a cluster runs it).

**The tiny panel.** ``tiny_panel`` is one finished run of the tiny two-revision panel (local tiny-olmo,
a tiny GGUF llama, a toy gpt_neox: ``helpers/tiny_panel.py``) made once per ``make test``, not once per
module: under ``pytest -n 2`` the first worker to ask builds it under the folder both workers share,
holding a file lock, and the other waits and reads the same run; without xdist the session builds it
in its own temporary folder. It is read-only: a test reads its folder and never writes into it; a test
that changes the run (a rerun, another config, a deleted output) works on ``tiny_panel.copy(tmp_path /
...)``, or keeps its own module run where its assertions need another config.
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


@pytest.fixture(scope="session")
def tiny_panel(tmp_path_factory):
    """The session's finished tiny-panel run (helpers.tiny_panel.TinyPanel: workdir, dry, out), shared by
    the xdist workers; read-only (see above)."""
    from helpers import tiny_panel

    base = tmp_path_factory.getbasetemp()
    # under xdist each worker's basetemp is a folder of the session's (pytest-N/popen-gwK): share that one;
    # without xdist, the session's own basetemp (its parent holds other sessions' folders)
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return tiny_panel.shared(root)
