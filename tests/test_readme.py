"""The README's output contract is generated from tables.SCHEMAS; keep them in step."""
from pathlib import Path

from headtrace.core import tables

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- schemas:begin -->", "<!-- schemas:end -->"


def test_readme_schema_section_matches_the_schemas():
    text = README.read_text()
    assert BEGIN in text and END in text, "README lacks the generated schema section"
    block = text.split(BEGIN)[1].split(END)[0].strip()
    assert block == tables.markdown().strip(), (
        "README schema section is stale: regenerate it with "
        "`.venv/bin/python -c 'from headtrace import tables; print(tables.markdown())'`"
    )


def test_readme_shows_the_two_commands_first():
    head = "\n".join(README.read_text().splitlines()[:10])
    assert "make demo" in head and "make test" in head
