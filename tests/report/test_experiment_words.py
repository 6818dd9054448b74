"""The noise-floor paragraph of the experiments' summary words its table's columns (the floors'
``quantile``, ``class_threshold``, ``init_null_narrow``: ``experiments.noise_floor``) and decides nothing.
The tables are built as the noise_floor job builds them; the expected words are derived by hand."""
from __future__ import annotations

import polars as pl

from headtrace import experiments as E
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.report import experiment_summary as ES

NARROW = "so the init null is narrow (floors near 1×)"


def _screen(rev: str, tokens: int, induction: list[float], classification: list[str]) -> pl.DataFrame:
    """One revision of model m: one head per value (every other class 1x, or the value at init)."""
    return pl.DataFrame([{"model": "m", "revision": rev, "tokens": tokens, "layer": 0, "head": i,
                          "classification": cls, **{f"sel_{c}": (v if c == "induction" or rev == "step0" else 1.0)
                                                    for c in CLASS_COLUMNS}}
                         for i, (v, cls) in enumerate(zip(induction, classification))])


def _paragraph(init: list[float], keep_init_null: bool = True, quantile: float = 0.99, class_threshold=30.0) -> str:
    init_screen = _screen("step0", 0, init, ["unclassified"] * len(init))
    final = _screen("step9", 9, [80.0] + [1.0] * (len(init) - 1), ["induction"] + ["unclassified"] * (len(init) - 1))
    shuffled = _screen("step9", 9, [3.0] * len(init), ["unclassified"] * len(init))
    floors = E.floors(E.null_samples(init_screen, shuffled), quantile)
    if not keep_init_null:
        floors = floors.filter(pl.col("null") != "init")
    table = E.noise_floor_table(pl.concat([init_screen, final]), floors, class_threshold=class_threshold,
                                quantile=quantile)
    text = ES.summary_markdown(noise_floor=table)
    return text[text.index("**Specialized fraction"):]


def test_narrow_init_null_is_said():
    # four init heads at 1x, 1x, 1.5x, 1.5x in every class: the 0.99 floor is the null's maximum, 1.5x, < 2x
    text = _paragraph([1.0, 1.0, 1.5, 1.5])
    assert "Floor = the 99th percentile of a null of selectivities" in text
    assert NARROW in text and "the above-floor fraction is an upper bound, the 30× count a lower one." in text
    # final: head 0 at 80x is above every floor (induction's combined floor: the shuffled 3x) and classified
    assert ("`m` 25.0% of heads above the floor of some class vs 25.0% classified at ≥ 30×; induction alone "
            "25.0% above its floor (3×) vs 25.0% at ≥ 30×") in text


def test_wide_init_null_is_not_called_narrow():
    text = _paragraph([1.0, 2.0, 4.0, 5.0], quantile=0.5)  # init floors 4x (the median head, "higher"): not below 2x
    assert "Floor = the 50th percentile" in text and NARROW not in text


def test_no_init_null_is_not_called_narrow():
    """Defect fixed: with no init null at all (only the shuffled probe's) the page said the init null was
    narrow (its median floor read as 0); the table now leaves that undecided and the page says nothing."""
    text = _paragraph([1.0, 1.0, 1.5, 1.5], keep_init_null=False)
    assert NARROW not in text and "Floor = the 99th percentile" in text


def test_the_class_threshold_recorded_is_the_one_said():
    text = _paragraph([1.0, 1.0, 1.5, 1.5], class_threshold=25.0)
    assert "classified at ≥ 25×" in text and "the 25× count a lower one" in text and "30×" not in text
