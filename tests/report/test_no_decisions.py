"""report/ only words what a table says (issue 50, "answers are data"): no module under src/headtrace/report/
defines a threshold constant, gives a threshold parameter a numeric default, or compares a value with a
significance level. Each hit is named by file and line."""
from __future__ import annotations

import ast
import re
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "src" / "headtrace" / "report"
# a parameter or a constant that sets where a decision falls
THRESHOLD_NAME = re.compile(r"(threshold|alpha|_share$|_factor$|^quantile$|_eps$|^eps$)", re.IGNORECASE)
CONSTANT_NAME = re.compile(r"(THRESHOLD|ALPHA|_EPS$|^EPS$|_CUTOFF)")
SIGNIFICANCE = re.compile(r"[<>]=?\s*(\w+\.)?ALPHA\b|\bALPHA\s*[<>]=?|\bor\s+0?\.05\b")


def _modules():
    return sorted(REPORT.glob("*.py"))


def _numeric(node) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _hits(path: Path) -> list[str]:
    source = path.read_text()
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            out += [f"{path.name}:{d.lineno}: parameter '{arg.arg}' defaults to a number"
                    for arg, d in pairs if THRESHOLD_NAME.search(arg.arg) and _numeric(d)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.col_offset == 0:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [f"{path.name}:{node.lineno}: module constant '{t.id}'" for t in targets
                    if isinstance(t, ast.Name) and CONSTANT_NAME.search(t.id)]
    for i, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0]
        if SIGNIFICANCE.search(code):
            out.append(f"{path.name}:{i}: compares with a significance level: {line.strip()}")
        if re.search(r"\bCOPYING_THRESHOLD\b|\bSINK_EPS\b", code):
            out.append(f"{path.name}:{i}: reads a threshold constant: {line.strip()}")
    return sorted(out, key=lambda h: int(h.split(":")[1]))  # by line (stable: a line's hits in the order found)


def test_report_holds_no_threshold():
    hits = [h for p in _modules() for h in _hits(p)]
    assert not hits, "report/ decides: move the decision to the table that holds the values\n" + "\n".join(hits)


def test_report_reads_no_table():
    """report/ is handed its tables (the workflow's scripts, headtrace.core.results for the console): no
    module there reads Parquet."""
    reads = re.compile(r"\b(read_parquet|scan_parquet|read_many|tables\.read)\b")
    hits = [f"{p.name}:{i}: {line.strip()}" for p in _modules() for i, line in enumerate(p.read_text().splitlines(), 1)
            if reads.search(line.split("#", 1)[0])]
    assert not hits, "report/ reads a table: read it in headtrace.core.results or the script\n" + "\n".join(hits)


COMPUTE = REPORT.parent / "findings" / "compute.py"


def _builders() -> set[str]:
    """The functions the findings job computes its tables with: every function ``findings/compute.py``
    imports from a findings module or calls on one (``spectral_lead.f5_pr_lead``); ``all_findings``, its
    entry; and ``final_circuit``, the circuit F4's and F5's tables follow (``findings.trajectory``)."""
    tree = ast.parse(COMPUTE.read_text())
    names, modules = {"all_findings", "final_circuit"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "headtrace.findings":
            modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("headtrace.findings."):
            names |= {a.asname or a.name for a in node.names if not a.name.isupper()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in modules:
            names.add(node.func.attr)
    return names


def _builder_calls(path: Path, builders: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in builders:
                out.append(f"{path.name}:{node.lineno}: calls {name}()")
    return sorted(out, key=lambda h: int(h.split(":")[1]))


def test_report_computes_no_findings_table():
    """report/ words the findings job's tables and never builds one itself (the final circuit, F4's
    strict recall): no module there calls a function the job computes its tables with."""
    builders = _builders()
    assert {"final_circuit", "f4_final_circuit", "f4_recall", "f4_recall_milestones", "f5_pr_lead",
            "all_findings"} <= builders
    assert not builders & {"with_rev_index", "revision_order", "conform"}, "ordering helpers are not builders"
    hits = [h for p in _modules() for h in _builder_calls(p, builders)]
    assert not hits, "report/ computes a findings table: read the findings job's instead\n" + "\n".join(hits)


def test_the_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from x import agreement\n"
                   "INDUCTION_THRESHOLD = 50.0\n"
                   "def f(x, threshold: float = 0.4, *, alpha=0.05, name='a', n=3):\n"
                   "    return x <= agreement.ALPHA\n"
                   "def g(p, a=None):\n"
                   "    return a or 0.05\n")
    hits = _hits(bad)
    assert hits == ["bad.py:2: module constant 'INDUCTION_THRESHOLD'",
                    "bad.py:3: parameter 'threshold' defaults to a number",
                    "bad.py:3: parameter 'alpha' defaults to a number",
                    "bad.py:4: compares with a significance level: return x <= agreement.ALPHA",
                    "bad.py:6: compares with a significance level: return a or 0.05"]
    assert _hits(REPORT / "experiment_summary.py") == []
    calls = tmp_path / "calls.py"
    calls.write_text("from headtrace.findings import trajectory as T\n"
                     "from headtrace.findings.trajectory import f4_recall\n"
                     "fin = T.final_circuit(traj, 50.0)\n"
                     "strict = T.f4_recall_milestones(f4_recall(traj, 50.0, 50.0))\n"
                     "o = T.with_rev_index(traj)\n")
    assert _builder_calls(calls, _builders()) == [
        "calls.py:3: calls final_circuit()", "calls.py:4: calls f4_recall_milestones()", "calls.py:4: calls f4_recall()"]
