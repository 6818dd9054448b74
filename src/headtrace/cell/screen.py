"""The six-class attention-selectivity screen (step 2 of the recipe).

Selectivity of a head for a class = the query's mean attention mass on the class's key
position(s) / the baseline attention mass. Two baselines (config ``screen.baseline``):

- ``sampled`` (default, the author's code and the published files): the mean attention to 50
  fixed "other" positions (``probe.baseline_positions``), floored at 1e-8;
- ``uniform`` (the paper's text): 1 / (number of keys the query sees), i.e. what a head that
  attends uniformly would put on any one position.

A head's best class is the arg-max of its six selectivities (ties go to the first class in
``probe.CLASSES`` order); it is *classified* as that class when the best selectivity is at least
``class_threshold`` (30x), else ``unclassified``. The induction circuit is every head whose
induction selectivity is at least ``induction_threshold`` (50x), whatever its best class.
"""
from __future__ import annotations

import polars as pl

from headtrace.core.probe import CLASSES, UNCLASSIFIED
from headtrace.core.tables import CLASS_COLUMNS

BASELINES = ("sampled", "uniform")
BASELINE_FLOOR = 1e-8


def screen(
    attention: pl.DataFrame,
    *,
    baseline: str = "sampled",
    class_threshold: float = 30.0,
    induction_threshold: float = 50.0,
) -> pl.DataFrame:
    """Attention masses (schema ``attention``) -> the screen table (schema ``screen``)."""
    return classify_table(
        selectivity_table(attention, baseline=baseline),
        class_threshold=class_threshold,
        induction_threshold=induction_threshold,
    )


def selectivity_table(attention: pl.DataFrame, *, baseline: str = "sampled") -> pl.DataFrame:
    """Add ``attn_baseline`` and one ``sel_<class>`` column per class to an attention table."""
    if baseline not in BASELINES:
        raise ValueError(f"screen.baseline must be one of {BASELINES}, got '{baseline}'")
    base = pl.col(f"attn_baseline_{baseline}").clip(lower_bound=BASELINE_FLOOR)
    return attention.with_columns(attn_baseline=base).with_columns(
        [(pl.col(f"attn_{c}") / pl.col("attn_baseline")).alias(f"sel_{c}") for c in CLASS_COLUMNS]
    )


def classify_table(df: pl.DataFrame, *, class_threshold: float = 30.0, induction_threshold: float = 50.0) -> pl.DataFrame:
    """Add best_class, best_selectivity, classification and in_induction_circuit to a table that
    has the six ``sel_<class>`` columns (pipeline screens and published screens alike)."""
    if class_threshold <= 0 or induction_threshold <= 0:
        raise ValueError("screen thresholds must be positive")
    # A NaN selectivity (no valid sequence, an fp16 overflow) is unknown, not large: polars
    # orders NaN above every number, so make it null before any comparison.
    df = df.with_columns([pl.col(f"sel_{c}").fill_nan(None) for c in CLASS_COLUMNS])
    sel = [pl.col(f"sel_{c}") for c in CLASS_COLUMNS]
    best = pl.max_horizontal(sel)
    # First class (in CLASSES order) whose selectivity equals the maximum: ties -> earlier class.
    best_class = pl.when(sel[0] == best).then(pl.lit(CLASSES[0]))
    for name, col in zip(CLASSES[1:], sel[1:]):
        best_class = best_class.when(col == best).then(pl.lit(name))
    best_class = best_class.otherwise(pl.lit(None, pl.String))
    return df.with_columns(best_class=best_class, best_selectivity=best).with_columns(
        classification=pl.when(pl.col("best_selectivity") >= class_threshold)
        .then(pl.col("best_class"))
        .otherwise(pl.lit(UNCLASSIFIED)),
        in_induction_circuit=(pl.col("sel_induction") >= induction_threshold).fill_null(False),
    )


def circuit_heads(screen_df: pl.DataFrame) -> list[tuple[int, int]]:
    """(layer, head) of the induction circuit, sorted."""
    rows = screen_df.filter(pl.col("in_induction_circuit")).select("layer", "head").sort("layer", "head")
    return [tuple(r) for r in rows.iter_rows()]
