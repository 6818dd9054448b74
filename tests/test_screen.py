import polars as pl
import pytest

from headtrace.cell import screen
from headtrace.core import tables


def attention_rows(rows):
    """Hand-built attention masses: each row a dict of class masses + baselines."""
    base = {"model": "m", "revision": "r", "tokens": 0, "n_sequences": 10, "n_valid": 10}
    out = []
    for i, r in enumerate(rows):
        row = {**base, "layer": 0, "head": i, "attn_baseline_uniform": 1 / 100}
        row.update({f"attn_{c}": 0.001 for c in tables.CLASS_COLUMNS})
        row.update(r)
        out.append(row)
    return tables.conform(pl.DataFrame(out), "attention")


def test_selectivity_and_classes():
    att = attention_rows([
        {"attn_induction": 0.6, "attn_baseline_sampled": 0.01},  # 60x induction
        {"attn_first_token": 0.9, "attn_induction": 0.45, "attn_baseline_sampled": 0.01},  # BOS 90x, ind 45x
        {"attn_previous_token": 0.2, "attn_baseline_sampled": 0.01},  # 20x -> unclassified
        {"attn_self": 0.5, "attn_induction": 0.0, "attn_baseline_sampled": 0.0},  # zero baseline -> floored at 1e-8
    ])
    s = screen.screen(att, baseline="sampled")
    tables.conform(s, "screen")
    assert s["sel_induction"][0] == pytest.approx(60)
    assert s["best_class"].to_list() == ["induction", "first-token", "previous-token", "self"]
    assert s["classification"].to_list() == ["induction", "first-token", "unclassified", "self"]
    assert s["in_induction_circuit"].to_list() == [True, False, False, False]
    assert s["sel_self"][3] == pytest.approx(0.5 / 1e-8)
    assert screen.circuit_heads(s) == [(0, 0)]


def test_uniform_baseline_uses_one_over_keys():
    att = attention_rows([{"attn_induction": 0.6, "attn_baseline_sampled": 0.2}])
    s = screen.screen(att, baseline="uniform")
    assert s["sel_induction"][0] == pytest.approx(60)
    assert s["attn_baseline"][0] == pytest.approx(0.01)


def test_ties_go_to_the_first_class_in_order():
    att = attention_rows([{"attn_induction": 0.5, "attn_duplicate_token": 0.5, "attn_baseline_sampled": 0.01}])
    assert screen.screen(att)["best_class"][0] == "induction"


def test_thresholds_are_configurable_and_checked():
    att = attention_rows([{"attn_induction": 0.4, "attn_baseline_sampled": 0.01}])  # 40x
    assert screen.screen(att, class_threshold=50)["classification"][0] == "unclassified"
    assert screen.screen(att, induction_threshold=40)["in_induction_circuit"][0]
    with pytest.raises(ValueError, match="baseline"):
        screen.screen(att, baseline="median")


def test_nan_selectivity_is_unknown_not_large():
    # No valid sequence -> induction mass NaN; it must not enter the circuit (polars orders NaN high).
    att = attention_rows([{"attn_induction": float("nan"), "attn_self": 0.5, "attn_baseline_sampled": 0.01}])
    s = screen.screen(att)
    assert s["sel_induction"][0] is None
    assert not s["in_induction_circuit"][0] and s["best_class"][0] == "self"
