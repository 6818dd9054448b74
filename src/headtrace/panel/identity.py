"""A cell is keyed by what it reads, not by where it reads it from.

The jobs that load a model take its load spec as a rule parameter, and Snakemake reruns a job whose
parameters change. For a ``local`` model the spec's ``path`` is text: moving a run, copying it, or
switching from a listed panel to ``revisions: {glob: ...}`` changes that text and would reschedule
every cell, while new weights saved under the same folder would change nothing and leave stale
results. So the parameter a job sees (:func:`identity`) names a local checkpoint by its content, the
``weights_sha256`` its provenance table records (:func:`headtrace.models.provenance.combine` over the
weight files' sha256), with ``path`` and ``package`` left out; the job itself finds the folder from
the config and checks, before it loads anything, that the weights there are still the ones its
parameter names (:func:`located`).

Hashing reads every weight file, so the hashes are kept in a cache keyed by each file's resolved
path, size and modification time (:class:`HashCache`, ``.snakemake/headtrace/weights-sha256.json`` in
the workflow's directory): a panel whose files have not changed costs one ``stat`` per file when the
DAG is built; a copied run is hashed once, the first time a DAG names it. ``hub`` models are named by
their repository and revision (the fetch pins the commit) and ``toy`` models by the workflow's own
checkpoints, so their spec is their identity as before.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from headtrace.core import durable
from headtrace.models import provenance, weights
from headtrace.models.layout import local_checkpoint_path
from headtrace.panel.config import load_spec, model_spec

CACHE = Path(".snakemake") / "headtrace" / "weights-sha256.json"
WHERE_KEYS = ("path", "package")  # where a local checkpoint is, not what it is


class ChangedWeights(RuntimeError):
    """A cell's weights are not those its job was scheduled for."""


def identity(config: dict, model: str, revision: str, cache: "HashCache | None" = None) -> dict:
    """The load spec of ``(model, revision)`` as a job's parameter: for a ``local`` model, without
    ``path`` and ``package`` and with ``weights_sha256`` (the content of the revision's weight files)."""
    spec = load_spec(config, model, revision)
    if spec.get("source") != "local":
        return spec
    out = {k: v for k, v in spec.items() if k not in WHERE_KEYS}
    out["weights_sha256"] = (cache or HashCache()).weights_sha256(local_checkpoint_path(model_spec(config, model), revision))
    return out


def located(config: dict, model: str, revision: str, scheduled: dict, cache: "HashCache | None" = None) -> dict:
    """The load spec a job reads ``(model, revision)`` with, once its weights are checked to be the
    ones ``scheduled`` (the job's :func:`identity` parameter) names; else :class:`ChangedWeights`
    naming the model, the revision and the folder."""
    spec = load_spec(config, model, revision)
    if spec.get("source") != "local":
        return spec
    folder = local_checkpoint_path(model_spec(config, model), revision)
    now = (cache or HashCache()).weights_sha256(folder)
    if now != scheduled.get("weights_sha256"):
        raise ChangedWeights(
            f"model '{model}' revision '{revision}': the weights in {folder} (weights_sha256 {now[:12]}…) are not "
            f"the ones this job was scheduled for ({str(scheduled.get('weights_sha256'))[:12]}…): they changed "
            "after the DAG was built; run the workflow again")
    return spec


class HashCache:
    """sha256 of weight files, remembered by (resolved path, size, modification time in ns).

    A file whose size or time changed is hashed again; entries are only ever added (atomically, by
    rename), so concurrent writers at worst hash a file twice."""

    def __init__(self, path: str | Path = CACHE):
        self.path = Path(path)
        try:
            self.known = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.known = {}
        if not isinstance(self.known, dict):
            self.known = {}

    def weights_sha256(self, folder: str | Path) -> str:
        """``weights_sha256`` of a checkpoint folder (or GGUF file), as its provenance records it."""
        _fmt, files = weights.weight_files(folder)
        hashes, added = {}, False
        for f in files:
            real = os.path.realpath(f)
            st = os.stat(real)
            key = f"{real}\t{st.st_size}\t{st.st_mtime_ns}"
            if key not in self.known:
                self.known[key] = weights.sha256_file(real)
                added = True
            hashes[Path(f).name] = self.known[key]
        if added:
            self._save()
        return provenance.combine(hashes)

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            durable.write_text(json.dumps(self.known, indent=0, sort_keys=True), self.path)
        except OSError:
            pass  # a read-only working folder: the hashes are recomputed next time, nothing else changes
