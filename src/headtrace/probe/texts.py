"""The documents of the text probe, read from the file(s) the config names (docs/measures.md).

``text_probe.file`` is a path or a glob pattern (``notes/*.txt``), relative to the working directory or,
when it matches nothing there, to the headtrace checkout (so the demo's corpus,
``resources/text-probe/prose.jsonl``, is found from any working directory): plain text (any other suffix; the
whole file is one document), JSON Lines (``.jsonl``: one document per line, its ``column`` field) or
Parquet (``.parquet``: its ``column`` column). Files are read in sorted order. ``text_probe.split`` then
cuts each of those texts further (:data:`SPLITS`): ``none`` keeps it whole, ``heading`` cuts a Markdown
text at its headings (a section, its heading line first, is one document), ``paragraph`` at its blank
lines; lines inside a fenced code block (```` ``` ```` or ``~~~``) never cut. An empty result (no file,
or no non-blank document) is an error naming the pattern.
"""
from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import polars as pl

from headtrace.core.schema import SCHEMA_PATH

CHECKOUT = SCHEMA_PATH.parents[1]  # the headtrace checkout (config/schema.yaml's repository)
SPLITS = ("none", "heading", "paragraph")
_HEADING = re.compile(r"#{1,6}(\s|$)")  # an ATX heading: 1-6 '#' at the line's start, then a space or the end
_FENCE = ("```", "~~~")


def files_of(pattern: str) -> list[Path]:
    """The files ``pattern`` names (a path or a glob), sorted; an error naming it when there are none."""
    found = sorted(Path(p) for p in glob.glob(str(pattern)) if Path(p).is_file())
    if not found and not Path(pattern).is_absolute():
        found = sorted(Path(p) for p in glob.glob(str(CHECKOUT / pattern)) if Path(p).is_file())
    if not found:
        raise ValueError(f"text_probe.file: no file matches '{pattern}' (in the working directory or in {CHECKOUT})")
    return found


def read_documents(pattern: str, column: str = "text", split: str = "none") -> list[str]:
    """Every non-blank document of the files ``pattern`` names, in file order, each text cut by ``split``
    (:func:`split_text`)."""
    docs: list[str] = []
    for path in files_of(pattern):
        for text in _read(path, column):
            docs += [d for d in split_text(text, split) if d.strip()]
    if not docs:
        raise ValueError(f"text_probe.file: '{pattern}' holds no text (every document is empty or blank)")
    return docs


def check_enough(documents: list[str], n_sequences: int, pattern: str, split: str, windows: str = "start") -> None:
    """Before any tokenizer: with ``windows: start`` (one sequence per document at most), fewer documents
    than ``n_sequences`` is an error naming the pattern and the split. (Documents too short for a window
    are known only once tokenised: :func:`headtrace.models.tokenize.text_sequences` counts them.)"""
    if windows == "start" and len(documents) < n_sequences:
        raise ValueError(f"text_probe: '{pattern}' (split: {split}) holds {len(documents)} documents, fewer than "
                         f"text_probe.n_sequences {n_sequences} (one sequence per document): split the text finer "
                         "(text_probe.split), lower text_probe.n_sequences, or give more text")


def split_text(text: str, split: str = "none") -> list[str]:
    """``text`` as the documents ``split`` makes of it, in order, blank ones dropped: ``none`` the text
    itself; ``heading`` one per Markdown section (from a heading line up to the next heading; text
    before the first heading is a document of its own); ``paragraph`` one per block between blank lines.
    Lines inside a fenced code block never cut; each document keeps its lines as written (a section's
    heading line first), without the blank lines that separate paragraphs."""
    if split not in SPLITS:
        raise ValueError(f"text_probe.split: '{split}' is not one of {', '.join(SPLITS)}")
    if split == "none":
        return [text] if text.strip() else []
    docs: list[list[str]] = [[]]
    fence = None  # the marker of the open code block, or None
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if fence is None:
            if split == "heading" and _HEADING.match(line):
                docs.append([])
            elif split == "paragraph" and not stripped:
                docs.append([])
                continue
        if fence is None and stripped.startswith(_FENCE):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        docs[-1].append(line)
    out = ["".join(d) for d in docs]
    return [d.strip("\n") if split == "paragraph" else d for d in out if d.strip()]


def _read(path: Path, column: str) -> list[str]:
    if path.suffix == ".parquet":
        df = pl.read_parquet(path)
        if column not in df.columns:
            raise ValueError(f"text_probe.file: {path} has no column '{column}' (text_probe.column); "
                             f"it has {df.columns}")
        return [str(t) for t in df[column].drop_nulls().to_list()]
    if path.suffix == ".jsonl":
        out = []
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or column not in record:
                raise ValueError(f"text_probe.file: {path} line {i} has no field '{column}' (text_probe.column)")
            out.append(str(record[column]))
        return out
    return [path.read_text(encoding="utf-8")]
