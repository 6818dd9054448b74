"""The documents of the text probe, read from the file(s) the config names (docs/measures.md).

``text_probe.file`` is a path or a glob pattern (``docs/*.md``), relative to the working directory or,
when it matches nothing there, to the headtrace checkout (so the demo's ``docs/*.md`` is found from any
working directory): plain text (any other suffix; the
whole file is one document), JSON Lines (``.jsonl``: one document per line, its ``column`` field) or
Parquet (``.parquet``: its ``column`` column). Files are read in sorted order. An empty result (no file,
or no non-blank document) is an error naming the pattern.
"""
from __future__ import annotations

import glob
import json
from pathlib import Path

import polars as pl

from headtrace.core.schema import SCHEMA_PATH

CHECKOUT = SCHEMA_PATH.parents[1]  # the headtrace checkout (config/schema.yaml's repository)


def files_of(pattern: str) -> list[Path]:
    """The files ``pattern`` names (a path or a glob), sorted; an error naming it when there are none."""
    found = sorted(Path(p) for p in glob.glob(str(pattern)) if Path(p).is_file())
    if not found and not Path(pattern).is_absolute():
        found = sorted(Path(p) for p in glob.glob(str(CHECKOUT / pattern)) if Path(p).is_file())
    if not found:
        raise ValueError(f"text_probe.file: no file matches '{pattern}' (in the working directory or in {CHECKOUT})")
    return found


def read_documents(pattern: str, column: str = "text") -> list[str]:
    """Every non-blank document of the files ``pattern`` names, in file order."""
    docs: list[str] = []
    for path in files_of(pattern):
        docs += [d for d in _read(path, column) if d.strip()]
    if not docs:
        raise ValueError(f"text_probe.file: '{pattern}' holds no text (every document is empty or blank)")
    return docs


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
