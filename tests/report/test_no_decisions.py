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
