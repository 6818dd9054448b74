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
