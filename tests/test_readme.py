"""The README opens with the two commands and shows the example configs as they ship. (The output
schemas moved to docs/outputs.md, generated and checked by tests/test_docs.py.)"""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))


def test_readme_shows_the_two_commands_first():
    head = "\n".join(README.read_text().splitlines()[:10])
    assert "make demo" in head and "make test" in head


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_readme_shows_the_example_configs_as_shipped(example):
    assert example.read_text().strip() in README.read_text(), (
        f"the README's copy of config/examples/{example.name} differs from the file; paste the file")
