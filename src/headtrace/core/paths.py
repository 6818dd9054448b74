"""Where a run writes: every output path of a panel, relative to its results folder, defined once.

A panel writes into one results folder (the config's ``results`` key, default ``results``), so two
panels in two folders never replace each other's findings. The workflow's ``PATHS``
(``workflow/rules/common.smk``), the table locations of docs/outputs.md (``headtrace.core.tables.LOCATIONS``)
and the readers of a finished run (``headtrace summary``, ``headtrace compare``) all build their paths
from :data:`RELATIVE` here (``tests/workflow/test_results_folder.py`` ties them together).

Besides its results folder a panel writes its logs (``logs/`` beside the default ``results/``, else
``RESULTS/logs/``: :func:`logs_root`) and two caches shared by every panel of a working folder:
``resources/checkpoints/{model}`` (the toy models trained here) and ``resources/branches/{model}.txt``
(a hub model's branch list), like the Hugging Face cache. A toy model's name therefore names one
recipe in a working folder: two panels training different toys under one name retrain each other's.
"""
from __future__ import annotations

import posixpath

import yaml

__all__ = ["DEFAULT", "RELATIVE", "SHARED", "MANIFEST", "normalize", "results_paths", "logs_root", "at", "of_config"]

DEFAULT = "results"
MANIFEST = "panel.json"  # the panel a results folder holds: its models and groups (headtrace.report.panel_manifest)

# Every output of a panel, relative to its results folder.
RELATIVE: dict[str, str] = {
    "manifest": MANIFEST,
    "fetched": "fetch/{model}/{revision}.done",
    "probe": "probes/{model}/induction_batch.parquet",
    "head_outputs": "cells/{model}/{revision}/head_outputs.safetensors",
    "attention": "cells/{model}/{revision}/attention.parquet",
    "pr": "cells/{model}/{revision}/pr.parquet",
    "screen": "cells/{model}/{revision}/screen.parquet",
    "class_masses": "cells/{model}/{revision}/class_masses.safetensors",
    "bootstrap": "cells/{model}/{revision}/bootstrap.parquet",
    "bootstrap_milestones": "cells/{model}/{revision}/bootstrap_milestones.parquet",
    "positional": "cells/{model}/{revision}/positional.parquet",
    "measures": "cells/{model}/{revision}/measures.parquet",  # the field's own measures (docs/measures.md)
    "text_probe": "probes/{model}/text_batch.parquet",
    "measures_findings": "findings/measures",  # measures.smk: over training, onsets, comparisons
    "onset_bootstrap": "findings/f3_onset_bootstrap.parquet",
    "ablation": "cells/{model}/{revision}/ablation.parquet",
    "verdict": "cells/{model}/{revision}/verdict.parquet",
    "provenance": "cells/{model}/{revision}/provenance.parquet",
    "fingerprint": "cells/{model}/{revision}/fingerprint.parquet",
    "trajectory": "models/{model}/trajectory.parquet",
    "lineage": "models/{model}/lineage.parquet",  # lineage.smk: is each revision the checkpoint it says
    "lineage_panel": "findings/lineage_panel.parquet",  # the findings job: the lineage flags across models
    "findings": "findings",
    "summary": "findings/summary.md",
    "summary_html": "findings/summary.html",
    "figures": "figures",
    "report": "report.html",
    # Adaptive refinement (refine.smk): one record per model and round, the onsets.
    "refine_round": "refine/{model}/round{round}.json",
    "onsets": "findings/f3_onsets.parquet",
    # Paper A's method experiments (experiments.smk)
    "exp_cross_seed_model": "experiments/cross_seed/{model}.parquet",
    "exp_cross_seed": "experiments/cross_seed_ablation.parquet",
    "exp_data_shift": "experiments/data_shift.parquet",
    "exp_data_shift_heads": "experiments/data_shift_heads.parquet",
    "exp_composition": "experiments/composition.parquet",
    "exp_shuffled": "experiments/shuffled/{model}/{revision}/attention.parquet",
    "exp_noise_floor": "experiments/noise_floor.parquet",
    "exp_noise_floor_null": "experiments/noise_floor_null.parquet",
    "exp_summary": "experiments/summary.md",
    "exp_figure": "experiments/figures/exp_{name}.png",
    # Seed groups (groups.smk): the group tables, the group cross-seed ablation, the group figures
    "groups": "groups",
    "group_cross_seed_model": "groups/{group}/cross_seed/{model}.parquet",
    "group_cross_seed": "groups/{group}/group_cross_seed.parquet",
    "group_figure": "groups/{group}/figures/{name}.png",
    # Wall time and memory of every model pass (Snakemake's benchmark files).
    "benchmark": "benchmarks/{rule}/{model}/{revision}.tsv",
}

# Inputs cached for every panel of a working folder (see the module docstring), not under a results folder.
SHARED: dict[str, str] = {
    "checkpoints": "resources/checkpoints/{model}",
    "branches": "resources/branches/{model}.txt",
}


def normalize(results: str | None) -> str:
    """A results folder as the workflow names it: ``results/``, ``./results`` -> ``results``."""
    text = str(results or DEFAULT).strip()
    return posixpath.normpath(text) if text else DEFAULT


def results_paths(results: str | None = DEFAULT) -> dict[str, str]:
    """Every output path of a panel whose results folder is ``results``, and the shared caches
    (the workflow's ``PATHS``)."""
    root = normalize(results)
    return {**{k: posixpath.join(root, v) for k, v in RELATIVE.items()}, **SHARED}


def logs_root(results: str | None = DEFAULT) -> str:
    """The folder of a panel's job logs: ``logs`` beside the default ``results``, else ``RESULTS/logs``,
    so two panels of one working folder never write into each other's logs."""
    root = normalize(results)
    return "logs" if root == DEFAULT else posixpath.join(root, "logs")


def at(results, key: str, **wildcards) -> str:
    """One path of a results folder (a ``pathlib.Path`` or string), wildcards filled in."""
    return posixpath.join(str(results), RELATIVE[key].format(**wildcards) if wildcards else RELATIVE[key])


def of_config(configfiles=(), override: str | None = None, embedded: str = "config/config.yaml") -> str:
    """The results folder a run writes to: ``override`` (``--config results=DIR``, ``make demo RESULTS=DIR``),
    else the ``results`` key of the config files (later files win, as Snakemake merges them; none: the
    embedded default config), else :data:`DEFAULT`."""
    if override:
        return normalize(override)
    found = None
    for f in list(configfiles) or [embedded]:
        try:
            with open(f, encoding="utf-8") as fh:
                data = yaml.safe_load(fh) or {}
        except OSError:
            continue  # the workflow says what is wrong with a missing config file
        if isinstance(data, dict) and data.get("results"):
            found = data["results"]
    return normalize(found)


if __name__ == "__main__":  # `python -m headtrace.core.paths CONFIG... [--results DIR]`: what make reads
    import sys

    args, override = sys.argv[1:], None
    if "--results" in args:
        i = args.index("--results")
        override, args = (args[i + 1] if i + 1 < len(args) else None), args[:i] + args[i + 2:]
    print(of_config(args, override))
