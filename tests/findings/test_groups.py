"""Seed groups (issue 35): every group statistic of three toy seeds with known onsets, by hand.

Three members of 4 layers x 4 heads, revisions step1..step5 at 100, 200, 400, 800, 1600 tokens
(member C lacks step4, a revision the others have). Induction: three circuit heads (sel 100) from
the onset revision on, none before. Sink: first-token heads (sel 40) in layers 2-3, counted per
revision below (16 heads: 8 = 50%).

    member  seed  induction_3_heads   first_token_50pct    sink heads per revision   final circuit
    A       0     step2: (100, 200]   step4: (400, 800]    0 0 0 8 8                 L1H0 L1H1 L2H0
    B       1     step1: (0, 100] L   step4: (400, 800]    0 3 6 8 9 (the 9th in L1)  L1H0 L2H1 L2H2
    C       2     step3: (200, 400]   never: (1600, inf) R 0 0 4 - 5 (one in L0)     L1H0 L1H1 L2H3

(L: left-censored, R: right-censored.)
"""
from __future__ import annotations

import math

import polars as pl
import pytest
from helpers.trajectories import MEMBERS, PAIRS
from helpers.trajectories import seed_group_trajectory as _traj

from headtrace.findings import groups
from headtrace.findings.compute import all_findings


@pytest.fixture(scope="module")
def G():
    traj = _traj()
    f = all_findings(traj, gaps=PAIRS)
    return groups.group_findings("toy", {**MEMBERS, "D": 3}, f, traj, PAIRS)  # D: listed, never run


def _row(df, **key):
    r = df.filter(pl.all_horizontal([pl.col(k) == v for k, v in key.items()]))
    assert r.height == 1, (key, r)
    return r.row(0, named=True)


def test_member_brackets_are_the_members_own(G):
    mm = G["group_member_milestones"]
    got = {r["member"]: (r["onset_lo"], r["onset_hi"], r["left_censored"], r["right_censored"])
           for r in mm.filter(pl.col("milestone") == "induction_3_heads").iter_rows(named=True)}
    assert got == {"A": (100, 200, False, False), "B": (0, 100, True, False), "C": (200, 400, False, False),
                   "D": (None, None, None, None)}
    c = _row(mm, member="C", milestone="first_token_50pct")
    assert (c["onset_lo"], c["onset_hi"], c["lo_revision"], c["right_censored"]) == (1600, None, "step5", True)
    assert not _row(mm, member="D", milestone="first_token_50pct")["present"]  # carried, counted out


def test_median_onsets_are_intervals_with_range_and_censoring(G):
    ind = _row(G["group_milestones"], milestone="induction_3_heads")
    # lower ends 100, 0, 200 -> median 100; upper ends 200, 100, 400 -> median 200
    assert (ind["n_members"], ind["n_used"], ind["n_reached"]) == (4, 3, 3)
    assert (ind["median_lo"], ind["median_hi"], ind["range_lo"], ind["range_hi"]) == (100, 200, 0, 400)
    assert (ind["n_left_censored"], ind["n_right_censored"]) == (1, 0)
    sink = _row(G["group_milestones"], milestone="first_token_50pct")
    # lower ends 400, 400, 1600 -> 400; upper ends 800, 800, inf -> 800; the latest upper end is unbounded
    assert (sink["median_lo"], sink["median_hi"], sink["range_lo"], sink["range_hi"]) == (400, 800, 400, None)
    assert (sink["n_used"], sink["n_reached"], sink["n_left_censored"], sink["n_right_censored"]) == (3, 2, 0, 1)


def test_even_medians_average_the_two_middle_ends():
    st = groups.bracket_stats([100, 0, 200, 300], [200, 100, 400, None])
    # lows 0 100 200 300 -> (100 + 200) / 2; highs 100 200 400 inf -> (200 + 400) / 2
    assert (st["median_lo"], st["median_hi"]) == (150, 300)
    assert (st["min_lo"], st["min_hi"], st["max_lo"], st["max_hi"]) == (0, 100, 300, None)
    st = groups.bracket_stats([1, 2], [3, None])
    assert st["median_hi"] is None  # a middle value unbounded: the median's upper end is too


def test_the_pair_s_order_sign_test_and_gaps(G):
    mg = G["group_member_gaps"]
    assert dict(zip(mg["member"], mg["order"])) == {"A": "earlier first", "B": "earlier first",
                                                     "C": "earlier first", "D": "absent"}
    # gaps: A [400/200, 800/100] = [2, 8]; B: induction left-censored -> [400/100, -) = [4, inf);
    # C: sink never reached -> [1600/400, -) = [4, inf)
    assert [(r["gap_lo"], r["gap_hi"]) for r in mg.filter(pl.col("present")).iter_rows(named=True)] == \
        [(2, 8), (4, None), (4, None)]
    g = _row(G["group_gaps"], later="first_token_50pct", earlier="induction_3_heads")
    assert (g["n_members"], g["n_decided"], g["n_earlier_first"], g["n_later_first"], g["n_undecided"],
            g["n_absent"], g["n_gap"]) == (4, 3, 3, 0, 0, 1, 3)
    # the sign test counts the 2 orders seen (A, B), not C's, which holds only because its sink never came
    assert g["p_sign"] == pytest.approx(2 * 0.5 ** 2)
    # B's circuit predates its first revision but its sink was seen: an order seen; C's sink never came:
    # an order by censoring alone, counted apart
    assert dict(zip(mg["member"], mg["order_basis"])) == {"A": "seen", "B": "seen", "C": "censoring", "D": None}
    assert g["n_by_censoring"] == 1
    assert (g["median_gap_lo"], g["median_gap_hi"]) == (4, None)
    assert (g["smallest_gap_lo"], g["smallest_gap_hi"], g["largest_gap_lo"], g["largest_gap_hi"]) == (2, 8, 4, None)


def test_binomial_p_exact():
    assert groups.binomial_p(2, 2) == 0.5  # the smallest two-sided p two seeds can give
    assert groups.binomial_p(10, 10) == pytest.approx(2 / 1024)
    assert groups.binomial_p(6, 6) == pytest.approx(2 / 64)
    assert groups.binomial_p(7, 10) == pytest.approx(2 * (1 + 10 + 45 + 120) / 1024)  # 0.34375
    assert groups.binomial_p(5, 10) == 1.0 and math.isnan(groups.binomial_p(0, 0))


def test_f1_f2_f4_per_member_and_agreement(G):
    mem = G["group_members"]
    assert dict(zip(mem["member"], mem["shape"])) == {"A": "sharp transition", "B": "gradual ramp",
                                                      "C": "sharp transition", "D": None}
    assert dict(zip(mem["member"], mem["floor_holds"])) == {"A": True, "B": False, "C": False, "D": None}
    assert dict(zip(mem["member"], mem["n_revisions"])) == {"A": 5, "B": 5, "C": 4, "D": None}
    s = G["group_summary"].row(0, named=True)
    assert (s["n_members"], s["n_present"], s["floor_n_used"], s["floor_n_held"]) == (4, 3, 3, 1)
    assert (s["shape_modal"], s["shape_n_agree"], s["shape_n_used"], s["shape_tied"]) == ("sharp transition", 2, 3, False)
    rec = G["group_recall"].filter(pl.col("level_label") == "100%")
    assert dict(zip(rec["member"], rec["revision"])) == {"A": "step2", "B": "step1", "C": "step3", "D": None}
    lv = _row(G["group_recall_levels"], level_label="100%")
    # shares of the final tokens: 200/1600, 100/1600, 400/1600
    assert (lv["n_used"], lv["n_reached"], lv["share_median"], lv["share_min"], lv["share_max"]) == \
        (3, 3, 0.125, 0.0625, 0.25)


def test_circuit_identity_jaccard_and_recurrence(G):
    mem = G["group_members"]
    assert _row(mem, member="A")["circuit"] == ["L1H0", "L1H1", "L2H0"]
    assert _row(mem, member="C")["final_revision"] == "step5"
    jac = {(r["member_a"], r["member_b"]): r["jaccard"] for r in G["group_jaccard"].iter_rows(named=True)}
    # A-B share L1H0 of 5 heads; A-C share L1H0, L1H1 of 4; B-C share L1H0 of 5
    assert jac == {("A", "B"): pytest.approx(0.2), ("A", "C"): pytest.approx(0.5), ("B", "C"): pytest.approx(0.2)}
    s = G["group_summary"].row(0, named=True)
    assert (s["jaccard_n_pairs"], s["jaccard_median"], s["jaccard_min"], s["jaccard_max"]) == (3, 0.2, 0.2, 0.5)
    # distinct heads: L1H0 L1H1 L2H0 L2H1 L2H2 L2H3; recurring: L1H0 (3 seeds), L1H1 (2)
    assert (s["n_distinct_heads"], s["n_recurring_heads"], s["recurring_share"]) == (6, 2, pytest.approx(1 / 3))
    # 2 + 1 + 2 heads of a 4-head L1 must share at least ceil((5 - 4) / 2) = 1; 1 + 2 + 1 of L2 need not
    assert s["n_recurring_forced"] == 1
    # the within-layer null, by hand (4 heads a layer). A-B: 2 and 1 heads in L1, 1 and 2 in L2; each layer's
    # overlap is 1 with probability 1/2, so K = 0, 1, 2 with 1/4, 1/2, 1/4 and J = K / (6 - K):
    # chance 1/2 * 1/5 + 1/4 * 1/2 = 0.225, P(K >= 1) = 3/4 (B-C alike). A-C: 2 and 2 in L1 (K1 = 0, 1, 2
    # with 1/6, 4/6, 1/6), 1 and 1 in L2 (K2 = 1 with 1/4): P(K >= 2) = 1/6 + 4/6 * 1/4 = 1/3,
    # chance = 13/24 * 1/5 + 7/24 * 1/2 + 1/24 * 1.
    null = {(r["member_a"], r["member_b"]): (r["jaccard_chance"], r["p_value"], r["beyond_chance"])
            for r in G["group_jaccard"].iter_rows(named=True)}
    assert null[("A", "B")] == (pytest.approx(0.225), pytest.approx(0.75), False)
    assert null[("B", "C")] == (pytest.approx(0.225), pytest.approx(0.75), False)
    assert null[("A", "C")] == (pytest.approx(13 / 120 + 7 / 48 + 1 / 24), pytest.approx(1 / 3), False)
    assert (s["jaccard_chance_median"], s["jaccard_n_beyond_chance"]) == (pytest.approx(0.225), 0)


def test_members_of_other_geometry_fail_the_group_job():
    traj = _traj()
    wide = traj.filter(pl.col("model") == "A").with_columns(model=pl.lit("E"), head=pl.col("head") + 4)
    traj = pl.concat([traj, traj.filter(pl.col("model") == "A").with_columns(model=pl.lit("E")), wide])
    with pytest.raises(ValueError, match=r"groups\.toy\.members\.E: 4 layers x 8 heads, but A has 4 x 4"):
        groups.check_geometry(traj, ["A", "E"], "toy")


# ---- the report: a row per group before its members', its sentence, its section -----------------

def test_headline_puts_the_group_row_before_its_members_and_words_it_once(G):
    from headtrace.report import answers as A
    from headtrace.report import headline as HL
    from headtrace.report import html

    traj = _traj()
    f = all_findings(traj, gaps=PAIRS)
    g, = A.group_answers({"toy": G})
    assert g.order_text() == ("an induction circuit of at least 3 heads before first-token heads on at least 50% of "
                              "the heads in 3 of 3 seeds whose brackets order them (1 of them only because "
                              "first-token heads on at least 50% of the heads never came) "
                              "(1 without findings); exact two-sided binomial p = 0.5 against 50%, the smallest "
                              "2 seen orders allow")
    # the members' notation: a gap bounded below only is "> 4.0×", a median bracket the range of possible medians
    assert g.gap_text() == ("range of possible median gaps > 4.0× over 3 seeds; smallest [2.0×, 8.0×], "
                            "largest > 4.0×")
    assert g.circuit_text() == ("Jaccard median 0.20 over 3 pairs; no more than chance (0.23 by placement within "
                                "the layers alone); 2 of 6 circuit heads recur in more than one seed (the circuits' sizes in "
                                "their layers force at least 1)")
    assert g.onset_text("induction_3_heads") == ("range of possible medians [100, 200] (3 of 4 seeds; 1 already at "
                                                 "the first revision)")
    rows = HL.headline_rows(f, None, groups=[g])
    assert [r["model"] for r in rows] == ["toy (seeds 0, 1, 2, 3)", "A", "B", "C"]
    sents = HL.sentences(rows)
    assert sents[-1] == g.statement().text and "in 3 of 3 seeds" in sents[-1]
    md = HL.markdown(rows, sents)
    assert md.index("**toy (seeds 0, 1, 2, 3)**") < md.index("| A |")
    page = html.page(rows, sents, f, group_tables={"toy": G})
    assert page.index('<tr class="group" data-group="toy">') < page.index('<tr data-model="A">')
    assert '<a href="#group-toy">' in page and '<section id="group-toy">' in page  # one click away
    section = page[page.index('<section id="group-toy">'):]
    section = section[:section.index("</section>")]
    assert section.count('<figure class="overlay">') == 4 and section.count("<polyline") == 4 * 3  # 3 members each


def test_console_reads_the_group_tables(G, tmp_path):
    from headtrace.core import tables
    from headtrace.report import console

    traj = _traj()
    f = all_findings(traj, gaps=PAIRS)
    for m in MEMBERS:
        tables.write(traj.filter(pl.col("model") == m), tmp_path / "models" / m / "trajectory.parquet")
    for name, df in f.items():
        tables.write(df, tmp_path / "findings" / f"{name}.parquet")
    for name, df in G.items():
        tables.write(df, tmp_path / "groups" / "toy" / f"{name}.parquet")
    out = console.summary(tmp_path)
    assert ("group toy (4 seeds): an induction circuit of at least 3 heads before first-token heads on at least 50% "
            "of the heads in 3 of 3 seeds") in out.replace("\n  ", " ")
    assert "Across the 4 seeds of toy" in out.replace("\n  ", " ")
