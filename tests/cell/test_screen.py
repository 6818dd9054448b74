import polars as pl
import pytest

from headtrace.cell import screen
from headtrace.core import tables


def attention_rows(rows):
    """Hand-built attention masses: each row a dict of class masses + baselines."""
    base = {"model": "m", "revision": "r", "tokens": 0, "n_sequences": 10, "n_valid": 10}
    out = []
    for i, r in enumerate(rows):
        row = {**base, "layer": 0, "head": i, "attn_baseline_uniform": 1 / 100, "attn_baseline_clean": 0.02}
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


def test_clean_baseline_and_its_missing_column():
    """screen.baseline 'clean' divides by attn_baseline_clean (per sequence, the mean over the keys
    of no class; computed by the capture pass, checked against eager attention in test_capture)."""
    att = attention_rows([{"attn_induction": 0.6, "attn_baseline_sampled": 0.01, "attn_baseline_clean": 0.002}])
    s = screen.screen(att, baseline="clean")
    assert s["sel_induction"][0] == pytest.approx(300.0) and s["attn_baseline"][0] == pytest.approx(0.002)
    assert s["screen_baseline"][0] == "clean"
    assert screen.screen(att, baseline="sampled")["sel_induction"][0] == pytest.approx(60.0)
    old = att.drop("attn_baseline_clean")
    with pytest.raises(ValueError, match="attn_baseline_clean"):
        screen.selectivity_table(old, baseline="clean")
    assert screen.selectivity_table(old, baseline="sampled").height == 1  # old tables still screen as before
    with pytest.raises(ValueError, match="baseline"):
        screen.selectivity_table(att, baseline="median")


def test_sampled_baseline_ceilings():
    """Issue 28: the sampled baseline's 50 positions contain each sequence's ab+1 in a share of the
    sequences, so a head with all its mass on B reads at most 50 / share: ~116x at T = 128 (the toy
    probe), ~235x at T = 256 (the paper's), ~59x at T = 64; the threshold 50x then means ~43% / ~21%
    of the mass on B. The uniform baseline's ceiling is T."""
    toy, paper, short = (screen.sampled_ceiling(128, (64, 108)), screen.sampled_ceiling(256, (20, 128)),
                         screen.sampled_ceiling(64, (20, 40)))
    assert toy["share"] == pytest.approx(0.43, abs=0.01) and toy["ceiling"] == pytest.approx(116, abs=1)
    assert paper["share"] == pytest.approx(0.21, abs=0.01) and paper["ceiling"] == pytest.approx(235, abs=1)
    assert short["ceiling"] == pytest.approx(58.8, abs=0.5) and short["uniform_ceiling"] == 64
