"""The six-class attention-selectivity screen (step 2 of the recipe).

Selectivity of a head for a class = the query's mean attention mass on the class's key
position(s) / the baseline attention mass. Three baselines (config ``screen.baseline``):

- ``sampled`` (the author's code and the published files; the code default here and the
  paper-replication configs' setting): the mean attention to 50 fixed "other" positions
  (``probe.baseline_positions``), floored at 1e-8. The positions avoid the fixed class keys only:
  each sequence's own induction and duplicate keys (ab+1, ab) fall inside the sample in a share
  ``q`` of the sequences (~43% at T = 128, ~21% at T = 256, ~86% at T = 64 with ab in [20, 128)),
  so the baseline contains the answer: a head with all its mass on B reads at most ~50 / q
  (~116x at T = 128, ~235x at T = 256, ~58x at T = 64), while first-token and previous-token heads
  have no such ceiling (docs/statistics.md has the table);
- ``uniform`` (the paper's text): 1 / (number of keys the query sees), i.e. what a head that
  attends uniformly would put on any one position; ceiling T for every class;
- ``clean`` (the workflow default except the paper-replication configs): per sequence, the mean
  attention over the keys that are none of that sequence's class keys (ab, ab+1, 0, T-6..T-3,
  T-2, T-1), averaged over the sequences (the capture pass's ``attn_baseline_clean``), floored at
  1e-8. No class key is ever in it, so no class has a ceiling below 1 / floor, and the threshold
  means the same at every T: "this much more than the head gives an ordinary key".

A head's best class is the arg-max of its six selectivities (ties go to the first class in
``probe.CLASSES`` order); it is *classified* as that class when the best selectivity is at least
``class_threshold`` (30x), else ``unclassified``. The induction circuit is every head whose
induction selectivity is at least ``induction_threshold`` (50x), whatever its best class.

Sliding-window layers (Olmo 3): a class whose keys are farther from the query than the layer's
window carries no mass there by construction, so its selectivity of 0 is not evidence that the head
does not do it. The screen says so per head, from the capture pass (``WINDOW_COLUMNS``, beyond the
schema): ``attn_window`` (the layer's window, null for full attention),
``classes_out_of_window`` (classes none of whose keys the window reaches in any sequence they
average over: mass 0 by construction) and ``classes_partly_out_of_window`` (some keys out: mass
lowered by construction). An attention table captured before these columns existed gives nulls
(unknown), not empty lists. The selectivities and the classification are not changed.
"""
from __future__ import annotations

from typing import Sequence

import polars as pl

from headtrace.core.classes import CLASSES, UNCLASSIFIED
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.probe.synthetic import baseline_positions

BASELINES = ("sampled", "uniform", "clean")
# Carried from the attention table to the screen (headtrace.cell.capture.attention_table); null when
# the attention table predates them.
WINDOW_COLUMNS = {"attn_window": pl.Int32, "classes_out_of_window": pl.List(pl.String),
                  "classes_partly_out_of_window": pl.List(pl.String)}
BASELINE_FLOOR = 1e-8


def screen(
    attention: pl.DataFrame,
    *,
    baseline: str = "sampled",  # the workflow's default comes from config/schema.yaml (clean)
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
    col = f"attn_baseline_{baseline}"
    if col not in attention.columns or (attention.height and attention[col].fill_nan(None).is_null().all()):
        raise ValueError(f"screen.baseline '{baseline}' needs the attention table's {col} column "
                         "(attention tables captured before the clean baseline lack it: capture again)")
    base = pl.col(col).clip(lower_bound=BASELINE_FLOOR)
    attention = attention.with_columns([pl.lit(None, dtype).alias(c) for c, dtype in WINDOW_COLUMNS.items()
                                        if c not in attention.columns])
    # screen_baseline (beyond the schema): which baseline the selectivities use, carried into the
    # trajectory so every report can say it
    return attention.with_columns(attn_baseline=base, screen_baseline=pl.lit(baseline)).with_columns(
        [(pl.col(f"attn_{c}") / pl.col("attn_baseline")).alias(f"sel_{c}") for c in CLASS_COLUMNS]
    )


def sampled_ceiling(seq_len: int, ab_range: Sequence[int], key_offset: int = 1) -> dict[str, float]:
    """How far the ``sampled`` baseline caps a head that puts all its mass on one sequence-dependent
    key (``key_offset`` 1: induction, ab+1; 0: duplicate-token, ab), for ab uniform over
    the probe's ``ab_range`` ``[low, high)``: ``share`` = fraction of the sequences whose key
    is one of the 50 sampled positions, ``ceiling`` = the largest selectivity such a head can read
    (mass 1 over a mean baseline of share / 50; inf when share is 0). The uniform baseline's ceiling
    is T for every class; the clean baseline has none below 1 / BASELINE_FLOOR."""
    pos = baseline_positions(seq_len)
    keys = [ab + key_offset for ab in range(int(ab_range[0]), int(ab_range[1])) if ab + 1 < seq_len]
    sample = set(pos.tolist())
    share = sum(k in sample for k in keys) / len(keys)
    return {"share": share, "ceiling": (pos.size / share) if share else float("inf"), "uniform_ceiling": float(seq_len)}


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
