"""The method experiments' calls are columns of their tables, decided in experiments/ and only worded by
report.experiment_summary: seed specificity (``experiments.seeds.seed_specificity``) and the noise floor's
recorded quantile and class threshold and the init null's narrowness (``experiments.noise_floor``).
Known answers on hand-built tables."""
from __future__ import annotations

import math

import polars as pl
import pytest
from helpers import cross_seed

from headtrace import experiments as E
from headtrace.core import tables
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.experiments.noise_floor import NARROW_FLOOR, init_null_columns
from headtrace.experiments.seeds import SPECIFICITY, SPECIFICITY_FACTOR


def _pairs(own=0.3, other=0.1, jaccard=0.0, n_heads=1, own_other_nan=(False, False)):
    """Two seeds' rows: own excess ``own`` (NaN: no reference draws), foreign ``other``, cross Jaccard."""
    own_x, other_x = (math.nan if own_other_nan[0] else own), (math.nan if own_other_nan[1] else other)
    return pl.DataFrame({
        "circuit_seed": [0, 1, 0, 1], "model_seed": [0, 1, 1, 0], "same_seed": [True, True, False, False],
        "n_heads": [n_heads] * 4, "top1_drop_vs_random": [own_x, own_x, other_x, other_x],
        "jaccard": [1.0, 1.0, jaccard, jaccard]})


def _call(df, **kw) -> str:
    out = E.seed_specificity(df, **kw)
    assert out["seed_specificity"].n_unique() == 1  # the whole table's call, on every row
    return out["seed_specificity"][0]


def test_seed_specificity_known_answers():
    assert SPECIFICITY_FACTOR == 0.5
    assert _call(_pairs(own=0.3, other=0.1)) == "specific"  # 0.1 < 0.5 x 0.3
    assert _call(_pairs(own=0.3, other=0.2)) == "not_specific"  # 0.2 >= 0.15
    assert _call(_pairs(own=0.3, other=0.15)) == "not_specific"  # at the factor: not "far less"
    assert _call(_pairs(own=0.3, other=0.2), factor=0.75) == "specific"  # 0.2 < 0.225
    assert _call(_pairs(own=0.3, other=0.0, jaccard=1.0)) == "not_specific"  # the same heads in every seed
    assert _call(_pairs(own=0.3, other=0.0, jaccard=math.nan)) == "not_specific"  # no Jaccard to show they differ
    assert _call(_pairs(own_other_nan=(False, True))) == "undecidable"  # no draws for the foreign circuits
    assert _call(_pairs(own_other_nan=(True, False))) == "undecidable"
    assert _call(_pairs(n_heads=0, own_other_nan=(True, True))) == "no_circuit"  # before undecidable
    out = E.seed_specificity(_pairs(), factor=0.4)
    assert out["specificity_factor"].to_list() == [0.4] * 4 and set(out["seed_specificity"]) <= set(SPECIFICITY)
    assert E.seed_specificity(_pairs().clear())["seed_specificity"].to_list() == []


def test_cross_seed_table_with_its_call_conforms():
    frames = []
    for part in cross_seed.per_model().values():
        tables.conform(part, "cross_seed_model")
        with pytest.raises(ValueError, match="seed_specificity"):  # one model's rows carry no call
            tables.conform(part, "cross_seed_ablation")
        frames.append(part)
    whole = tables.conform(E.seed_specificity(pl.concat(frames)), "cross_seed_ablation")
    # own circuit: drop 0.4, every reference draw 0.05: excess 0.35; foreign: drop 0.05, excess 0 < 0.5 x 0.35,
    # and the circuits differ (Jaccard 0)
    assert whole["top1_drop_vs_random"].to_list() == pytest.approx([0.35, 0.0, 0.0, 0.35])
    assert whole["seed_specificity"].unique().to_list() == ["specific"]


def _floors(init: list[float] | None, shuffled: list[float] | None = None, quantile: float = 0.99) -> pl.DataFrame:
    """A floor table: one init floor per class given (model m), shuffled floors for the content classes."""
    rows = [{"model": "m", "class": c, "null": "init", "floor": f} for c, f in zip(CLASS_COLUMNS, init or [])]
    rows += [{"model": "m", "class": c, "null": "shuffled", "floor": f}
             for c, f in zip(("induction", "duplicate_token"), shuffled or [])]
    df = pl.DataFrame(rows, schema={"model": pl.String, "class": pl.String, "null": pl.String, "floor": pl.Float64})
    return df.with_columns(quantile=pl.lit(quantile), n_samples=pl.lit(8, pl.Int32), sources=pl.col("null"))


def test_init_null_narrowness_known_answers():
    assert NARROW_FLOOR == 2.0
    c = init_null_columns(_floors([1.0, 1.2, 1.5, 3.0, 9.0]), 30.0)
    assert c["init_floor_median"][0] == 1.5 and c["init_null_narrow"][0] is True
    c = init_null_columns(_floors([1.0, 2.0, 3.0]), 30.0)
    assert c["init_floor_median"][0] == 2.0 and c["init_null_narrow"][0] is False  # at 2x: not below it
    c = init_null_columns(_floors([2.5, 3.0], shuffled=[1.0, 1.0]), 30.0)  # the shuffled null does not count
    assert c["init_floor_median"][0] == 2.75 and c["init_null_narrow"][0] is False
    assert init_null_columns(_floors([2.5, 3.0]), 30.0, narrow_below=3.0)["init_null_narrow"][0] is True
    c = init_null_columns(_floors(None, shuffled=[1.0, 1.0]), 30.0)  # no init null: nothing to decide
    assert c["init_floor_median"][0] is None and c["init_null_narrow"][0] is None
    # recorded: the floors' quantile (the argument first) and the classification's threshold
    assert init_null_columns(_floors([1.0], quantile=0.95), 25.0)["quantile"][0] == 0.95
    assert init_null_columns(_floors([1.0], quantile=0.95), 25.0, quantile=0.9)["quantile"][0] == 0.9
    assert init_null_columns(_floors([1.0]).clear(), 30.0)["quantile"][0] is None
    assert init_null_columns(_floors([1.0]), 25.0)["class_threshold"][0] == 25.0


def test_noise_floor_table_carries_the_columns():
    rows = [{"model": "m", "revision": r, "tokens": t, "layer": i // 2, "head": i % 2, "classification": "unclassified",
             **{f"sel_{c}": float(v) for c in CLASS_COLUMNS}} for r, t, v in (("step0", 0, 1), ("step0", 0, 1.5))
            for i in range(2)]
    traj = pl.DataFrame(rows).unique(subset=["revision", "layer", "head"], keep="first", maintain_order=True)
    fl = E.floors(E.null_samples(traj, None), quantile=0.99)  # every init floor 1x
    nf = tables.conform(E.noise_floor_table(traj, fl, class_threshold=30.0), "noise_floor")
    assert nf.select("quantile", "class_threshold", "init_floor_median", "narrow_below", "init_null_narrow").unique() \
        .rows() == [(0.99, 30.0, 1.0, 2.0, True)]
    nf = E.noise_floor_table(traj, fl.filter(pl.col("null") != "init"), class_threshold=30.0, quantile=0.9)
    assert nf["quantile"].unique().to_list() == [0.9] and nf["init_null_narrow"].is_null().all()
