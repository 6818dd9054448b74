"""findings.measures: the field's measures over training, their onsets and the comparisons, on hand-built tables."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from headtrace.core import tables
from headtrace.findings import measures as fm
from headtrace.findings import trajectory as tr

REVS = [("step0", 0), ("step1", 100), ("step2", 200), ("step3", 400)]


# Per-sequence text alphas (5 sequences) of a head whose mean alpha is 0.1, 0.5 or 0.9: the 0.1 head is a
# sink at eps 0.3 on one sequence of five (0.5 > 0.3), the 0.5 head on all five, the 0.9 head on all five.
SEQ = {0.1: [0.5, 0.0, 0.0, 0.0, 0.0], 0.5: [0.5] * 5, 0.9: [0.9] * 5}


# Copying of each head (positive share, Elhage ratio): (1, 0) copies, (1, 1) does not, the layer-0 heads sit at
# exactly 0.5 (the threshold is strict: they do not copy).
COPY = {(0, 0): (0.5, 0.0), (0, 1): (0.5, 0.0), (1, 0): (0.8, 0.6), (1, 1): (0.3, -0.2)}


def _cells() -> pl.DataFrame:
    """2 layers x 2 heads; text sink alphas rise over training; head (1, 0) becomes prefix-matching at step2."""
    rows = []
    text_alpha = {0: [0.1, 0.1, 0.1, 0.1], 1: [0.1, 0.5, 0.1, 0.1], 2: [0.5, 0.5, 0.5, 0.1], 3: [0.9, 0.9, 0.9, 0.9]}
    for i, (rev, tok) in enumerate(REVS):
        for k, (layer, head) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
            prefix = 0.9 if (layer, head) == (1, 0) and i >= 2 else 0.05 * k
            rows.append(dict(model="m", revision=rev, tokens=tok, layer=layer, head=head, probe="repeated",
                             sink_alpha=0.2, sink_alpha_per_sequence=[0.2] * 5, prefix_matching=prefix,
                             copying=COPY[(layer, head)][0], copying_eigenvalue_ratio=COPY[(layer, head)][1],
                             n_sequences=5, seq_len=64))
            rows.append(dict(model="m", revision=rev, tokens=tok, layer=layer, head=head, probe="text",
                             sink_alpha=text_alpha[i][k],
                             sink_alpha_per_sequence=SEQ[text_alpha[i][k]], prefix_matching=None,
                             copying=COPY[(layer, head)][0], copying_eigenvalue_ratio=COPY[(layer, head)][1],
                             n_sequences=5, seq_len=64))
    return tables.conform(pl.DataFrame(rows), "measures")


def _traj() -> pl.DataFrame:
    """First-token heads 0, 1, 2, 4 of 4; induction circuit {(1, 0)} from step2, {(1, 0), (1, 1)} at step3."""
    rows = []
    for i, (rev, tok) in enumerate(REVS):
        for k, (layer, head) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
            first = 100.0 if k < [0, 1, 2, 4][i] else 1.0
            ind = 100.0 if ((layer, head) == (1, 0) and i >= 2) or ((layer, head) == (1, 1) and i == 3) else 1.0
            rows.append(dict(model="m", revision=rev, tokens=tok, layer=layer, head=head, sel_first_token=first,
                             sel_induction=ind))
    return pl.DataFrame(rows).with_columns(
        *(pl.lit(1.0).alias(c) for c in ("sel_previous_token", "sel_duplicate_token", "sel_self", "sel_local")),
        pr=pl.lit(1.0), best_class=pl.when(pl.col("sel_first_token") > 30).then(pl.lit("first-token"))
        .otherwise(pl.lit("unclassified")), best_selectivity=pl.lit(1.0))


def test_over_training_counts_and_jaccard():
    over = fm.over_training(_cells(), _traj(), sink_eps=(0.3, 0.6))
    tables.conform(over, "measures_over_training")
    o = over.filter(pl.col("eps") == 0.3)
    # the published reading, by hand: a 0.1 head is a sink on 1 of 5 sequences, a 0.5 or 0.9 head on 5 of 5;
    # step1 = (1/5 + 1 + 1/5 + 1/5) / 4 = 0.4, step2 = (1 + 1 + 1 + 1/5) / 4 = 0.8
    assert o["text_sink_rate"].to_list() == pytest.approx([0.2, 0.4, 0.8, 1.0])
    assert over.filter(pl.col("eps") == 0.6)["text_sink_rate"].to_list() == [0.0, 0.0, 0.0, 1.0]
    # the other reading thresholds the heads' mean alpha (0.1 is no sink): step1 = 1/4, step2 = 3/4
    assert o["text_sink_rate_of_mean_alpha"].to_list() == [0.0, 0.25, 0.75, 1.0]
    assert over.filter(pl.col("eps") == 0.6)["text_sink_rate_of_mean_alpha"].to_list() == [0.0, 0.0, 0.0, 1.0]
    assert o["repeated_sink_rate"].to_list() == [0.0] * 4 and o["repeated_sink_rate_of_mean_alpha"].to_list() == [0.0] * 4
    low = fm.over_training(_cells(), _traj(), sink_eps=(0.1,))  # every repeated-probe alpha is 0.2 > 0.1
    assert low["repeated_sink_rate"].to_list() == [1.0] * 4 and low["repeated_sink_rate_of_mean_alpha"].to_list() == [1.0] * 4
    assert o["n_prefix_heads"].to_list() == [0, 0, 1, 1]  # 0.9 > 0.4; the others 0.05 k <= 0.15
    assert o["first_token_fraction"].to_list() == [0.0, 0.25, 0.5, 1.0]
    assert o["n_induction_circuit"].to_list() == [0, 0, 1, 2]
    # step2: circuit {(1,0)} vs top-1 prefix {(1,0)}: 1; step3: circuit {(1,0),(1,1)} vs top-2 {(1,0),(1,1)}
    # ((1,1) has 0.15, the highest after 0.9): 1
    assert o["jaccard_circuit_prefix"].to_list() == [None, None, 1.0, 1.0]
    # within-layer null (2 heads a layer): step2 one head of layer 1 each, the same with probability 1/2;
    # step3 both fill layer 1, so their Jaccard of 1 is forced
    assert o["jaccard_chance"].to_list() == [None, None, 0.5, 1.0]
    assert o["jaccard_p_value"].to_list() == [None, None, 0.5, 1.0]


def test_onsets_have_brackets_like_f3():
    ons = fm.onsets(fm.over_training(_cells(), _traj()))
    row = ons.filter(pl.col("milestone") == "text_sink_50pct").row(0, named=True)
    assert (row["revision"], row["lo_revision"], row["left_censored"], row["right_censored"]) == \
        ("step2", "step1", False, False)
    row = ons.filter(pl.col("milestone") == "prefix_2_heads").row(0, named=True)
    assert row["revision"] is None and row["right_censored"] and row["lo_revision"] == "step3"


def test_rank_correlation_interval_and_exact_permutation_p():
    rc = fm.rank_correlation([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
    assert rc["value"] == pytest.approx(1.0)
    assert rc["p_value"] == pytest.approx(2 / 120)  # exact: only the identity and... the reversal reach |rho| = 1
    assert rc["lo"] - 1e-12 <= rc["value"] <= rc["hi"] + 1e-12
    assert fm.spearman([1, 1, 1], [1, 2, 3]) is None
    assert fm.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


def test_comparison_states_numbers_with_their_uncertainty():
    over = fm.over_training(_cells(), _traj())
    f3 = tr.f3_milestones(_traj())
    cmp = fm.comparison(over, fm.onsets(over), f3)
    tables.conform(cmp, "measures_comparison")
    rho = cmp.filter(pl.col("measure") == "spearman_first_token_fraction_text_sink_rate").row(0, named=True)
    assert rho["value"] == pytest.approx(1.0) and rho["n"] == 4 and "bootstrap" in rho["uncertainty"]
    gap = cmp.filter(pl.col("measure") == "onset_gap_text_sink_50pct_over_first_token_50pct").row(0, named=True)
    # both reached at step2, bracketed by step1: the ratio lies in (100 / 200, 200 / 100)
    assert gap["value"] == pytest.approx(1.0) and (gap["lo"], gap["hi"]) == (0.5, 2.0)
    jac = cmp.filter(pl.col("measure") == "jaccard_circuit_top_prefix_final").row(0, named=True)
    assert jac["value"] == 1.0 and jac["n"] == 2 and jac["p_value"] == 1.0
    assert "chance 1.00: no more than chance" in jac["uncertainty"]
    assert np.isfinite(cmp["value"].drop_nulls().to_numpy()).all()


def test_headline_gains_the_text_sink_rate_and_its_onset(tmp_path):
    from headtrace.report import answers, headline, measure_figures

    over = fm.over_training(_cells(), _traj())
    F = {"measures_over_training": over, "measures_onsets": fm.onsets(over)}
    run = answers.build(F, models=["m"])
    (a,) = run.models
    assert a.text_sink.rate == 1.0 and a.text_sink.revision == "step3"
    assert (a.text_sink.onset.revision, a.text_sink.onset.lo_revision) == ("step2", "step1")
    said = [s for s in run.sentences if "text probe" in s]
    assert said == ["On the text probe (5 sequences of 64 tokens), the share of heads that are sinks (Gu et al.'s "
                    "sink rate: mean attention to the first token above 0.3, per sequence) was: m 100.0% at step3 (repeated-random probe: 0.0%), half the heads after 100 "
                    "and by 200 tokens (step2)."]  # beside it the repeated-random probe's rate, for comparison
    rows = headline.headline_rows(F, models=["m"])
    assert rows[0]["text_sink_text"].startswith("100.0% at step3 (ε = 0.3); half the heads: step2")
    assert "sink rate on text" in headline.markdown(rows)
    # without a text probe: no sentence, a dash in the table
    none = answers.build({}, models=["m"])
    assert not any("text probe" in s for s in none.sentences) and none.models[0].text_sink is None
    measure_figures.plot_sink(over, tmp_path / "sink.png")
    measure_figures.plot_prefix(over, tmp_path / "prefix.png")
    measure_figures.plot_sink(over.clear(), tmp_path / "empty.png")
    assert all((tmp_path / f).stat().st_size > 1000 for f in ("sink.png", "prefix.png", "empty.png"))


def test_circuit_copying_counts_prefix_matching_and_copying_of_the_circuit_heads():
    out = tables.conform(fm.circuit_copying(_cells(), _traj()), "measures_circuit_copying")
    # circuits (induction selectivity >= 50, the trajectory having no in_induction_circuit): none at step0/1,
    # {(1, 0)} at step2, {(1, 0), (1, 1)} at step3
    assert out.select("revision", "layer", "head").rows() == [("step2", 1, 0), ("step3", 1, 0), ("step3", 1, 1)]
    h10, h11 = out.row(1, named=True), out.row(2, named=True)
    assert (h10["prefix_matching"], h10["copying"], h10["copying_eigenvalue_ratio"]) == (0.9, 0.8, 0.6)
    assert h10["prefix_matches"] and h10["copies"] and h10["both"]
    # (1, 1): prefix 0.15 <= 0.4 and share 0.3 <= 0.5: neither
    assert not (h11["prefix_matches"] or h11["copies"] or h11["both"])
    assert out["n_circuit"].to_list() == [1, 2, 2] and out["n_both"].to_list() == [1, 1, 1]
    # for scale, every head of the cell: prefix-matching only (1, 0) (0.0, 0.05, 0.9, 0.15); copying only
    # (1, 0): the layer-0 heads' 0.5 is not above the strict 0.5
    assert out["n_heads"].to_list() == [4, 4, 4] and out["n_heads_prefix"].to_list() == [1, 1, 1]
    assert out["n_heads_copying"].to_list() == [1, 1, 1]
    assert out["prefix_threshold"].unique().to_list() == [0.4] and out["copying_threshold"].unique().to_list() == [0.5]
    # thresholds move the booleans: at a copying threshold of 0.25, (1, 1) copies too
    lax = fm.circuit_copying(_cells(), _traj(), copying_threshold=0.25, prefix_threshold=0.1)
    assert lax.filter(pl.col("revision") == "step3")["n_both"].to_list() == [2, 2]


def test_circuit_copying_reads_the_screens_circuit_and_old_cells():
    traj = _traj().with_columns(in_induction_circuit=(pl.col("layer") == 0) & (pl.col("head") == 1))
    old = _cells().drop("copying_eigenvalue_ratio")  # a cell written before the ratio was stored
    out = fm.circuit_copying(old, traj)
    # the screen's own column wins over the selectivity rule: (0, 1) at every revision, which misses both
    assert out.select("revision", "layer", "head").rows() == [(r, 0, 1) for r, _ in REVS]
    assert out["copying_eigenvalue_ratio"].null_count() == 4 and out["n_both"].to_list() == [0] * 4
    assert fm.circuit_copying(old.clear(), traj).height == 0
    # without the repeated-random probe, no head prefix-matches (no score), copying still counts
    text_only = fm.circuit_copying(_cells().filter(pl.col("probe") == "text"), _traj())
    assert text_only["prefix_matching"].null_count() == 3 and not text_only["prefix_matches"].any()
    assert text_only["copies"].to_list() == [True, True, False]
