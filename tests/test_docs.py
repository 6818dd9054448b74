"""The documentation stays true to the code: generated reference pages current, every relative link
resolving (to a file, and to a heading where it names one), the README short, the example configs
valid against the schema."""
from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config" / "schema.yaml"
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "config" / "README.md",
                *(ROOT / "docs").glob("*.md")])
EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))
README_MAX_LINES = 250


def _docs_script(name: str):
    """A script of docs/ (``generate``, ``demo_facts``) as a module, freshly loaded."""
    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generator():
    return _docs_script("generate")


def test_generated_pages_are_current():
    generate = _generator()
    stale = [str(p.relative_to(ROOT)) for p in generate.stale()]
    assert not stale, (f"{', '.join(stale)}: stale against config/schema.yaml / headtrace.core.tables; "
                       f"regenerate with `{generate.REGENERATE}`")


def test_outputs_page_lists_every_table():
    from headtrace.core import tables

    text = (ROOT / "docs" / "outputs.md").read_text()
    assert tables.markdown().strip() in text


def test_config_reference_lists_every_top_level_key():
    text = (ROOT / "config" / "README.md").read_text()
    for key in yaml.safe_load(SCHEMA.read_text())["properties"]:
        assert f"`{key}." in text or f"| `{key}` |" in text, f"config/README.md documents no key of '{key}'"


# ---- links ----------------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The Markdown without code blocks and code spans (a link inside code is not a link)."""
    return _CODE.sub("", _FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids of a Markdown page: lower case, punctuation dropped, spaces to '-'."""
    seen: dict[str, int] = {}
    out = set()
    for title in _HEADING.findall(_FENCE.sub("", page.read_text())):
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading '#{anchor}' in {dest.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: " + "; ".join(broken)


def test_docs_do_not_link_outside_the_repository():
    for page in PAGES:
        for target in _links(page):
            path = target.partition("#")[0]
            if path:
                dest = (page.parent / path).resolve()
                assert dest.is_relative_to(ROOT) and "shared" not in dest.relative_to(ROOT).parts[:1], (
                    f"{page.relative_to(ROOT)} links outside the repository: {target}")


# ---- README and examples --------------------------------------------------------------------


def test_readme_fits_on_a_few_screens():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; keep it to {README_MAX_LINES} (move detail to docs/)"


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= {"hub.yaml", "local.yaml"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_config_validates_against_the_schema(example):
    config = yaml.safe_load(example.read_text())
    validate(config, str(SCHEMA))  # raises naming the key
    assert config["models"], f"{example.name} defines no model"


# ---- numbers the pages quote, checked against the code ---------------------------------------

# (heads per layer, circuit heads in each of its layers, matched sets, exact at the default exact_max).
# The pages (conditions.py's docstring, config/schema.yaml, docs/statistics.md) say how many sets a circuit's
# reference set holds and which exact_max = 560 evaluates whole; each row is computed by the code the verdict uses.
REFERENCE_SETS = [
    (8, (1, 2), 224, True),                                                    # Pythia-1B: 8 x C(8, 2)
    (12, (4,), 495, True),                                                     # toy-neox step1000: C(12, 4)
    (16, (3,), 560, True), (16, (1, 1), 256, True),
    (9, (3, 2), 3024, False),                                                  # SmolLM2: C(9, 3) x C(9, 2)
    (16, (2, 2), 14400, False), (16, (1, 1, 1), 4096, False),                  # OLMo-1B's three layers
    (12, (11,), 12, True),                                                     # 11 of 12: too few for alpha
]


def _circuit(per_layer):
    return [(layer, head) for layer, k in enumerate(per_layer) for head in range(k)]


@pytest.mark.parametrize("n_heads, per_layer, n_sets, exact", REFERENCE_SETS)
def test_reference_set_sizes_the_pages_quote(n_heads, per_layer, n_sets, exact):
    from headtrace.causal.conditions import EXACT_MAX, reference_sets, reference_space

    circuit = _circuit(per_layer)
    assert reference_space(circuit, n_heads)[1] == n_sets
    sets, space, is_exact = reference_sets(circuit, n_heads, 20, 0, "matched_random", exact_max=EXACT_MAX)
    assert (space, is_exact) == (n_sets, exact)
    assert len(sets) == (n_sets if exact else 20)
    assert not exact or tuple(sorted(circuit)) in sets  # the circuit is one of its reference sets


def test_pages_quote_the_reference_set_sizes():
    from headtrace.causal import conditions

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["ablation"]["properties"]["exact_max"]
    assert schema["default"] == conditions.EXACT_MAX
    stats = (ROOT / "docs" / "statistics.md").read_text()
    for text, where in ((conditions.__doc__, "conditions.py"), (schema["description"], "schema.yaml")):
        assert "560" in text and "495" in text and "224" in text, f"{where} no longer names the exact reference sets"
    for n in ("495", "3,024", "224", "14,400"):
        assert n in stats, f"docs/statistics.md no longer quotes the reference set of {n} sets"


def test_composition_chance_rule_at_the_paper_probe():
    """10 x chance at 9,900 distinct tokens needs 3 correct of 2,000 (2 of 2,000 falls short), as the
    statistics page and the composition docstring say."""
    from headtrace.causal.verdict import chance_top1, induction_present
    from headtrace.experiments import composition

    chance = chance_top1((100, 10000))
    assert not induction_present(2 / 2000, chance) and induction_present(3 / 2000, chance)
    assert "3 correct of 2,000" in (ROOT / "docs" / "statistics.md").read_text()
    assert "3 correct of\n2000" in composition.__doc__ or "3 correct of 2000" in composition.__doc__


# ---- the suite fixtures name their sources ---------------------------------------------------

SUITES = sorted((ROOT / "tests" / "fixtures" / "suites").glob("*.txt"))
_SOURCE = re.compile(r"https://\S+|github\.com/[\w.-]+/[\w.-]+[^\n]*? @ [0-9a-f]{7,40}|UNTRACED")
_TOOL_REF = re.compile(r"\bids? \d{8,}|search[- ]results?\b")


@pytest.mark.parametrize("suite", SUITES, ids=lambda p: p.name)
def test_suite_fixture_headers_cite_public_sources(suite):
    """Each branch list says where it came from: a public URL, a repository at a commit, or plainly
    that it could not be traced; never an opaque lookup id instead of the source."""
    header = "\n".join(line for line in suite.read_text().splitlines() if line.startswith("#"))
    assert _SOURCE.search(header), f"{suite.name}: the header names no URL, repository @ commit or UNTRACED"
    tool_ref = _TOOL_REF.search(header)
    assert not tool_ref, f"{suite.name}: cites a lookup id ({tool_ref and tool_ref.group()!r}), not the public source"


def test_statistics_page_ceiling_table_is_the_code_s():
    """Every row of the sampled-baseline ceiling table recomputed with screen.sampled_ceiling."""
    from headtrace.cell.screen import sampled_ceiling

    text = (ROOT / "docs" / "statistics.md").read_text()
    row = re.compile(r"^\| (\d+) \| \[(\d+), (\d+)\)[^|]*\| (\d+)% \| (\d+)× \| (\d+)% \| (\d+)× \| (\d+)% \| (\d+)× \|$",
                     re.MULTILINE)
    rows = row.findall(text)
    assert len(rows) >= 6, "docs/statistics.md: the ceiling table was not found"
    for t, lo, hi, q_ind, c_ind, q_dup, c_dup, need, uni in rows:
        ind, dup = sampled_ceiling(int(t), (int(lo), int(hi)), 1), sampled_ceiling(int(t), (int(lo), int(hi)), 0)
        got = (round(100 * ind["share"]), round(ind["ceiling"]), round(100 * dup["share"]), round(dup["ceiling"]),
               round(100 * 50 / ind["ceiling"]), int(ind["uniform_ceiling"]))
        assert got == tuple(int(x) for x in (q_ind, c_ind, q_dup, c_dup, need, uni)), f"T = {t}, ab in [{lo}, {hi}): {got}"


# ---- figures quoted from a demo run (docs/demo_facts.py) ----------------------------------------------

def _demo_facts():
    return _docs_script("demo_facts")


def test_pages_quote_the_run_they_name():
    """Every marked figure of README and docs/ is the fact docs/demo-facts.json holds for the run it
    quotes (`make pages` after a demo rewrites both from the run's tables)."""
    D = _demo_facts()
    known = json.loads(D.FACTS.read_text())["facts"]
    assert not D.problems(D.PAGES, known)
    assert sum(len(D.marks(p.read_text())) for p in D.PAGES) >= 20  # the README's and toy-panel's figures


def test_demo_facts_are_read_from_the_tables(tmp_path):
    import polars as pl

    D = _demo_facts()
    cell = tmp_path / "cells" / "m" / "r2"
    cell.mkdir(parents=True)
    row = dict(model="m", revision="r2", tokens=200, circuit="final_circuit", heads=["L1H0", "L1H2"],
               verdict="causal", n_sequences=32, baseline_top1=0.6875, ablated_top1=0.1875, upper_bound_top1=0.0,
               metric="top1", effect=0.5, effect_lo=0.43125, effect_hi=0.56875, p_value=1 / 70,
               n_distinct_draws=70, n_random=70, n_matched_sets=70, control_exact=True, baseline_value=None,
               ablated_value=None, random_effect_mean=0.1, upper_bound_value=None, boost=0.6, boost_lo=0.5,
               boost_hi=0.7, ablated_fraction=0.27, ablated_fraction_lo=0.2, ablated_fraction_hi=0.35,
               second_method=None, second_verdict=None, second_p_value=None)
    ce = dict(row, revision="r1", tokens=100, circuit="circuit", metric="ce", baseline_value=8.2936,
              ablated_value=11.2113, effect=2.9177, effect_lo=2.18726, effect_hi=3.6958, random_effect_mean=-0.0565,
              upper_bound_value=11.1211, p_value=0.0141, n_distinct_draws=97, n_random=99, n_matched_sets=4000,
              control_exact=False, boost=1.2034, boost_lo=0.9011, boost_hi=1.4987, ablated_fraction=-1.4246,
              ablated_fraction_lo=-2.0312, ablated_fraction_hi=-0.8851, second_method="mean", second_verdict="causal",
              second_p_value=0.02)
    pl.DataFrame([row]).write_parquet(cell / "verdict.parquet")
    (tmp_path / "cells" / "m" / "r1").mkdir()
    pl.DataFrame([ce]).write_parquet(tmp_path / "cells" / "m" / "r1" / "verdict.parquet")
    (tmp_path / "findings" / "measures").mkdir(parents=True)
    pl.DataFrame(dict(model=["m"] * 4, revision=["r1", "r1", "r2", "r2"], tokens=[100, 100, 200, 200],
                      layer=[0, 1, 0, 1], n_first_token=[0, 1, 0, 3], n_heads=[4] * 4,
                      n_first_token_key0=[0, 1, 0, 2], max_sel_first_token=[1.2, 31.0, 1.7437, 40.0])
                 ).write_parquet(tmp_path / "findings" / "f1_bos_floor.parquet")
    pl.DataFrame(dict(model=["m", "m"], revision=["r2", "r1"], tokens=[200, 100], n_induction_circuit=[2, 0])
                 ).write_parquet(tmp_path / "findings" / "circuit_size.parquet")
    pl.DataFrame(dict(model=["m", "m"], revision=["r1", "r2"], tokens=[100, 200], eps=[0.3, 0.3],
                      text_sink_rate=[0.1, 0.25])).write_parquet(tmp_path / "findings" / "measures" /
                                                                  "measures_over_training.parquet")
    f = D.facts(tmp_path)
    # the last revision's final circuit; top-1 in pp with its interval rounded outward; p as the fraction
    assert f["m.circuit"] == "L1H0, L1H2" and f["m.verdict"] == "causal" and f["m.top1"] == "68.8% → 18.8%"
    assert f["m.effect"] == "50.0 pp [43.1, 56.9]" and f["m.p"] == "1/70" and f["m.sets"] == "all 70"
    assert f["m.boost"] == "60.0 pp [50.0, 70.0]" and "m.second_verdict" not in f
    assert f["m.first_token"] == "3 of 8 (37.5%)" and f["m.circuit_sizes"] == "0, 2" and f["m.text_sink"] == "25.0%"
    assert f["m.first_token_key0"] == "2 of 3" and f["m.floor_max_sel"] == "40×"  # layers 0-1, any revision
    # a cross-entropy row: nats, the interval outward, a p that is no fraction rounded up
    v = D.verdict_facts(pl.DataFrame([ce]))
    assert v["m.effect"] == "2.92 nats [2.18, 3.70]" and v["m.ce"] == "8.29 to 11.21" and v["m.p"] == "0.015"
    assert v["m.random_mean"] == "8.24" and v["m.upper"] == "11.12"
    assert v["m.sets"] == "99 draws of 4,000" and v["m.boost"] == "1.20 nats [0.90, 1.50]"
    assert v["m.share_left"] == "-142% [-204%, -88%]" and v["m.second_verdict"] == "mean: causal" and v["m.second_p"] == "0.02"
    # a page quoting another run's figure is caught, and rewritten from the facts
    page = tmp_path / "page.md"
    page.write_text("top-1 <!-- demo:m.top1 -->67.2% → 4.7%<!-- /demo --> and <!-- demo:m.nothing -->1<!-- /demo -->")
    D.ROOT = tmp_path
    assert [p.split(": ")[1] for p in D.problems([page], f)] == ["m.top1", "m.nothing"]
    assert "<!-- demo:m.top1 -->68.8% → 18.8%<!-- /demo -->" in D.rewrite(page.read_text(), f)


# ---- the notebook API page ------------------------------------------------------------------


@pytest.mark.slow
def test_the_api_page_example_runs_as_written(tmp_path):
    """docs/api.md's first example, run as a fresh clone would (no network: a random checkpoint it saves
    itself): it loads, analyses and prints the cell's one screen, and writes the workflow's tables."""
    import subprocess
    import sys

    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "api.md").read_text(), re.MULTILINE | re.DOTALL)
    (tmp_path / "example.py").write_text(blocks[0])
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "my-run step0: induction circuit" in out and "  final circuit (L1H0): " in out
    assert "CellTables: attention (8 rows), pr (8 rows), screen (8 rows)" in out
    assert {p.stem for p in (tmp_path / "out").glob("*.parquet")} >= {"attention", "pr", "screen", "ablation", "verdict"}


def test_the_api_page_names_what_the_code_has():
    """Every argument of load and analyze is in docs/api.md's tables, and every field of CellTables;
    every verdict column the page tells a reader to read is a column of the verdict table."""
    import dataclasses
    import inspect

    from headtrace import api
    from headtrace.core.tables import SCHEMAS

    text = (ROOT / "docs" / "api.md").read_text()
    for fn in (api.load, api.analyze):
        for name in list(inspect.signature(fn).parameters)[1:]:
            assert f"`{name}`" in text, f"docs/api.md does not name {fn.__name__}'s argument {name}"
    for f in dataclasses.fields(api.CellTables):
        assert f"| `{f.name}` |" in text, f"docs/api.md has no row for CellTables.{f.name}"
    verdict_rows = text[text.index("### Reading a verdict row"):]
    named = {c for row in re.findall(r"^\| (`[^|]*`) \|", verdict_rows, re.MULTILINE) for c in re.findall(r"`(\w+)`", row)}
    assert named and named <= set(SCHEMAS["verdict"]), sorted(named - set(SCHEMAS["verdict"]))


def test_outputs_page_describes_every_verdict_column():
    """Issue 51 point 5: the verdict bullet of docs/outputs.md's column meanings names every column of
    the verdict table (a column only listed in the generated schema is not described)."""
    from headtrace.core.tables import SCHEMAS

    text = (ROOT / "docs" / "outputs.md").read_text()
    text = text[text.index("## What the columns mean"):]
    start = text.index("- **`verdict`**")
    bullet = text[start:text.index("\n- **", start + 1)]
    missing = [c for c in SCHEMAS["verdict"] if c not in ("model", "revision", "tokens") and f"`{c}`" not in bullet]
    assert not missing, f"docs/outputs.md describes no {missing} of the verdict table"
