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
"""
import os
import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

os.environ.setdefault("SLURM_CONF", os.devnull)
