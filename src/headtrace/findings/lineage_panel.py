"""Checkpoint lineage across the models of a panel: the same weights under two models' names.

The lineage job sees one model (:mod:`headtrace.findings.lineage`), so it cannot see that a revision
of one model is a revision of another byte for byte: a data-shift run whose first checkpoint is its
base's last (expected: the config declares it), two models that are one run, a branch that serves
another model's weights. Each lineage row carries ``weights_digest`` (sha256 over its sorted tensor
digests: equal for identical weights in any format and sharding) and ``continues`` (the model whose
last checkpoint the config declares this run starts from); this module reads the concatenated tables
of a panel, where the report meets them. Pure functions of the tables; nothing is recomputed.

* An identity the config declares (the first revision of a model that ``continues`` another, and that
  model's last checked revision) is expected and **not flagged**; the row's ``detail`` and
  :func:`declared_pairs` say the two are one checkpoint, to be counted once.
* Any other identity flags **both** revisions ``same_weights_as``: which of them, if any, is the
  checkpoint its name says cannot be told from the fingerprints.
* A continuation whose first revision is not identical to its declared parent's last checked
  revision is flagged ``start_not_declared``: nothing else ties a continuation to its parent (its
  descent is tested against its own first revision). A re-save in another dtype also differs.

The lineage job (and so ``provenance.on_suspect: fail`` and ``drop``) works per model and does not
see these flags; the findings job writes them, once, as ``lineage_panel`` (:func:`panel_table`), and the
report's banner, marks and lineage section word that table (docs/integrity.md).
"""
from __future__ import annotations

import polars as pl

from headtrace.core.tables import SCHEMAS, conform

__all__ = ["PANEL_FLAGS", "panel_table", "same_weights", "across_models", "declared_pairs"]

PANEL_FLAGS = ("same_weights_as", "start_not_declared")

Key = tuple[str, str]  # (model, revision)


def panel_table(table: pl.DataFrame | None) -> pl.DataFrame:
    """``lineage_panel``: the concatenated lineage tables of a panel with the flags across models decided
    (:func:`across_models`), what the findings job writes and the report words; empty (with its schema)
    without a table."""
    out = across_models(table)
    if out is None or out.is_empty():
        return pl.DataFrame(schema=SCHEMAS["lineage_panel"])
    return conform(out, "lineage_panel")


def same_weights(table: pl.DataFrame) -> dict[Key, list[Key]]:
    """``(model, revision) -> [(other model, its revision), ...]``: the revisions of *other* models
    with the same ``weights_digest`` (only keys that have some; empty without the column)."""
    if "weights_digest" not in table.columns:
        return {}
    by: dict[str, list[Key]] = {}
    for m, r, d in table.select("model", "revision", "weights_digest").iter_rows():
        if d:
            by.setdefault(d, []).append((m, r))
    out: dict[Key, list[Key]] = {}
    for group in by.values():
        for m, r in group:
            others = [(m2, r2) for m2, r2 in group if m2 != m]
            if others:
                out[(m, r)] = others
    return out


def across_models(table: pl.DataFrame | None) -> pl.DataFrame | None:
    """The concatenated lineage tables of a panel with the flags ``same_weights_as`` and
    ``start_not_declared`` added to ``flags`` and their evidence to ``detail`` (module docstring), and
    two columns: ``same_weights_as`` (``"model revision"`` of every revision of another model with
    identical weights) and ``declared_same`` (those of them the config declares). A table already
    annotated comes back unchanged; one without ``weights_digest`` gets empty columns."""
    if table is None or table.is_empty() or "same_weights_as" in table.columns:
        return table
    same = same_weights(table)
    first, last = _ends(table)
    cont = _continues(table)
    digest = (dict(zip(zip(table["model"], table["revision"]), table["weights_digest"]))
              if "weights_digest" in table.columns else {})

    def declared(a: Key, b: Key) -> bool:
        """``a`` is the first revision of a model continuing ``b``'s model, ``b`` that model's last (or
        the other way round)."""
        return any(cont.get(x[0]) == y[0] and x[1] == first[x[0]] and y[1] == last[y[0]]
                   for x, y in ((a, b), (b, a)))

    rows = []
    for r in table.iter_rows(named=True):
        key = (r["model"], r["revision"])
        others = same.get(key, [])
        ok = [o for o in others if declared(key, o)]
        bad = [o for o in others if o not in ok]
        flags, notes = list(r["flags"] or []), [r["detail"]] if r["detail"] else []
        for o in ok:
            child, parent = (key, o) if cont.get(key[0]) == o[0] else (o, key)
            notes.append(f"the same weights as {o[0]} {o[1]}, byte for byte, as the config declares ({child[0]} "
                         f"continues {parent[0]} from its last checkpoint): one checkpoint, not two observations")
        if bad:
            flags.append("same_weights_as")
            names = " and ".join(f"{m} {v}" for m, v in bad)
            notes.append(f"the same weights as {names}, which the config does not declare: one checkpoint under "
                         f"{len(bad) + 1} names, and the fingerprints cannot tell which, if any, is genuine")
        parent = cont.get(key[0])
        if parent in last and key[1] == first[key[0]]:
            start = (parent, last[parent])
            if digest.get(start) and digest.get(key) != digest[start]:
                flags.append("start_not_declared")
                notes.append(f"declared as continuing {parent} from its last checkpoint, {start[1]}, but its "
                             "weights are not identical to it (another checkpoint, or a re-save in another dtype)")
        rows.append({**r, "flags": flags, "detail": "; ".join(notes) or None,
                     "same_weights_as": [f"{m} {v}" for m, v in others],
                     "declared_same": [f"{m} {v}" for m, v in ok]})
    return pl.DataFrame(rows, schema={**table.schema, "same_weights_as": pl.List(pl.String),
                                      "declared_same": pl.List(pl.String)})


def declared_pairs(table: pl.DataFrame | None) -> list[str]:
    """One sentence per pair of revisions of two models that the config declares to be one checkpoint
    and that are (a continuation's first revision and its parent's last), for the report."""
    if table is None or table.is_empty():
        return []
    cont = _continues(table)
    first, last = _ends(table)
    same = same_weights(table)
    out = []
    for child, parent in sorted(cont.items()):
        if child not in first or parent not in last:
            continue
        a, b = (child, first[child]), (parent, last[parent])
        if b in same.get(a, []):
            out.append(f"{child} {a[1]} and {parent} {b[1]} are the same weights, byte for byte, as the config "
                       f"declares ({child} continues {parent} from its last checkpoint): one checkpoint, to be "
                       "counted once, not as two independent observations")
    return out


def _ends(table: pl.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    """Each model's first and last revision in training order (``order``)."""
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for m, r in table.sort("model", "order").select("model", "revision").iter_rows():
        first.setdefault(m, r)
        last[m] = r
    return first, last


def _continues(table: pl.DataFrame) -> dict[str, str]:
    if "continues" not in table.columns:
        return {}
    return {m: c for m, c in table.select("model", "continues").unique().iter_rows() if c}
