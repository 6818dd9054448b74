"""A results folder per panel (issue 51, point 2): the config's ``results`` key puts every output of a
panel under its own folder; each summary (console, summary.md, summary.html) names only its panel's
models, also where another panel's cells lie in the same folder; ``headtrace compare`` puts two runs
side by side. The published panel's files make the panels (imported, no model run: seconds a panel)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from headtrace.core import manifest, paths, tables
from headtrace.report import compare, console

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

PYTHIA = {"source": "reference", "published": "pythia1b", "tokens_per_step": 2097152,
          "revisions": ["step64", "step3000", "step143000"]}
OLMO = {"source": "reference", "published": "olmo", "tokens_from_name": True,
        "revisions": ["step1000-tokens2B", "step126000-tokens264B", "step1454000-tokens3048B"]}


def panel(results: str, name: str, spec: dict) -> dict:
    return {"results": results, "models": {name: spec}, "screen": {"baseline": "sampled"}}


def snakemake(workdir: Path, config: dict, *args: str, env: dict | None = None) -> str:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), "--configfile",
           str(workdir / "config.yaml"), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


# ---- one definition of the results layout -----------------------------------------------------


def test_table_locations_are_the_workflow_paths_under_the_default_folder():
    default = paths.results_paths()
    elsewhere = {"cross_seed_model": "exp_cross_seed_model"}  # a schema named apart from its path
    for name, where in tables.LOCATIONS.items():
        key = name if name in default else elsewhere.get(name, "measures_findings")
        assert where.startswith(default[key]), (name, where, default[key])
    assert default["trajectory"] == "results/models/{model}/trajectory.parquet"
    assert paths.logs_root() == "logs" and paths.logs_root("runs/b/") == "runs/b/logs"
    assert paths.normalize("./results/") == "results"


def test_the_workflow_and_the_console_read_paths_from_the_one_layout():
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert "PATHS = paths.results_paths(RESULTS)" in common
    source = (ROOT / "src" / "headtrace" / "report" / "console.py").read_text()
    # no results path spelt out in the console: every one comes from headtrace.core.paths
    assert not re.search(r'"(cells|models|probes|findings|groups)/', source)


def test_results_folder_of_a_config(tmp_path):
    (tmp_path / "a.yaml").write_text("results: runs/a/\nmodels: {}\n")
    (tmp_path / "b.yaml").write_text("models: {}\n")
    assert paths.of_config([tmp_path / "a.yaml"]) == "runs/a"
    assert paths.of_config([tmp_path / "a.yaml", tmp_path / "b.yaml"]) == "runs/a"  # b sets none
    assert paths.of_config([tmp_path / "b.yaml"]) == "results"
    assert paths.of_config([tmp_path / "a.yaml"], override="x") == "x"


@pytest.mark.slow
def test_a_dry_run_writes_every_output_under_the_results_folder(tmp_path):
    out = snakemake(tmp_path, panel("runs/a", "pythia", PYTHIA), "-n")
    written = [p.strip() for line in re.findall(r"^\s+(?:output|log): (.*)$", out, re.M) for p in line.split(",")]
    assert written and all(p.startswith("runs/a/") for p in written), [p for p in written if not p.startswith("runs/a/")]


# ---- two panels in two folders ----------------------------------------------------------------


@pytest.mark.slow
def test_two_panels_in_two_folders_each_summary_names_only_its_models(tmp_path, monkeypatch, warm_jobs):
    snakemake(tmp_path, panel("runs/a", "pythia", PYTHIA), env=warm_jobs)
    first = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs" / "a").rglob("*") if p.is_file()}
    snakemake(tmp_path, panel("runs/b", "olmo", OLMO), env=warm_jobs)
    # the second panel, in the same working folder (one .snakemake/), touched nothing of the first's
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "runs" / "a").rglob("*") if p.is_file()} == first
    assert "Nothing to be done" in snakemake(tmp_path, panel("runs/a", "pythia", PYTHIA), "-n")
    for folder, mine, other in (("runs/a", "pythia", "olmo"), ("runs/b", "olmo", "pythia")):
        results = tmp_path / folder
        assert manifest.read(results).names == [mine]
        text = console.summary(results)
        md = (results / "findings" / "summary.md").read_text()
        html = (results / "findings" / "summary.html").read_text()
        for page in (text, md, html):
            assert mine in page and not re.search(rf"\b{other}\b", page), folder
        assert "This run screened 1 model" in re.sub(r"\s+", " ", text)
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
    assert (tmp_path / "runs" / "a" / "logs").is_dir()

    # side by side: each question, then each panel's answer
    monkeypatch.chdir(tmp_path)
    text, problems = compare.compare(["runs/a", "runs/b"])
    assert not problems
    block = text.split("first induction circuit\n")[1].split("\n\n")[0].splitlines()
    assert len(block) == 2 and block[0].startswith("  runs/a  pythia") and block[1].startswith("  runs/b  olmo  ")
    _, problems = compare.compare(["runs/a:olmo"])
    assert problems and "its models: pythia" in problems[0]

    # a second panel run into a folder that holds the first's cells: its summary names only its own
    shutil.copytree(tmp_path / "runs" / "a", tmp_path / "runs" / "shared")
    snakemake(tmp_path, panel("runs/shared", "olmo", OLMO), env=warm_jobs)
    shared = tmp_path / "runs" / "shared"
    assert (shared / "models" / "pythia" / "trajectory.parquet").exists()  # the stale cells are still there
    text = console.summary(shared)
    assert "olmo" in text and "pythia" not in text
    assert "pythia" not in (shared / "findings" / "summary.md").read_text()
