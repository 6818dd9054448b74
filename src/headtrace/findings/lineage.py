"""Checkpoint lineage: which revisions of a model really are the checkpoints their names say.

Public suites have served wrong weights under a revision's name: 76 of pythia-2.8b's 154 step
branches serve ``main``'s ``model.safetensors`` (EleutherAI/pythia#205), pythia-12b's
``step50000``/``step58000`` serve the final checkpoint's first shard beside their own other shards
(#206), and PolyPythias ``pythia-160m-weight-seed{1,2}`` from ``step1`` on do not descend from
their own ``step0`` (#203). A trajectory over such revisions shows milestones that are no training
at all. This module reads the cells' ``fingerprint`` tables (:mod:`headtrace.models.fingerprint`:
one row per weight file and per stored tensor with its sha256, L2 norm and a 64-long CountSketch
whose projection depends only on the tensor's name and size) and, per model, returns one
``lineage`` row per revision (schema in :mod:`headtrace.core.tables`). Pure functions, no model.

**Which tensors.** Distances and tensor sharing use the *matrices*: stored tensors of two or more
dimensions with a sketch. Their initialisation is random and zero-mean, so two independent inits
are orthogonal and an identical matrix means a common origin. One-dimensional tensors (norm gains
initialised to ones, biases to zeros) are the same in every fresh init and would make any two
inits look related; they are left out (they also hold a negligible share of the parameters).

**Distance.** For revisions ``a`` and ``b``: ``D² = Σ_t ||s_t(a) − s_t(b)||²`` over the matrices
``t`` both store with the same size (0 for a tensor whose sha256 is equal), an unbiased estimate of
``||a − b||²`` (a CountSketch is linear and its projection is shared); ``A² = Σ_t norm_t(a)²``,
``B²`` likewise (exact). The table's distance is **relative to the parameters' scale**,
``rel = D / sqrt((A² + B²) / 2)``: 0 for identical weights, **√2 ≈ 1.414 for independent
zero-mean weights whatever their norms** (``||a − b||² = A² + B²`` when ``<a, b> = 0``), 2 for
``b = −a``. One global ratio rather than a per-tensor median: it weights each tensor by its size,
so it reads as "how far the parameter vector moved", and its independence value is exact.

**Descent from the init** is a test of independence on the per-matrix cosines
``cos_t = (A_t² + B_t² − D_t²) / (2 A_t B_t)`` (1: same direction, 0: independent). A CountSketch
of length ``m`` estimates ``D_t²`` with variance ``(2/m)(||v||⁴ − ||v||₄⁴) ≤ 2||v||⁴/m``, so were the
two revisions independent (``D_t² = A_t² + B_t²``) ``cos_t`` would scatter around 0 with
``sd0_t = sqrt(2/m) (A_t² + B_t²) / (2 A_t B_t)`` (exact norms only: the weights do not depend on the
sketches being tested). The table's ``cos_from_first`` is the mean of the ``cos_t`` weighted by
``1/sd0_t²`` and ``cos_sd = 1/sqrt(Σ 1/sd0_t²)`` its standard deviation under independence
(≈ 0.18/sqrt(number of matrices)). One global cosine would weight the embedding (the largest matrix,
and the noisiest) by its size and leave a 2-layer toy model undecidable; each matrix votes here.

**Flags** (:data:`FLAGS`), decided per model on its revisions in training order
(:func:`headtrace.core.revisions.training_order_key`):

* ``duplicate_of`` — every weight file (the same sha256 set) or every stored tensor equals another
  revision's. Every member of a group of identical revisions is flagged, naming the others: the
  fingerprints cannot tell which name, if any, the weights belong to (#205 serves the final
  checkpoint under earlier names, but a copy could as well sit under the latest). The group keeps one
  place on the path of training (its latest member's) for the distances and detours of the others.
* ``shares_shard_with`` — some weight file (a shard), or some matrix, equals another revision's
  that is not a duplicate of it: the earlier revision of the pair is flagged and names the later
  (#206). A module left unchanged over consecutive revisions (a frozen or never-routed weight) is
  not sharing: "unchanged" is decided on the path of training, where a set of identical revisions is
  one place (a branch serving the final's files is no step of the run), and by whole modules (weight
  and bias together), over two steps or more or from the first revision on (:func:`_frozen`).
* ``not_descended_from_init`` — the revision is as far from the model's earliest (non-duplicate)
  revision as independent inits are from each other, ``cos_from_first < max(Z · cos_sd, COS_FLOOR)``,
  and no chain descends to it: it also fails that test against each of the :data:`CHAIN_TRIES` latest
  revisions that descend (directly or by chain). A run drifting far from its init (weight decay, long
  training) keeps every link and is ``descent = chain``, not flagged; another init breaks them all.
  The test compares with the earliest revision, so a panel without step 0 is warned about
  (:func:`reference_warnings`). The calibration and each flag's blind spots are in docs/integrity.md.
* ``discontinuous`` — the revision leaves the path of training: its *detour*
  ``(d(prev, r) + d(r, next)) / d(prev, next)`` exceeds :data:`DETOUR` (two consecutive steps of any
  direction that are not opposed give at most √2 ≈ 1.41; a revision carrying weights from
  elsewhere gives far more), or its distance from the init *falls back*: it lies below the largest
  distance of an earlier unflagged revision by more than ``max(Z · sd, FALLBACK · that distance)``.
  Neighbours are the non-duplicate revisions; the first and last have no detour.

Models without fingerprints (the published reference panel) give no rows. Each row also carries
``weights_digest`` and ``continues`` (the model the config declares this run continues), with which
:mod:`headtrace.findings.lineage_panel` finds the same weights under two models' names.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping

import numpy as np
import polars as pl

from headtrace.core import tables
from headtrace.core.revisions import training_order_key
from headtrace.findings.lineage_panel import PANEL_FLAGS, across_models, declared_pairs, same_weights

__all__ = ["FLAGS", "PANEL_FLAGS", "Z", "COS_FLOOR", "DETOUR", "FALLBACK", "lineage", "model_lineage", "pair_stats",
           "across_models", "declared_pairs", "suspect_map", "flagged", "drop_flagged", "check_on_suspect", "EMPTY"]

FLAGS = ("duplicate_of", "shares_shard_with", "not_descended_from_init", "discontinuous")
Z = 4.0  # sketch-noise multiples a difference must exceed to count (one-sided, p ≈ 3e-5 under normal noise)
COS_FLOOR = 0.05  # cosine to the init below which a revision counts as independent, however small the noise
DETOUR = 2.0  # (d(prev,r) + d(r,next)) / d(prev,next) above which r leaves the path (orthogonal steps: ≤ √2)
FALLBACK = 0.05  # relative fall of the distance from the init that counts (beside Z sketch sd)
CHAIN_TRIES = 3  # a revision failing the descent test against the init is tested against this many predecessors

LINEAGE_COLUMNS = tables.SCHEMAS["lineage"]
EMPTY = pl.DataFrame(schema=LINEAGE_COLUMNS)


# ---- per-model arrays ------------------------------------------------------------------------


class _Model:
    """One model's fingerprints as aligned arrays: revisions (training order) x matrices."""

    def __init__(self, fp: pl.DataFrame, revisions: list[str]):
        self.revisions = revisions
        idx = {r: i for i, r in enumerate(revisions)}
        files = fp.filter(pl.col("kind") == "file")
        self.files: list[dict[str, str]] = [{} for _ in revisions]  # file name -> sha256
        for r, name, sha in files.select("revision", "name", "sha256").iter_rows():
            self.files[idx[r]][name] = sha
        tens = fp.filter(pl.col("kind") == "tensor")
        self.tensors: list[dict[str, str]] = [{} for _ in revisions]  # every tensor: name -> sha256
        self.tensor_file: list[dict[str, str]] = [{} for _ in revisions]
        for r, name, sha, file in tens.select("revision", "name", "sha256", "file").iter_rows():
            self.tensors[idx[r]][name] = sha
            self.tensor_file[idx[r]][name] = file
        mats = tens.filter((pl.col("shape").list.len() >= 2) & pl.col("sketch").is_not_null()
                           & (pl.col("sketch").list.len() > 0))
        names = sorted(set(mats["name"].to_list()))
        self.names = names
        col = {n: j for j, n in enumerate(names)}
        m = int(mats["sketch"].list.len().max()) if mats.height else 0
        self.m = m
        R, T = len(revisions), len(names)
        self.sketch = np.zeros((R, T, max(m, 1)))
        self.norm2 = np.zeros((R, T))
        self.numel = np.full((R, T), -1, dtype=np.int64)
        self.sha = np.full((R, T), None, dtype=object)
        for r, name, sha, numel, norm, sk in mats.select("revision", "name", "sha256", "numel", "norm",
                                                         "sketch").iter_rows():
            i, j = idx[r], col[name]
            if len(sk) != m:
                raise ValueError(f"fingerprint of revision '{r}': tensor '{name}' has a sketch of length {len(sk)}, "
                                 f"others {m}")
            self.sketch[i, j] = sk
            self.norm2[i, j] = float(norm) ** 2
            self.numel[i, j] = int(numel)
            self.sha[i, j] = sha


def pair_stats(mod: _Model, a: int, b: int) -> dict:
    """Relative distance, mean per-matrix cosine and their sketch noise between revisions ``a`` and
    ``b`` of ``mod`` over the matrices both store with the same size (module docstring)."""
    both = (mod.numel[a] >= 0) & (mod.numel[a] == mod.numel[b])
    if not both.any():
        return {"rel": math.nan, "rel_sd": math.nan, "cos": math.nan, "cos_sd": math.nan, "n": 0}
    diff = mod.sketch[a, both] - mod.sketch[b, both]
    d2 = np.einsum("tm,tm->t", diff, diff)
    same = np.array([x is not None and x == y for x, y in zip(mod.sha[a, both], mod.sha[b, both])], dtype=bool)
    d2[same] = 0.0
    a2, b2 = mod.norm2[a, both], mod.norm2[b, both]
    var_t = 2.0 * d2 ** 2 / mod.m  # Var(D̂_t²), plug-in
    D2, A2, B2, var = float(d2.sum()), float(a2.sum()), float(b2.sum()), float(var_t.sum())
    scale = (A2 + B2) / 2
    rel = math.sqrt(D2 / scale) if scale > 0 else math.nan
    rel_sd = math.sqrt(var) / (2 * rel * scale) if rel and scale > 0 else 0.0
    ab_t = np.sqrt(a2 * b2)
    ok = ab_t > 0
    if not ok.any():
        return {"rel": rel, "rel_sd": rel_sd, "cos": math.nan, "cos_sd": math.nan, "n": int(both.sum())}
    cos_t = (a2[ok] + b2[ok] - d2[ok]) / (2 * ab_t[ok])
    # the sketch noise of cos_t were the two independent (D_t² = A_t² + B_t²): exact norms only, so
    # the weights do not depend on the sketches being tested
    sd0_t = math.sqrt(2.0 / mod.m) * (a2[ok] + b2[ok]) / (2 * ab_t[ok])
    w = 1.0 / sd0_t ** 2
    return {"rel": rel, "rel_sd": rel_sd, "cos": float((w * cos_t).sum() / w.sum()),
            "cos_sd": float(1.0 / math.sqrt(w.sum())), "n": int(ok.sum())}


# ---- sharing -----------------------------------------------------------------------------------


def _groups(keys: list) -> list[list[int]]:
    """Indices with equal (non-empty) keys, groups of two or more."""
    by: dict = {}
    for i, k in enumerate(keys):
        if k:
            by.setdefault(k, []).append(i)
    return [g for g in by.values() if len(g) > 1]


def _duplicates(mod: _Model) -> tuple[dict[int, list[int]], dict[int, int]]:
    """``(same, rep)``: ``same[i]`` = the other revisions whose weights equal revision ``i``'s (every
    member of a group of identical revisions); ``rep[i]`` = the member that stands for ``i``'s group on
    the path of training (the latest in training order; every member but that one is a key). The
    fingerprints cannot say which member, if any, is the checkpoint its name says: all are flagged."""
    R = len(mod.revisions)
    parent = list(range(R))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    file_keys = [tuple(sorted(f.values())) for f in mod.files]
    tensor_keys = [tuple(sorted(t.items())) for t in mod.tensors]
    for g in _groups(file_keys) + _groups(tensor_keys):
        for i in g[1:]:
            parent[find(i)] = find(g[0])
    members: dict[int, list[int]] = {}
    for i in range(R):
        members.setdefault(find(i), []).append(i)
    same: dict[int, list[int]] = {}
    rep: dict[int, int] = {}
    for g in members.values():
        if len(g) > 1:
            keep = max(g)  # the group's place on the path: any member would do (identical weights)
            rep.update({i: keep for i in g if i != keep})
            same.update({i: [j for j in g if j != i] for i in g})
    return same, rep


def _shared(mod: _Model, dup: dict[int, int]) -> tuple[dict[int, dict[int, list[str]]], dict[int, set[int]]]:
    """``(evidence, shares)``: ``evidence[i][j]`` = what revision ``i`` shares with the later ``j``
    (file names, or ``"N matrices"``), for the flag; ``shares[i]`` = every revision sharing anything."""
    R = len(mod.revisions)
    root = [dup.get(i, i) for i in range(R)]
    shares: dict[int, set[int]] = {i: set() for i in range(R)}
    evidence: dict[int, dict[int, list[str]]] = {i: {} for i in range(R)}
    # files (shards)
    holders: dict[str, list[int]] = {}
    for i, f in enumerate(mod.files):
        for sha in set(f.values()):
            holders.setdefault(sha, []).append(i)
    for sha, idx in holders.items():
        for i in idx:
            shares[i].update(j for j in idx if j != i)
        last = idx[-1]  # the latest revision holding it is taken as its owner
        for i in idx[:-1]:
            if root[i] != root[last]:
                evidence[i].setdefault(last, []).extend(n for n, s in mod.files[i].items() if s == sha)
    # matrices, on the path of training (a duplicate is no step of it: its set has one place, the kept
    # member's), except a module frozen over it (:func:`_frozen`)
    path = [i for i in range(R) if i not in dup]
    group = {i: [i] + [k for k, j in dup.items() if j == i] for i in path}  # a place on the path: its names
    modules = _module_values(mod)
    for t in range(len(mod.names)):
        col = mod.sha[:, t]
        by: dict[str, list[int]] = {}
        for a, i in enumerate(path):
            if col[i] is not None:
                by.setdefault(col[i], []).append(a)
        for sha, places in by.items():
            last = places[-1]
            for a in places[:-1]:
                if _frozen(path, a, last, col, modules, _module(mod.names[t])):
                    continue
                i, j = path[a], path[last]
                for x in group[i]:
                    shares[x].update(group[j])
                for y in group[j]:
                    shares[y].update(group[i])
                evidence[i].setdefault(j, []).append(mod.names[t])
    return evidence, shares


def _module(name: str) -> str:
    """The module a tensor belongs to: its name less the last part (``layers.3.mlp.experts.5.up_proj``
    of ``layers.3.mlp.experts.5.up_proj.weight``), which holds its weight and bias together."""
    return name.rsplit(".", 1)[0]


def _module_values(mod: _Model) -> list[dict[str, tuple]]:
    """Per revision, module -> its tensors' ``(name, sha256)``, vectors (norms, biases) included."""
    out: list[dict[str, list]] = [{} for _ in mod.revisions]
    for i, tensors in enumerate(mod.tensors):
        for name, sha in sorted(tensors.items()):
            out[i].setdefault(_module(name), []).append((name, sha))
    return [{m: tuple(v) for m, v in d.items()} for d in out]


def _frozen(path: list[int], a: int, b: int, col, modules: list[dict[str, tuple]], module: str) -> bool:
    """Whether a matrix equal at places ``a`` < ``b`` of the path of training (``path``: revision indices,
    duplicates left out) is a weight not updated rather than one revision carrying another's: it holds its
    value at every place from ``a`` to ``b``, so does its whole module (every tensor of it, vectors
    included: a frozen or never-routed module stays whole, a revision mixing another's matrices into its
    own does not), and the run it lies in (from ``a`` back as far as the module stays so) is more than one
    step or starts at the path's first revision (frozen from the start). One unchanged step between a
    revision and a later one is what a copy of the later one looks like, and is not taken for a frozen
    weight."""
    value, whole = col[path[b]], modules[path[b]].get(module)

    def held(k: int) -> bool:
        return col[path[k]] == value and whole is not None and modules[path[k]].get(module) == whole

    if not all(held(k) for k in range(a, b + 1)):
        return False
    start = a
    while start > 0 and held(start - 1):
        start -= 1
    return b - start >= 2 or start == 0


def _describe_evidence(mod: _Model, i: int, j: int, items: list[str]) -> str:
    files = [x for x in items if x in mod.files[i]]
    mats = [x for x in items if x not in mod.files[i]]
    parts = []
    if files:
        parts.append(f"{', '.join(sorted(set(files)))} = {mod.revisions[j]}'s")
    if mats and not files:
        in_files = sorted({mod.tensor_file[i].get(x) or "?" for x in mats})
        parts.append(f"{len(set(mats))} of {len(mod.names)} matrices (in {', '.join(in_files)}) = "
                     f"{mod.revisions[j]}'s")
    return "; ".join(parts)


def _digest(mod: _Model, i: int) -> str | None:
    """Revision ``i``'s weights as one sha256: over its sorted ``name sha256`` tensor lines (any format,
    any sharding), else over its sorted file digests; equal for identical weights in any model."""
    lines = sorted(f"{n} {h}" for n, h in mod.tensors[i].items()) or sorted(mod.files[i].values())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest() if lines else None


# ---- the table ---------------------------------------------------------------------------------


def _descends(s: dict, z: float, cos_floor: float) -> bool:
    """A pair's descent test: the cosine beyond ``max(z * null sd, cos_floor)`` (undecidable: True)."""
    return not s["n"] or math.isnan(s["cos"]) or s["cos"] >= max(z * s["cos_sd"], cos_floor)


def _descent(mod: _Model, seq: list[int], from_first: dict, z: float, cos_floor: float,
             tries: int = CHAIN_TRIES) -> dict[int, str]:
    """Per revision of the path ``seq`` (and every duplicate, by its kept revision): ``direct`` (it passes
    the descent test against the reference), ``chain`` (it fails it, but passes against one of the
    ``tries`` latest revisions that descend, directly or by chain: drifted far from its init, step by
    step) or ``none`` (another init, or revisions too far apart to tell)."""
    out: dict[int, str] = {}
    reached: list[int] = [seq[0]]
    for i in seq[1:]:
        if _descends(from_first[i], z, cos_floor):
            out[i] = "direct"
        elif any(_descends(pair_stats(mod, j, i), z, cos_floor) for j in reversed(reached[-tries:])):
            out[i] = "chain"
        else:
            out[i] = "none"
            continue
        reached.append(i)
    return out


_INIT = re.compile(r"(step|checkpoint|ckpt|iter)[-_]?0+(?!\d)", re.IGNORECASE)


def is_init(revision: str, tokens: int | None = None) -> bool:
    """Whether a revision is a run's initialisation: 0 training tokens when its tokens are known (a
    continuation's ``step0`` carries its base's tokens and is no init), else a name at step 0
    (``step0``, ``step0-tokens0B``, ``checkpoint-0``)."""
    return tokens == 0 if tokens is not None else bool(_INIT.match(revision))


def reference_warnings(table: pl.DataFrame | None) -> list[str]:
    """One line per model whose earliest revision is not its init: ``not_descended_from_init`` compares
    with that revision and cannot see a run that is another init from its first revision on. The advice
    follows ``init_published``: add the run's step 0 where it has one (a toy), say there is none to add
    where it has none (a single checkpoint: the detour test still sees a revision from elsewhere between
    others, docs/integrity.md#power), add it *if* the run publishes one where that is not known. A
    reference whose weights are another checked model's revision (a continuation's start) is not warned
    about: its descent is checked in that model's table (:func:`across_models` says so). A declared
    continuation read without its parent (the lineage job sees one model) gets a line saying where it is
    checked."""
    if table is None or table.is_empty():
        return []
    elsewhere = same_weights(table)
    models = set(table["model"].to_list())
    out = []
    for r in table.filter(pl.col("order") == 0).iter_rows(named=True):
        if r["reference_is_init"] is not False or elsewhere.get((r["model"], r["reference"])):
            continue
        parent = r.get("continues")
        if parent and parent not in models and r["reference"] == r["revision"]:  # one model's job: say where
            out.append(f"model '{r['model']}' continues {parent}: its earliest revision, {r['reference']}, is no "
                       f"init; the report checks that it is {parent}'s last checkpoint, whose descent {parent}'s "
                       "table checks")
        else:
            published = r.get("init_published")
            advice = {True: "add the run's step 0 to its revisions",
                      False: "this run publishes no step 0 to add, so that case stays unseen (a revision from "
                             "elsewhere between two others is still seen by the detour test)",
                      None: "add the run's step 0 to its revisions if it publishes one"}[published]
            out.append(f"model '{r['model']}': the earliest revision, {r['reference']}, is not the init (step 0); "
                       "the check that each revision descends from the init compares with it, so it cannot see "
                       f"weights that are another init from it on (EleutherAI/pythia#203): {advice}")
    return out


def model_lineage(fp: pl.DataFrame, tokens: Mapping[str, int | None] | None = None, *, continues: str | None = None,
                  init_published: bool | None = None, z: float = Z, cos_floor: float = COS_FLOOR,
                  detour: float = DETOUR, fallback: float = FALLBACK) -> pl.DataFrame:
    """The ``lineage`` rows of one model from its ``fingerprint`` rows (every revision's); ``tokens``:
    revision -> training tokens (training order and the table's tokens column); ``continues``: the model
    whose last checkpoint the config declares this run starts from (a data-shift continuation), or None;
    ``init_published``: whether the run has a step 0 the panel could add (None: not known), for
    :func:`reference_warnings`."""
    if fp.is_empty():
        return EMPTY.clone()
    models = fp["model"].unique().to_list()
    if len(models) != 1:
        raise ValueError(f"model_lineage takes one model's fingerprints, got {sorted(models)}")
    model = models[0]
    tokens = dict(tokens or {})
    revs = sorted(fp["revision"].unique().to_list(), key=lambda r: training_order_key(r, tokens.get(r)))
    mod = _Model(fp, revs)
    R = len(revs)
    same, dup = _duplicates(mod)
    evidence, shares = _shared(mod, dup)
    seq = [i for i in range(R) if i not in dup]  # the path of training: one revision per set of identical ones
    ref = seq[0]
    prev_of = {}
    for i in range(R):
        earlier = [k for k in seq if k < i]
        prev_of[i] = earlier[-1] if earlier else None
    from_first = {i: pair_stats(mod, ref, i) for i in range(R)}
    from_prev = {i: pair_stats(mod, prev_of[i], i) if prev_of[i] is not None else None for i in range(R)}

    flags: dict[int, list[str]] = {i: [] for i in range(R)}
    details: dict[int, list[str]] = {i: [] for i in range(R)}
    for i, others in same.items():
        flags[i].append("duplicate_of")
        names = " and ".join(f"{revs[j]}'s" for j in others)
        details[i].append(f"every weight file or tensor = {names}: one set of weights under {len(others) + 1} names, "
                          "and the fingerprints cannot tell which name, if any, it belongs to (every one is flagged)")
    shard_with = {i: sorted(evidence[i], key=lambda j: j) for i in range(R)}
    for i in range(R):
        if shard_with[i]:
            flags[i].append("shares_shard_with")
            details[i] += [_describe_evidence(mod, i, j, evidence[i][j]) for j in shard_with[i]]
    descent = _descent(mod, seq, from_first, z, cos_floor)
    descent.update({i: descent.get(j) for i, j in dup.items()})  # a duplicate: its group's
    for i in range(R):
        if i == ref or descent.get(i) != "none":
            continue
        s = from_first[i]
        flags[i].append("not_descended_from_init")
        details[i].append(f"cosine to {revs[ref]} {s['cos']:.3f} (null sd {s['cos_sd']:.3f}): as far as independent "
                          f"inits (relative distance {s['rel']:.3f}, √2 = independent), and no chain of revisions "
                          f"from {revs[ref]} descends step by step (a link as far as independent inits: another "
                          "init, or revisions too far apart to tell)")
    detours: dict[int, float] = {}
    for a, i in enumerate(seq[1:-1], start=1):
        p, n = seq[a - 1], seq[a + 1]
        d1, d2, d13 = pair_stats(mod, p, i)["rel"], pair_stats(mod, i, n)["rel"], pair_stats(mod, p, n)["rel"]
        det = (d1 + d2) / d13 if d13 > 0 else (math.inf if d1 + d2 > 0 else 1.0)
        detours[i] = det
        if det > detour:
            flags[i].append("discontinuous")
            details[i].append(f"detour {det:.2f} > {detour:g}: {revs[p]}→{revs[i]} {d1:.3f} + {revs[i]}→{revs[n]} "
                              f"{d2:.3f} against {revs[p]}→{revs[n]} {d13:.3f}")
    best, best_i = 0.0, ref
    for i in seq[1:]:
        s = from_first[i]
        if "discontinuous" not in flags[i] and s["n"] and best > 0:
            margin = max(z * math.hypot(s["rel_sd"], from_first[best_i]["rel_sd"]), fallback * best)
            if s["rel"] < best - margin:
                flags[i].append("discontinuous")
                details[i].append(f"distance from {revs[ref]} falls back to {s['rel']:.3f} from {best:.3f} "
                                  f"({revs[best_i]})")
        if not ({"discontinuous", "not_descended_from_init"} & set(flags[i])) and s["rel"] > best:
            best, best_i = s["rel"], i

    rows = []
    for i, r in enumerate(revs):
        p = from_prev[i]
        rows.append({
            "model": model, "revision": r, "tokens": tokens.get(r), "order": i,
            "reference": revs[ref], "previous": revs[prev_of[i]] if prev_of[i] is not None else None,
            "shares": [revs[j] for j in sorted(shares[i])],
            "duplicate_of": [revs[j] for j in same.get(i, [])],
            "shares_shard_with": [revs[j] for j in shard_with[i]],
            "dist_from_first": from_first[i]["rel"], "dist_from_previous": p["rel"] if p else None,
            "cos_from_first": from_first[i]["cos"], "cos_sd": from_first[i]["cos_sd"],
            "detour": detours.get(i), "n_matrices": from_first[i]["n"],
            "descent": "reference" if i == ref else descent.get(i),
            "reference_is_init": is_init(revs[ref], tokens.get(revs[ref])),
            "weights_digest": _digest(mod, i), "continues": continues, "init_published": init_published,
            "flags": [f for f in FLAGS if f in flags[i]],
            "detail": "; ".join(details[i]) or None,
        })
    return pl.DataFrame(rows, schema=LINEAGE_COLUMNS)


def lineage(fingerprints: pl.DataFrame, tokens: Mapping[tuple[str, str], int | None] | None = None,
            continues: Mapping[str, str | None] | None = None,
            init_published: Mapping[str, bool | None] | None = None, **rules) -> pl.DataFrame:
    """The ``lineage`` table of every model in ``fingerprints`` (a concatenation of cells'
    ``fingerprint`` tables); ``tokens``: ``(model, revision) -> tokens``; ``continues``: model -> the
    model it continues (declared in the config), for :func:`across_models`; ``init_published``: model ->
    whether its run has a step 0 to add (None: not known), for :func:`reference_warnings`."""
    if fingerprints.is_empty():
        return EMPTY.clone()
    tokens, continues, init_published = tokens or {}, continues or {}, init_published or {}
    out = []
    for model in fingerprints["model"].unique(maintain_order=True).to_list():
        fp = fingerprints.filter(pl.col("model") == model)
        out.append(model_lineage(fp, {r: t for (m, r), t in tokens.items() if m == model},
                                 continues=continues.get(model), init_published=init_published.get(model),
                                 **rules))
    return pl.concat(out)


# ---- what the report and the workflow read -----------------------------------------------------


# each flag in words, as the pages say it (the flag's name is the column value docs/integrity.md documents)
FLAG_WORDS = {"duplicate_of": "the same weights as {}", "shares_shard_with": "a weight file shared with {}",
              "same_weights_as": "the same weights as {} (another model)",
              "not_descended_from_init": "not descended from the first revision's init",
              "discontinuous": "a break in the chain of revisions",
              "start_not_declared": "not the checkpoint its config says it continues from"}


def flag_labels(row: Mapping) -> list[str]:
    """A row's flags in words, as the report shows them: 'the same weights as step900 and main', 'a weight
    file shared with main', 'the same weights as toy-neox step1500 (another model)', 'not descended from
    the first revision's init', 'a break in the chain of revisions'."""
    out = []
    for f in row["flags"] or []:
        named = row.get(f) if f in ("duplicate_of", "shares_shard_with", "same_weights_as") else None
        if isinstance(named, str):
            named = [named]
        words = FLAG_WORDS.get(f, f)
        if "{}" in words:
            names = list(named or [])
            words = words.format(" and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) or "?")
        out.append(words)
    return out


def suspect_map(table: pl.DataFrame | None) -> dict[tuple[str, str], list[str]]:
    """``(model, revision) -> flag labels`` of every flagged revision of a lineage table (what the
    report marks statements resting on, after :func:`across_models`); empty for None or an empty table."""
    if table is None or table.is_empty():
        return {}
    table = across_models(table)
    return {(r["model"], r["revision"]): flag_labels(r) for r in table.iter_rows(named=True) if r["flags"]}


def flagged(table: pl.DataFrame | None) -> pl.DataFrame:
    """The flagged rows of a lineage table."""
    if table is None or table.is_empty():
        return EMPTY.clone()
    return table.filter(pl.col("flags").list.len() > 0)


def drop_flagged(df: pl.DataFrame, table: pl.DataFrame | None) -> pl.DataFrame:
    """``df`` (any table with ``model`` and ``revision``) without the rows of flagged revisions."""
    bad = flagged(table)
    if bad.is_empty() or df.is_empty():
        return df
    return df.join(bad.select("model", "revision"), on=["model", "revision"], how="anti")


def check_on_suspect(table: pl.DataFrame, on_suspect: str) -> list[str]:
    """One line per flagged revision; raises ``ValueError`` listing them when ``on_suspect`` is
    ``fail`` (``warn`` / ``drop`` return the lines for the log)."""
    if on_suspect not in ("warn", "drop", "fail"):
        raise ValueError(f"provenance.on_suspect must be warn, drop or fail, got {on_suspect!r}")
    lines = [f"model '{r['model']}' revision '{r['revision']}': {', '.join(flag_labels(r))}"
             + (f" ({r['detail']})" if r["detail"] else "") for r in flagged(table).iter_rows(named=True)]
    if lines and on_suspect == "fail":
        raise ValueError("provenance.on_suspect is 'fail' and the lineage check flagged these revisions "
                         "(docs/integrity.md: dropping or replacing a flagged revision):\n  " + "\n  ".join(lines))
    return lines
