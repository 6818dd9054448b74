"""Shared helpers of the test suite: what more than one test module needs, so that no test module
imports another (CONTRIBUTING.md, Tests). conftest.py puts tests/ on sys.path, so a test imports
``from helpers.workflow import snakemake`` from any folder, as it imports ``tiny`` and ``naive_ablation``.

    workflow        the Snakemake command the end-to-end tests run, its dry-run job counts, their probe
    tiny_panel      the session's one tiny-panel run (the tiny_panel fixture), shared by the xdist workers
    checkpoints     a local Hugging Face cache with branches; pickle copies of a safetensors checkpoint
    capture         the eager references of the captured masses and patterns; sharpened tiny models
    ablation        the engine's test setting: boosted tiny models, a small batch, the head sets
    trajectories    hand-built trajectories: one layer with known brackets, three toy seeds of a group
    headline_tables hand-built findings and verdict tables with known headline answers
    cross_seed      two seeds' cross-seed ablation tables, one per model, with known excesses
"""
