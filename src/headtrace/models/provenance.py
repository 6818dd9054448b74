"""Which weights a cell really ran: the resolved commit and a content hash of the weight files.

Hub repositories have served byte-identical weights under different branch names (a known issue
with some OLMo-2 branches); a trajectory over such revisions shows "no change" that is no
training at all. So every cell records (``results/cells/{model}/{revision}/provenance.parquet``,
written by the capture job, schema ``provenance`` in :mod:`headtrace.core.tables`):

* ``hf_id`` / ``commit``: for hub models, the repository the revision was read from (``hf_id``, or
  the revision's own repository from the model's ``repos`` map) and the commit the revision
  (branch, tag or commit; ``main`` or the pinned one of a ``repos`` entry) resolved to in the
  local Hugging Face cache; null for toy and local checkpoints;
* ``weights_sha256``: the sha256 over the sorted lines ``<file name> <sha256 of the file>`` of
  every weight file the cell loads (:func:`headtrace.models.weights.weight_files`: the
  ``*.safetensors`` files, or for a revision without them ``pytorch_model.bin`` or its shards; so
  the same bytes under the same file names give the same hash, whatever the folder or revision is
  called);
* ``weight_files`` / ``weight_bytes``: the files hashed and their total size;
* ``weights_format``: ``safetensors`` or ``pickle`` (docs/integrity.md).

Per-file and per-tensor fingerprints go to the cell's ``fingerprint`` table
(:mod:`headtrace.models.fingerprint`), from the same file hashes.

Hashing reads every weight file once (about 0.5 GB/s on one core, measured: a few seconds for a
1B model in fp16/fp32, right after the capture pass read the same files).

:func:`attach` joins these columns onto a model's trajectory and :func:`identical_revisions`
finds revisions of one model with the same weight hash; the trajectory job logs them as warnings
and ``summary.md`` lists them (:func:`warning_lines`).
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import polars as pl

from headtrace.models import gguf, weights

__all__ = ["sha256_file", "combine", "file_hashes", "weights_hash", "cell_table", "attach", "identical_revisions", "warning_lines"]

log = logging.getLogger("headtrace.models.provenance")
sha256_file = weights.sha256_file  # re-exported: where the cells' file hashes come from


def combine(hashes: dict[str, str]) -> str:
    """``weights_sha256`` from per-file hashes: sha256 over the sorted lines ``<name> <sha256>``."""
    return hashlib.sha256("".join(f"{n} {hashes[n]}\n" for n in sorted(hashes)).encode()).hexdigest()


def file_hashes(folder: str | Path) -> tuple[str, list[Path], dict[str, str]]:
    """``(format, files, {file name: sha256})`` of the weight files in ``folder``
    (:func:`headtrace.models.weights.weight_files`; symlinks, as in the Hugging Face cache, followed)."""
    try:
        fmt, files = weights.weight_files(folder)
    except weights.CheckpointError as e:
        raise FileNotFoundError(str(e)) from e
    return fmt, files, {f.name: sha256_file(f) for f in files}


def weights_hash(folder: str | Path) -> tuple[str, list[str], int]:
    """``(sha256, file names, total bytes)`` of the weight files in ``folder`` (safetensors, else pickle)."""
    _fmt, files, hashes = file_hashes(folder)
    return combine(hashes), [f.name for f in files], sum(f.stat().st_size for f in files)


def cell_table(load: dict, model: str, revision: str, tokens: int | None,
               cache_dir: str | None = None, hashes: tuple[str, list[Path], dict[str, str]] | None = None
               ) -> pl.DataFrame:
    """One row of the ``provenance`` schema for the checkpoint the cell loads
    (:func:`headtrace.models.hub.cell_checkpoint`: the same resolution as the capture pass).
    ``hashes``: :func:`file_hashes` of that folder when already computed (the capture job shares
    them with the fingerprint table, so each file is hashed once)."""
    from headtrace.models import hub  # imports torch; the summary reads provenance tables without it

    source, folder, commit = hub.cell_checkpoint(load, model, revision, cache_dir=cache_dir)
    fmt, files, per_file = hashes if hashes is not None else file_hashes(folder)
    repo = hub.hub_checkpoint(load, revision)[0] if source == "hub" else None
    quantization = copy = None
    if fmt == weights.GGUF:  # what the file stores, and the safetensors copy the cell ran
        quantization = list(gguf.read(files[0]).quantization)
        copy = str(gguf.cached_folder(per_file[files[0].name]))
    return pl.DataFrame({
        "model": [model], "revision": [revision], "tokens": [tokens], "source": [source],
        "hf_id": [repo], "commit": [commit],
        "weights_sha256": [combine(per_file)], "weight_files": [[f.name for f in files]],
        "weight_bytes": [sum(f.stat().st_size for f in files)], "weights_format": [fmt],
        "quantization": [quantization], "dequantized_copy": [copy],
    }, schema_overrides={"tokens": pl.Int64, "hf_id": pl.String, "commit": pl.String,
                         "quantization": pl.List(pl.String), "dequantized_copy": pl.String})


def identical_revisions(df: pl.DataFrame) -> list[tuple[str, str, list[str]]]:
    """``(model, weights_sha256, revisions)`` for every weight hash shared by two or more revisions
    of one model (in the order the revisions appear in ``df``), from any table with ``model``,
    ``revision`` and ``weights_sha256`` columns (a provenance table or a trajectory)."""
    if df.is_empty() or "weights_sha256" not in df.columns:
        return []
    cells = (df.select("model", "revision", "weights_sha256").drop_nulls("weights_sha256")
             .unique(maintain_order=True))
    out = []
    for (model, digest), g in cells.group_by(["model", "weights_sha256"], maintain_order=True):
        revs = g["revision"].to_list()
        if len(revs) > 1:
            out.append((model, digest, revs))
    return out


def warning_lines(df: pl.DataFrame) -> list[str]:
    """One sentence per group of :func:`identical_revisions` (used in the log and summary.md)."""
    return [f"model '{m}': revisions {', '.join(repr(r) for r in revs)} have byte-identical weights "
            f"(weights_sha256 {d[:12]}…): they are one checkpoint under {len(revs)} names, so the "
            "trajectory shows no change between them. Check the repository's branches (some hub "
            "repositories serve the same weights under several branch names) and drop or replace them."
            for m, d, revs in identical_revisions(df)]


def attach(traj: pl.DataFrame, provenances: list[pl.DataFrame]) -> pl.DataFrame:
    """``traj`` with the cells' ``commit`` and ``weights_sha256`` as extra columns (joined on model
    and revision); logs a warning for every revision sharing its weights with another."""
    if not provenances:
        return traj
    prov = pl.concat([p.select("model", "revision", "commit", "weights_sha256") for p in provenances],
                     how="vertical_relaxed")
    for line in warning_lines(prov):
        log.warning("identical weights: %s", line)
    return traj.join(prov, on=["model", "revision"], how="left", maintain_order="left")
