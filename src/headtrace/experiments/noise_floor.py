"""Specialized-head fraction above a noise floor (paper A), instead of a fixed 30x cut.

``null_samples`` / ``floors`` / ``noise_floor_table``: null selectivities per class from (a)
every head of the model's ``init`` revision (random init, all six classes) and (b) a
position-shuffled probe (``shuffle_batch``: each sequence's tokens before the query permuted
with a fixed seed, the class positions kept) captured at the ``shuffle_revisions``; the shuffle
breaks the content at the induction / duplicate-token keys but cannot change what a purely
positional head does, so (b) is used for the content classes only (``SHUFFLE_CLASSES``). The
floor of a class is the ``quantile`` (0.99, 'higher' interpolation) of each null's samples; the
``combined`` floor is the maximum over the nulls available for the class. Per revision and class:
``n_above`` heads with selectivity > floor; class ``any``: heads above the floor of at least one
class = the specialized-head fraction, next to the 30x classification count (``n_classified``).

**Recorded and decided here** (the pages only word these columns), on every row of
:func:`noise_floor_table`: the floors' ``quantile``, the ``class_threshold`` of the classification count,
``init_floor_median`` (the median floor of the ``init`` null over every model and class) and
``init_null_narrow``: that median below ``narrow_below`` (:data:`NARROW_FLOOR`) x, random-init heads
attending almost uniformly, so that any trained head departing from uniform attention crosses the floor
(the above-floor fraction an upper bound, the classified count a lower one); null without an ``init`` null.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from headtrace.core.classes import CLASSES, UNCLASSIFIED
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.probe import synthetic

SHUFFLE_CLASSES = ("induction", "duplicate_token")
# an init null whose median floor lies below this selectivity (x) is narrow: near-uniform random-init heads
NARROW_FLOOR = 2.0


def shuffle_batch(batch: synthetic.ProbeBatch, seed: int = 0, keep_first: bool = False) -> synthetic.ProbeBatch:
    """Position-shuffled control: each sequence's tokens before the query permuted (fixed seed);
    the query token (A), ``ab``, target and validity flags are kept, so the screen reads the same
    key positions, whose content is now random. ``keep_first`` keeps position 0 (a prepended BOS)."""
    tokens = batch.tokens.copy()
    rng = np.random.default_rng(seed)
    start = 1 if keep_first else 0
    for i in range(tokens.shape[0]):
        body = tokens[i, start:-1]
        tokens[i, start:-1] = body[rng.permutation(body.size)]
    return synthetic.ProbeBatch(tokens=tokens, ab=batch.ab.copy(), target=batch.target.copy(), valid=batch.valid.copy())


def null_samples(init_screen: pl.DataFrame | None, shuffled_sel: pl.DataFrame | None) -> pl.DataFrame:
    """Long table (model, null, class, value): ``init`` = every head x class of the init revision;
    ``shuffled`` = the content classes of the position-shuffled captures."""
    parts = []
    if init_screen is not None and init_screen.height:
        for c in CLASS_COLUMNS:
            parts.append(init_screen.select("model", pl.lit("init").alias("null"), pl.lit(c).alias("class"),
                                            pl.col(f"sel_{c}").cast(pl.Float64).alias("value")))
    if shuffled_sel is not None and shuffled_sel.height:
        for c in SHUFFLE_CLASSES:
            parts.append(shuffled_sel.select("model", pl.lit("shuffled").alias("null"), pl.lit(c).alias("class"),
                                             pl.col(f"sel_{c}").cast(pl.Float64).alias("value")))
    if not parts:
        return pl.DataFrame(schema={"model": pl.String, "null": pl.String, "class": pl.String, "value": pl.Float64})
    return pl.concat(parts).filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())


def floors(null: pl.DataFrame, quantile: float = 0.99) -> pl.DataFrame:
    """Per (model, class, null): the ``quantile`` of the null samples (the next sample up, so that with
    few samples - a toy model has 8 heads - the floor is the null's maximum, never below it) and
    n_samples; plus a ``combined`` row per (model, class) = the max over the nulls."""
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    per = (null.group_by("model", "class", "null", maintain_order=True)
           .agg(floor=pl.col("value").quantile(quantile, interpolation="higher"), n_samples=pl.len()))
    comb = (per.group_by("model", "class", maintain_order=True)
            .agg(pl.col("floor").max(), pl.col("n_samples").sum(),
                 pl.col("null").sort().str.join("+").alias("sources"))
            .with_columns(null=pl.lit("combined")))
    per = per.with_columns(sources=pl.col("null"))
    cols = ["model", "class", "null", "floor", "n_samples", "sources"]
    return pl.concat([per.select(cols), comb.select(cols)]).with_columns(
        quantile=pl.lit(float(quantile)), n_samples=pl.col("n_samples").cast(pl.Int32))


def noise_floor_table(traj: pl.DataFrame, floor_table: pl.DataFrame, class_threshold: float = 30.0,
                      null: str = "combined", quantile: float | None = None) -> pl.DataFrame:
    """Per model x revision x class (+ ``any``): heads above the class floor, and the 30x count; on
    every row what :func:`init_null_columns` records and decides (``quantile``: the floors', recorded;
    default the floor table's)."""

    fl = floor_table.filter(pl.col("null") == null)
    rows = []
    for (m, rev, tok), g in traj.group_by("model", "revision", "tokens", maintain_order=True):
        fm = {r["class"]: (r["floor"], r["sources"]) for r in fl.filter(pl.col("model") == m).iter_rows(named=True)}
        n = g.height
        above_any = np.zeros(n, bool)
        classified = g["classification"].to_list() if "classification" in g.columns else [None] * n
        for cls_name, c in zip(CLASSES, CLASS_COLUMNS):
            f, src = fm.get(c, (math.nan, None))
            sel = g[f"sel_{c}"].fill_nan(None).fill_null(-math.inf).to_numpy()
            above = sel > f if not (f is None or math.isnan(f)) else np.zeros(n, bool)
            above_any |= above
            n_cls = sum(1 for x in classified if x == cls_name)
            rows.append({"model": m, "revision": rev, "tokens": tok, "class": c, "floor": f,
                         "n_above": int(above.sum()), "fraction_above": above.sum() / n if n else math.nan,
                         "n_heads": n, "n_classified": n_cls, "fraction_classified": n_cls / n if n else math.nan,
                         "null": src})
        n_cls = sum(1 for x in classified if x is not None and x != UNCLASSIFIED)
        rows.append({"model": m, "revision": rev, "tokens": tok, "class": "any", "floor": math.nan,
                     "n_above": int(above_any.sum()), "fraction_above": above_any.sum() / n if n else math.nan,
                     "n_heads": n, "n_classified": n_cls, "fraction_classified": n_cls / n if n else math.nan,
                     "null": null})
    out = pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64, "floor": pl.Float64, "null": pl.String})
    return out.with_columns(**{k: pl.lit(v, t) for k, (v, t) in
                               init_null_columns(floor_table, class_threshold, quantile).items()})


def init_null_columns(floor_table: pl.DataFrame, class_threshold: float, quantile: float | None = None,
                      narrow_below: float = NARROW_FLOOR) -> dict[str, tuple]:
    """The panel-wide columns of :func:`noise_floor_table` (module docstring), each as (value, dtype):
    ``quantile`` (the argument, else the floor table's; null: neither), ``class_threshold``,
    ``init_floor_median`` (null: no ``init`` null), ``narrow_below`` and ``init_null_narrow``."""
    if quantile is None and floor_table.height and "quantile" in floor_table.columns:
        quantile = floor_table["quantile"][0]
    init = floor_table.filter(pl.col("null") == "init")["floor"].drop_nulls().drop_nans() if floor_table.height \
        else pl.Series([], dtype=pl.Float64)
    median = float(init.median()) if init.len() else None
    return {"quantile": (None if quantile is None else float(quantile), pl.Float64),
            "class_threshold": (float(class_threshold), pl.Float64),
            "init_floor_median": (median, pl.Float64),
            "narrow_below": (float(narrow_below), pl.Float64),
            "init_null_narrow": (None if median is None else median < narrow_below, pl.Boolean)}
