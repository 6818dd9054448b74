"""Settings for the whole test session.

Snakemake's Slurm executor plugin runs ``scontrol show config`` when Snakemake's command line is
imported, that is at the start of every ``snakemake`` run these tests make. Where Slurm is
installed but no controller runs (this machine between ``make test-slurm`` runs), scontrol retries
the controller once a second for ``MessageTimeout`` (10 s by default) before it gives up: ~9 s of
waiting per workflow test. No test here talks to Slurm (``make test-slurm`` does, outside
pytest), so unless the environment names a Slurm configuration, the session points
``SLURM_CONF`` at an empty file: scontrol fails at once and the plugin keeps its defaults.
"""
import os

os.environ.setdefault("SLURM_CONF", os.devnull)
