"""A finished run's tables, read from its results folder once: what ``headtrace summary``, ``headtrace
compare`` and the API's summary word (:mod:`headtrace.report.console`), so that nothing under report/
reads Parquet.

:func:`read` gathers, of the panel its ``panel.json`` names (:mod:`headtrace.core.manifest`), every table
the console states: the findings tables, the seed groups' tables with their cross-seed ablation, the
verdicts of the panel's cells, the trajectories, the probes, the lineage tables and the positional check
of the circuits. A table of a model of another panel left in the same folder (a results folder shared or
copied) is never read; without a ``panel.json`` (a folder written before it existed) every model found
there is. Reading only: every answer in these tables was decided by the job that wrote it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from headtrace.core import manifest, paths, tables

__all__ = ["Results", "read", "HEADLINE_FINDINGS"]

# the findings tables the headline reads (results/findings/), and the text sink rate's (findings/measures/)
HEADLINE_FINDINGS = ("circuit_size", "f3_milestones", "f3_onsets", "f3_gaps", "f2_layer_spread", "f2_bos_fraction",
                     "f1_bos_floor", "f1_floor", "strongest_trend", "circuit_positional")
_MEASURES_FINDINGS = ("measures_over_training", "measures_onsets")
_GROUP_TABLES = {"group_members", "group_summary", "group_gaps", "group_milestones"}


@dataclass(frozen=True)
class Results:
    """The tables of one results folder's panel, as :func:`read` found them (absent tables: empty
    mappings or None)."""

    folder: Path
    models: list[str] | None  # the panel's models (panel.json); None: no manifest, every model found
    families: dict[str, str] = field(default_factory=dict)  # model -> the family its headline row names
    findings: dict[str, pl.DataFrame] = field(default_factory=dict)  # name -> table (HEADLINE_FINDINGS, measures)
    trajectories: dict[str, pl.DataFrame] = field(default_factory=dict)  # model -> trajectory, in name order
    verdicts: pl.DataFrame | None = None  # every verdict row of the panel's cells
    groups: dict[str, dict[str, pl.DataFrame]] = field(default_factory=dict)  # group -> name -> table
    cross_seed: dict[str, pl.DataFrame] = field(default_factory=dict)  # group -> its cross-seed ablation
    probes: dict[str, pl.DataFrame] = field(default_factory=dict)  # model -> its probe table
    lineage: pl.DataFrame | None = None  # the checkpoint-lineage tables, concatenated

    @property
    def findings_built(self) -> bool:
        """The findings job has run for this panel (its milestones table is there)."""
        return "f3_milestones" in self.findings

    def trajectory(self) -> pl.DataFrame:
        """Every model's trajectory, concatenated (empty without one)."""
        return pl.concat(list(self.trajectories.values()), how="diagonal_relaxed") if self.trajectories else pl.DataFrame()

    def path(self, name: str, **keys) -> Path:
        """Where table or page ``name`` of :data:`headtrace.core.paths.RELATIVE` lies in this folder."""
        return Path(paths.at(self.folder, name, **keys))


def read(results: str | Path = paths.DEFAULT) -> Results:
    """The tables of the panel in folder ``results`` (see the module's docstring)."""
    results = Path(results)
    record = manifest.read(results)
    models = record.names if record is not None else None
    trajectories = {}
    for p in _trajectory_paths(results, models):
        t = tables.read(p)
        if t.height:
            trajectories[str(t["model"][0])] = t
    groups, cross = _groups(results, record)
    return Results(
        folder=results, models=models, families=(record.families if record is not None else {}) or {},
        findings={name: tables.only_models(df, models) for name, df in _findings(results).items()},
        trajectories=trajectories, verdicts=_verdicts(results, record, trajectories), groups=groups,
        cross_seed=cross, probes=_probes(results, models), lineage=tables.only_models(_lineage(results), models))


def _trajectory_paths(results: Path, models: list[str] | None) -> list[Path]:
    """The trajectory tables of the panel's ``models`` (every one found, without a manifest: None), in name
    order: never a model of another panel left in the same folder."""
    if models is None:
        return sorted(results.glob(paths.RELATIVE["trajectory"].format(model="*")))
    return sorted(p for m in models if (p := Path(paths.at(results, "trajectory", model=m))).is_file())


def _findings(results: Path) -> dict[str, pl.DataFrame]:
    """The findings tables the headline reads (none before the findings job has run)."""
    folder = results / paths.RELATIVE["findings"]
    found = {name: tables.read(p) for name in HEADLINE_FINDINGS if (p := folder / f"{name}.parquet").exists()}
    measures = results / paths.RELATIVE["measures_findings"]
    return found | {name: tables.read(p) for name in _MEASURES_FINDINGS if (p := measures / f"{name}.parquet").exists()}


def _groups(results: Path, record) -> tuple[dict, dict]:
    """The seed groups' tables (results/groups/{group}/) of the panel's groups, each with its cross-seed
    ablation: its own table, else the seed experiment's where that ran exactly the group's members
    and seeds (as the workflow reads it)."""
    found: dict[str, dict[str, pl.DataFrame]] = {}
    for p in sorted((results / paths.RELATIVE["groups"]).glob("*/group_*.parquet")):
        if record is None or p.parent.name in record.groups:  # never a group of another panel left here
            found.setdefault(p.parent.name, {})[p.stem] = tables.read(p)
    found = {g: t for g, t in found.items() if _GROUP_TABLES <= set(t)}
    cross = {g: t.pop("group_cross_seed") for g, t in found.items() if "group_cross_seed" in t}
    exp = Path(paths.at(results, "exp_cross_seed"))
    if exp.exists():
        e = tables.read(exp)
        ran = dict(zip(e["model"].to_list(), e["model_seed"].to_list()))
        for g, t in found.items():
            mem = t["group_members"]
            if g not in cross and ran == dict(zip(mem["member"].to_list(), mem["seed"].to_list())):
                cross[g] = e
    return found, cross


def _verdicts(results: Path, record, trajectories: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    """The verdicts of the panel's cells: of each model of its ``panel.json``, the revisions its config
    names and those its trajectory holds (refined ones), never a cell of another panel, or of a revision
    no longer configured, left in the same folder; every verdict found, without a manifest."""
    found = sorted(results.glob(paths.RELATIVE["verdict"].format(model="*", revision="*")))
    if record is not None:
        cells = {(m, r) for m, revs in record.models.items() for r in revs}
        for t in trajectories.values():
            cells |= set(t.select("model", "revision").unique().iter_rows())
        found = [p for p in found if (p.parent.parent.name, p.parent.name) in cells]
    return tables.read_many(found) if found else None


def _probes(results: Path, models: list[str] | None) -> dict[str, pl.DataFrame]:
    """Each model's probe table (``results/probes/{model}/``), none for a reference-only run."""
    return {p.parent.name: tables.read(p) for p in sorted(results.glob(paths.RELATIVE["probe"].format(model="*")))
            if models is None or p.parent.name in models}


def _lineage(results: Path) -> pl.DataFrame | None:
    """The findings job's ``lineage_panel`` table (every model's lineage rows with the flags across models);
    without one (a folder from before that table), every model's lineage table
    (``results/models/*/lineage.parquet``) concatenated, which carries each model's own flags only; None when
    there is neither (a run of reference models only)."""
    panel = Path(paths.at(results, "lineage_panel"))
    if panel.exists():
        return tables.read(panel)
    found = sorted(results.glob(paths.RELATIVE["lineage"].format(model="*")))
    return tables.read_many(found) if found else None
