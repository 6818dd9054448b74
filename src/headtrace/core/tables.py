"""Every Parquet table headtrace writes: its schema, and one atomic writer.

The schemas below are the output contract documented in docs/outputs.md (same names, same order).
Tables are long format: one row per model x revision x layer x head (or x condition, ...).
Writers may add columns beyond the schema; the schema's columns must be present with these dtypes.

The schemas are kept by concept in ``headtrace.core.cell_schemas`` (one cell's tables) and
``headtrace.core.findings_schemas`` (the cross-revision tables) and merged here, in one order, so
docs/outputs.md's schema section and every writer read the same contract.
"""
from __future__ import annotations

import os

import numpy as np
import polars as pl
from safetensors.numpy import load_file, save_file

from headtrace.core import durable, paths
from headtrace.core.cell_schemas import CELL_KEY, CELL_SCHEMAS, CLASS_COLUMNS, HEAD_KEY  # noqa: F401 (re-exported)
from headtrace.core.findings_schemas import FINDINGS_SCHEMAS
from headtrace.core.heads import head_name  # noqa: F401  (re-exported: tables name heads)

SCHEMAS: dict[str, dict[str, pl.DataType]] = {**CELL_SCHEMAS, **FINDINGS_SCHEMAS}


def head_key_columns(model: str, revision: str, tokens: int | None, n_layers: int, n_heads: int) -> dict:
    """The ``HEAD_KEY`` columns of a per-head table, one row per (layer, head) in row-major order
    (layer-major, as ``array.ravel()`` of an (n_layers, n_heads) array); ``tokens`` null when unknown."""
    n_rows = n_layers * n_heads
    return {
        "model": [model] * n_rows,
        "revision": [revision] * n_rows,
        "tokens": pl.Series([tokens] * n_rows, dtype=pl.Int64),
        "layer": np.repeat(np.arange(n_layers, dtype=np.int32), n_heads),
        "head": np.tile(np.arange(n_heads, dtype=np.int32), n_layers),
    }


def conform(df: pl.DataFrame, schema: str) -> pl.DataFrame:
    """Check that ``df`` carries the schema's columns, cast them to its dtypes, schema columns first."""
    spec = SCHEMAS[schema]
    missing = [c for c in spec if c not in df.columns]
    if missing:
        raise ValueError(f"table '{schema}' is missing columns {missing}")
    extra = [c for c in df.columns if c not in spec]
    return df.select([pl.col(c).cast(t, strict=True) for c, t in spec.items()] + extra)


def write(df: pl.DataFrame, path: str | os.PathLike, schema: str | None = None) -> None:
    """Write ``df`` to ``path`` atomically and durably (temporary file in the same folder, fsync,
    rename, fsync of the folder: :func:`headtrace.core.durable.atomic_path`)."""
    if schema is not None:
        df = conform(df, schema)
    with durable.atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=True)


def read(path: str | os.PathLike) -> pl.DataFrame:
    return pl.read_parquet(path)


def only_models(df: pl.DataFrame | None, models) -> pl.DataFrame | None:
    """The rows of ``models`` only (a table without a ``model`` column, or ``models`` None, as it is): what a
    panel reads of a table that may hold another panel's rows (a results folder shared or copied)."""
    if df is None or models is None or "model" not in df.columns:
        return df
    return df.filter(pl.col("model").is_in(list(models)))


def read_many(paths) -> pl.DataFrame:
    """Concatenate tables of one schema (e.g. every cell of a model)."""
    frames = [pl.read_parquet(p) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


# Where each table lives in the default results folder (docs/outputs.md is generated from this and
# SCHEMAS), from the one definition of the results layout (headtrace.core.paths.RELATIVE).
_LOCATED = ("probe", "attention", "pr", "screen", "ablation", "verdict", "provenance", "fingerprint", "trajectory",
            "lineage", "bootstrap", "bootstrap_milestones", "positional", "measures", "text_probe")
LOCATIONS: dict[str, str] = {
    **{name: f"{paths.DEFAULT}/{paths.RELATIVE[name]}" for name in _LOCATED},
    **{name: f"{paths.DEFAULT}/{paths.RELATIVE['measures_findings']}/{name}.parquet"
       for name in ("measures_over_training", "measures_comparison", "measures_circuit_copying")},
    "cross_seed_model": f"{paths.DEFAULT}/{paths.RELATIVE['exp_cross_seed_model']}",
}


def markdown() -> str:
    """The output-schema section of docs/outputs.md: one line per table, columns with dtypes, in schema order."""
    lines = []
    for name, spec in SCHEMAS.items():
        folder = ("groups" if name.startswith("group_") else "findings" if name in _FINDINGS_TABLES
                  else "experiments")  # the folder of the results layout (headtrace.core.paths) it lives in
        sub = "{group}/" if folder == "groups" else ""
        where = LOCATIONS.get(name, f"{paths.DEFAULT}/{folder}/{sub}{name}.parquet")
        cols = ", ".join(f"`{c}` {_dtype_name(t)}" for c, t in spec.items())
        lines.append(f"- **`{where}`** — {cols}")
    return "\n".join(lines)


_FINDINGS_TABLES = {
    "f1_bos_floor", "f1_floor", "f2_bos_fraction", "f2_shape", "f2_layer_onset", "f2_layer_spread",
    "circuit_size", "f3_milestones", "f3_onset_bootstrap",
    "f3_gaps", "f3_onsets", "f4_final_circuit", "f4_recall", "f4_recall_milestones", "f4_recall_milestones_strict",
    "f5_pr_lead", "pr_integral",
    "strongest_head", "strongest_trend", "lineage_panel", "circuit_positional",
}


def _dtype_name(dtype) -> str:
    return {pl.String: "str", pl.Int64: "i64", pl.Int32: "i32", pl.Float64: "f64", pl.Boolean: "bool"}.get(
        dtype, str(dtype).replace("List(String)", "list[str]").replace("List(Int64)", "list[i64]")
        .replace("List(Float64)", "list[f64]")
    )


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file (summary.md) atomically and durably, like ``write``."""
    durable.write_text(text, path)


ARRAY_KEY = "head_outputs"


def write_array(array, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write one float32 array to a safetensors file atomically (the per-head outputs)."""

    with durable.atomic_path(path) as tmp:
        save_file({ARRAY_KEY: np.ascontiguousarray(array, dtype=np.float32)}, tmp, metadata=metadata)


def read_array(path: str | os.PathLike):

    return load_file(str(path))[ARRAY_KEY]
