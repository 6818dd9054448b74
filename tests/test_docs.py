"""The documentation stays true to the code: generated reference pages current, every relative link
resolving (to a file, and to a heading where it names one), the README short, the example configs
valid against the schema."""
from __future__ import annotations

import importlib.util
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


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        assert f"`{key}." in text, f"config/README.md documents no key of '{key}'"


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
# The pages (conditions.py's docstring, config/schema.yaml, docs/statistics.md) say which of these
# geometries exact_max = 286 covers; each row is computed here by the code the verdict uses.
MATCHED_SPACES = [
    (8, (3,), 10, True), (8, (1, 2), 105, True), (8, (2, 2), 225, True),       # Pythia-1B: 105
    (8, (1, 1, 1), 343, False),
    (16, (3,), 286, True), (16, (1, 1), 225, True),
    (16, (2, 1), 1365, False), (16, (2, 2), 8281, False),
    (16, (1, 1, 1), 3375, False), (16, (1, 1, 1, 1), 50625, False),            # OLMo, OLMoE circuits
    (4, (2,), 1, True), (4, (3,), 0, True),                                    # toy 4-head layers: one set, none
    (12, (5,), 21, True),
]


def _circuit(per_layer):
    return [(layer, head) for layer, k in enumerate(per_layer) for head in range(k)]


@pytest.mark.parametrize("n_heads, per_layer, n_sets, exact", MATCHED_SPACES)
def test_matched_space_sizes_the_pages_quote(n_heads, per_layer, n_sets, exact):
    from headtrace.causal.conditions import EXACT_MAX, matched_sets, matched_space

    circuit = _circuit(per_layer)
    assert matched_space(circuit, n_heads)[1] == n_sets
    if n_sets:
        sets, space, is_exact = matched_sets(circuit, n_heads, 20, 0, "matched_random", exact_max=EXACT_MAX)
        assert (space, is_exact) == (n_sets, exact)
        assert len(sets) == (n_sets if exact else 20)


def test_pages_quote_the_matched_space_sizes():
    from headtrace.causal import conditions

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["ablation"]["properties"]["exact_max"]
    assert schema["default"] == conditions.EXACT_MAX
    stats = (ROOT / "docs" / "statistics.md").read_text()
    for text, where in ((conditions.__doc__, "conditions.py"), (schema["description"], "schema.yaml")):
        assert "8,281" in text and "1,365" in text, f"{where} no longer names the sampled two-layer 16-head spaces"
    for n in ("225", "1,365", "8,281", "3,375", "50,625"):
        assert n in stats, f"docs/statistics.md no longer quotes the matched space {n}"
    methods = (ROOT / "docs" / "methods.md").read_text()
    assert "min(k_l, free_l)" not in methods  # an empty space, not a smaller one (conditions.matched_space)


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
        ind, dup = sampled_ceiling(int(t), int(lo), int(hi), 1), sampled_ceiling(int(t), int(lo), int(hi), 0)
        got = (round(100 * ind["share"]), round(ind["ceiling"]), round(100 * dup["share"]), round(dup["ceiling"]),
               round(100 * 50 / ind["ceiling"]), int(ind["uniform_ceiling"]))
        assert got == tuple(int(x) for x in (q_ind, c_ind, q_dup, c_dup, need, uni)), f"T = {t}, ab in [{lo}, {hi}): {got}"
