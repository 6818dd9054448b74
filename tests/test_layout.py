"""The package's layout and the workflow's hygiene: layers, no import cycle, function-local imports
only for heavy optional dependencies, a Snakefile that parses without torch, every shipped config
valid and dry-runnable offline, resources declared once, and tests that mirror the package."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "headtrace"
BIN = Path(sys.executable).parent
HEAVY = ("torch", "transformers", "huggingface_hub", "headtrace")  # what a function may import, with a comment


def test_import_linter_layers_contract_is_kept():
    proc = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
    return out


def test_cycle_finder_finds_a_known_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    """Every import counts, function-local ones included (grimp reads them all)."""
    g = grimp.build_graph("headtrace", cache_dir=None)
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    # a package's __init__ importing its own submodules is not a cycle of concepts
    graph = {m: {d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")}
             for m, deps in graph.items()}
    assert _cycles(graph) == []


# A private definition a module needs at import time, before its first public one (a dataclass default).
OPENS_WITH_HELPERS = {"models/families.py": "_no_residual is the Family dataclass's default"}


def test_modules_read_top_down():
    """STYLE.md: the public function first, helpers below. No module opens with two or more private
    definitions before its first public one (except where one is needed at import time, named above)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = [n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        first = next((i for i, n in enumerate(names) if not n.startswith("_")), None)
        rel = path.relative_to(PACKAGE).as_posix()
        if first is not None and first >= 2 and rel not in OPENS_WITH_HELPERS:
            found[rel] = names[:first]
    assert not found, f"modules that open with their helpers (move the public definitions up): {found}"


def test_function_local_imports_are_heavy_optional_dependencies_with_a_reason():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in sub.names] if isinstance(sub, ast.Import) else [sub.module or ""]
                    heavy = all(n.split(".")[0] in HEAVY for n in names)
                    here, above = lines[sub.lineno - 1], lines[sub.lineno - 2]
                    reason = "#" in here or above.strip().startswith("#") or _same_block_commented(lines, sub)
                    if not (heavy and reason):
                        bad.append(f"{path.relative_to(ROOT)}:{sub.lineno}: {here.strip()}")
    assert bad == [], "function-local imports without a heavy-dependency reason:\n" + "\n".join(bad)


def _same_block_commented(lines, node) -> bool:
    """Consecutive imports after a commented one share its reason."""
    i = node.lineno - 2
    while i >= 0 and re.match(r"\s*(from \S+ )?import ", lines[i]):
        if "#" in lines[i]:
            return True
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


SHIPPED = sorted(p for p in (ROOT / "config").rglob("*.yaml") if p.name != "schema.yaml")


OVERLAYS = ("experiments.yaml", "toy-long.yaml")  # merged over the demo config, key by key


def _dry_run(config: Path, tmp_path: Path, importtime: bool = False, overlay: bool = False) -> subprocess.CompletedProcess:
    configs = [str(ROOT / "config" / "config.yaml")] * overlay + [str(config)]
    cmd = [sys.executable] + (["-X", "importtime"] if importtime else []) + [
        "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
        "--configfile", *configs, "--cores", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "config")))
def test_every_shipped_config_validates_and_dry_runs_offline(config, tmp_path):
    """Every config under config/ (the demo, the published panel, the examples, the suites, ...)
    passes the schema and the panel checks and builds its DAG with no network. A config whose
    models read local checkpoint folders is dry-run against stand-in folders (config.json, a weights file)."""
    cfg = yaml.safe_load(config.read_text())
    for spec in (cfg.get("models") or {}).values():
        if spec.get("source") == "local":
            for rev in spec["revisions"] if isinstance(spec["revisions"], list) else []:
                folder = Path(tmp_path / spec["path"].replace("{revision}", rev)) if "{revision}" in spec["path"] \
                    else tmp_path / spec["path"] / rev
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "config.json").write_text('{"max_position_embeddings": 2048, "vocab_size": 50304}')
                (folder / "model.safetensors").touch()  # a stand-in: the DAG build checks weight files are there
    proc = _dry_run(config, tmp_path, overlay=config.name in OVERLAYS)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_the_experiments_overlay_dry_runs_over_the_demo(tmp_path):
    cmd = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(ROOT / "config/config.yaml"), str(ROOT / "config/experiments.yaml"), "--cores", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "noise_floor" in proc.stdout and "composition" in proc.stdout  # the overlay turns them on


@pytest.mark.slow
@pytest.mark.parametrize("config", ["config/config.yaml", "config/paper-panel.yaml"])
def test_parsing_the_workflow_imports_neither_torch_nor_transformers(config, tmp_path):
    proc = _dry_run(ROOT / config, tmp_path, importtime=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    assert "headtrace.panel.config" in imported  # the check sees the workflow's own imports
    assert not {m for m in imported if m.split(".")[0] in ("torch", "transformers")}


def _rules() -> set[str]:
    text = "\n".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    return set(re.findall(r"^(?:rule|checkpoint) (\w+):", text, re.M))


def test_the_slurm_profile_names_real_rules_and_declares_no_memory_or_runtime():
    """Memory and run time are declared once, in the rules; the profile adds Slurm's keys only."""
    rules = _rules()
    for profile in (ROOT / "profiles/slurm/config.yaml", ROOT / "slurm/test-profile.yaml"):
        prof = yaml.safe_load(profile.read_text())
        named = set(prof.get("set-resources", {})) | set(prof.get("set-threads", {}))
        assert named <= rules, f"{profile.name} names rules that do not exist: {sorted(named - rules)}"
    base = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    for rule, res in base["set-resources"].items():
        assert not {"mem_mb", "runtime"} & set(res), f"{rule}: mem_mb/runtime belong in the rule"
    gpu = {r for r, res in base["set-resources"].items() if res.get("gpu")}
    assert gpu == set(base["set-threads"]), "every GPU rule takes its threads from the profile"
    for rule in gpu:
        assert base["set-threads"][rule] == base["set-resources"][rule]["cpus_per_gpu"]


def test_rules_keep_device_and_batch_size_out_of_params_and_model_passes_write_benchmarks():
    """Switching from CPU to CUDA (or resizing batches) must not invalidate finished cells."""
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"^(?=rule |checkpoint )", smk.read_text(), flags=re.M):
            params = re.search(r"^    params:\n((?:        .*\n)+)", block, re.M)
            if params:
                assert not re.search(r"\b(device|batch_size)=", params.group(1)), f"{smk.name}: {block[:40]}"
    text = "\n".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    for rule in ("capture", "ablate", "shuffled_capture", "cross_seed_ablation", "train_toy"):
        block = re.search(rf"^rule {rule}:\n(.*?)(?=^rule |^checkpoint |^localrules|\Z)", text, re.M | re.S).group(1)
        assert "    benchmark:" in block, rule


def test_every_workflow_script_first_offers_its_job_to_the_warm_server():
    """`headtrace warm` (make demo) saves a job its imports only if the script asks before importing."""
    for script in sorted((ROOT / "workflow" / "scripts").glob("*.py")):
        body = ast.parse(script.read_text()).body
        first = [ast.unparse(node) for node in body[:2]]
        assert first == ["from headtrace.runtime import warm", "warm.delegate()"], script.name


# The tests of api.py and cli.py and of the repository as a whole stay at the top of tests/ (CONTRIBUTING.md, Tests).
TOP_TESTS = {"test_api.py", "test_cell_naming.py", "test_contributing_layout.py", "test_docs.py", "test_layout.py", "test_own_run_doc.py",
             "test_readme.py"}


def test_the_tests_mirror_the_package_and_import_no_test_module():
    """A test file sits in its package room's folder (tests/cell for headtrace.cell, ...) or in tests/workflow,
    and takes what it shares with other files from tests/helpers, never from another test module."""
    tests = ROOT / "tests"
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.parent.name for p in tests.glob("*/**/test_*.py")}
    assert folders <= rooms | {"workflow"}, f"test folders that mirror no package room: {sorted(folders - rooms)}"
    top = {p.name for p in tests.glob("test_*.py")}
    assert top <= TOP_TESTS, (f"{sorted(top - TOP_TESTS)}: move to the folder of the room it tests "
                              "(tests/cell, tests/panel, ...; end-to-end runs: tests/workflow)")
    for path in sorted(tests.glob("**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.split(".")[0].startswith("test_")]
            assert not bad, f"{path.relative_to(ROOT)} imports the test module {bad[0]}: move what it needs to tests/helpers"
