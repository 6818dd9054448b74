"""One rule per statement (issue 41, points 3, 5 and 6): each rule decided in one place and read by every
sentence, on hand-built tables with known answers: the earliest circuit only where brackets do not overlap,
independent runs counted once, milestones that do not persist, orders decided by censoring counted apart,
vacuous group statements, and models whose every layer is a floor layer."""
from __future__ import annotations

import polars as pl
from helpers.findings_tables import as_written

from headtrace.report import answers as A
from headtrace.report import headline as HL
from headtrace.report.group_answers import GroupAnswer

I3, F10, F50 = "induction_3_heads", "first_token_10pct", "first_token_50pct"


def sizes(models, n_circuit=None):
    rows = [(m, r, t) for m, revs in models.items() for r, t in revs]
    df = pl.DataFrame(rows, schema={"model": pl.String, "revision": pl.String, "tokens": pl.Int64}, orient="row")
    if n_circuit is not None:
        df = df.with_columns(n_induction_circuit=pl.Series([n_circuit.get((m, r), 3) for m, r, _ in rows]))
    return df


def milestones(rows):
    """(model, milestone, revision, tokens, lo_revision, lo_tokens)."""
    return pl.DataFrame(rows, schema={"model": pl.String, "milestone": pl.String, "revision": pl.String,
                                      "tokens": pl.Float64, "lo_revision": pl.String, "lo_tokens": pl.Float64},
                        orient="row")


def floor_tables(layers: dict[str, int]):
    """f1_bos_floor / f1_floor: no first-token head anywhere, each model with its number of layers."""
    rows = [(m, "r", 1, layer, 0, 4) for m, n in layers.items() for layer in range(n)]
    f1 = pl.DataFrame(rows, schema={"model": pl.String, "revision": pl.String, "tokens": pl.Int64,
                                    "layer": pl.Int32, "n_first_token": pl.Int32, "n_heads": pl.Int32}, orient="row")
    fl = pl.DataFrame([(m, "0,1", True) for m in layers],
                      schema={"model": pl.String, "floor_layers": pl.String, "floor_holds": pl.Boolean}, orient="row")
    return {"f1_bos_floor": f1, "f1_floor": fl}


def run(F, **kw):
    return A.build(F, None, **kw)


# ---- the earliest circuit: named only where its bracket ends before every other begins ----------------

def test_earliest_is_named_only_without_overlap():
    F = {"circuit_size": sizes({"a": [("a1", 100), ("a2", 200)], "b": [("b1", 300), ("b2", 600)]}),
         "f3_milestones": milestones([("a", I3, "a2", 200, "a1", 100), ("b", I3, "b2", 600, "b1", 300)])}
    assert "the earliest a after 100 and by 200 tokens (a2)" in run(F).sentences[0]


def test_brackets_that_touch_name_the_earliest():
    """(100, 200] and (200, 400]: a's circuit formed by 200 tokens, b's after 200: ordered, as
    findings.order.order_of orders them (one rule for every table and page)."""
    F = {"circuit_size": sizes({"a": [("a1", 100), ("a2", 200)], "b": [("b1", 200), ("b2", 400)]}),
         "f3_milestones": milestones([("a", I3, "a2", 200, "a1", 100), ("b", I3, "b2", 400, "b1", 200)])}
    s = run(F).sentences[0]
    assert "the earliest a after 100 and by 200 tokens (a2)" in s and "overlap" not in s


def test_overlapping_brackets_or_a_tie_name_no_earliest():
    F = {"circuit_size": sizes({"a": [("a1", 100), ("a2", 200)], "b": [("b1", 150), ("b2", 200)]}),
         "f3_milestones": milestones([("a", I3, "a2", 200, "a1", 100), ("b", I3, "b2", 200, "b1", 150)])}
    s = run(F).sentences[0]
    assert "earliest" not in s
    assert "which formed it first the checkpoint spacing does not say: the brackets of a (100, 200] and b (150, 200] overlap" in s
    # a circuit at a model's first revision may lie anywhere before it: it overlaps every earlier bracket
    F = {"circuit_size": sizes({"a": [("a1", 100), ("a2", 200)], "c": [("c1", 10 ** 6)]}),
         "f3_milestones": milestones([("a", I3, "a2", 200, "a1", 100), ("c", I3, "c1", 10 ** 6, None, None)])}
    s = run(F).sentences[0]
    assert "earliest" not in s and "c ≤ 1M (at its first revision)" in s


# ---- independent runs -------------------------------------------------------------------------------

def test_a_continued_run_is_counted_once():
    F = {"circuit_size": sizes({"base": [("s0", 0), ("s1", 100)], "base-shift": [("s0", 100), ("s1", 110)]}),
         "f3_milestones": milestones([("base", I3, "s1", 100, "s0", 0),
                                      ("base-shift", I3, "s0", 100, None, None)])}
    s = run(F, continues={"base-shift": "base"}).sentences[0]
    assert "2 models over 4 revisions in all (1 independent training run: base-shift continues base's run)" in s
    assert "; the run formed an induction circuit" in s
    assert "the earliest base after 0 and by 100 tokens" in s  # the continuation is no rival for 'earliest'


# ---- milestones that do not persist -------------------------------------------------------------------

def test_a_milestone_that_lapses_is_flagged():
    """f3_milestones.lapses, as the findings job decides it (tests/findings/test_trajectories.py: a circuit of
    0, 4, 0, 3, 3 heads lapses at r2), said on the pages."""
    revs = [("r0", 0), ("r1", 10), ("r2", 20), ("r3", 30), ("r4", 40)]
    ms = milestones([("m", I3, "r1", 10, "r0", 0)])
    F = {"circuit_size": sizes({"m": revs}), "f3_milestones": ms.with_columns(lapses=pl.Series([["r2"]]))}
    a = A.model_answers(F)[0]
    assert a.circuit.lapses == ("r2",)
    assert a.circuit.text() == "r1 (0–10]; not persistent: below it again at r2"
    assert "not persistent (below the milestone again at a later revision): m at r2" in run(F).sentences[0]
    F["f3_milestones"] = ms.with_columns(lapses=pl.Series([[]], dtype=pl.List(pl.String)))
    assert A.model_answers(F)[0].circuit.lapses == ()


# ---- the sink/circuit order: one rule, censored orders counted apart ------------------------------------

def _pair(model, circuit, sink, revs):
    return [(model, I3, *circuit), (model, F50, *sink)], {model: revs}


def test_every_order_is_counted_once_and_censoring_apart():
    rows, revs = [], {}
    for m, c, s_, r in [
        ("seen", ("r2", 200, "r1", 100), ("r4", 800, "r3", 400), [("r1", 100), ("r2", 200), ("r3", 400), ("r4", 800)]),
        ("left", ("r1", 20, None, None), ("r3", 400, "r2", 200), [("r1", 20), ("r2", 200), ("r3", 400)]),
        ("never", ("r2", 500, "r1", 300), (None, None, None, None), [("r1", 300), ("r2", 500), ("r3", 700)]),
        ("tie", ("r1", 2, None, None), ("r1", 2, None, None), [("r1", 2)]),
    ]:
        x, y = _pair(m, c, s_, r)
        rows += x
        revs.update(y)
    F = as_written({"circuit_size": sizes(revs), "f3_milestones": milestones(rows)})
    r_ = run(F)
    by = {a.model: a.gap50 for a in r_.models}
    assert {m: (g.order, g.basis) for m, g in by.items()} == {
        "seen": ("earlier first", "seen"), "left": ("earlier first", "seen"),
        "never": ("earlier first", "censoring"), "tie": ("undecided", None)}
    sink = r_.sentences[1]
    assert "in seen and left it came after the induction circuit whatever the checkpoint spacing hides" in sink
    assert "left had the circuit at its first revision, so the gap has no upper bound" in sink
    assert "in tie the spacing does not order sink and circuit" in sink
    assert "never had no such sink by the last revision, so its circuit came first only in that no sink came" in sink
    last = r_.sentences[-1]
    assert last.endswith("nor the order of sink and circuit in tie (circuit and sink were both there at the first "
                         "revision screened: no bound either way).")
    assert last.count("order of sink and circuit") == 1


# ---- models whose every layer is a floor layer ------------------------------------------------------------

def test_a_two_layer_model_has_no_sink_milestone_to_show():
    F = {"circuit_size": sizes({"two": [("r1", 10), ("r2", 20)], "four": [("r1", 10), ("r2", 20)]}),
         "f3_milestones": milestones([("two", I3, "r2", 20, "r1", 10), ("two", F50, None, None, "r2", 20),
                                      ("four", I3, "r2", 20, "r1", 10), ("four", F50, None, None, "r2", 20)]),
         **floor_tables({"two": 2, "four": 4})}
    F = as_written(F)
    r_ = run(F)
    sink = r_.sentences[1]
    assert "did not come in the one model that could form one (two left out: every layer of a 2-layer model is a floor layer of Finding 1" in sink
    assert "four had no such sink" in sink and "two had" not in sink
    rows = {r["model"]: r for r in HL.headline_rows(F, None)}
    assert rows["two"]["sink50_text"] == rows["two"]["gap_text"] == HL.FLOOR_ONLY
    assert rows["four"]["sink50_text"] == "not reached"


# ---- vacuous group statements ------------------------------------------------------------------------------

def _group(n_by_censoring, n_decided=2, vacuous=2, held=2):
    # every decided order is 'earlier first'; the sign test counts the seen ones (those not by censoring):
    # all n of n one way, exact two-sided p = 2 * 0.5 ** n (1 for one order), none seen: no test (null)
    seen = n_decided - n_by_censoring
    pair = dict(later=F50, earlier=I3, n_members=2, n_decided=n_decided, n_earlier_first=n_decided,
                n_later_first=0, n_undecided=0, n_absent=0, n_by_censoring=n_by_censoring,
                p_sign=min(1.0, 2 * 0.5 ** seen) if seen else None, n_gap=2,
                median_gap_lo=1.5, median_gap_hi=None, smallest_gap_lo=1.5, smallest_gap_hi=None,
                largest_gap_lo=1.5, largest_gap_hi=None)
    summary = dict(n_present=2, floor_n_used=2, floor_n_held=held, floor_n_vacuous=vacuous, shape_n_used=2,
                   shape_modal="no rise", shape_n_agree=2, shape_tied=False, jaccard_n_pairs=0)
    return GroupAnswer("g", (("a", 0), ("b", 1)), "gpt_neox", summary, pair, {}, I3, F50)


def test_a_sign_test_resting_on_censoring_alone_is_said_to_be_vacuous():
    g = _group(n_by_censoring=2)
    assert "only in that first-token heads on at least 50% of the heads never came" in g.order_text()
    assert g.order_text().endswith("the sign test has no observed order to count (vacuous)")
    assert "p = " not in g.order_text()
    mixed = _group(n_by_censoring=1).order_text()
    assert "in 2 of 2 seeds whose brackets order them (1 of them only because" in mixed
    assert mixed.endswith("exact two-sided binomial p = 1 against 50%, the smallest 1 seen order allow")


def test_a_floor_with_nothing_to_test_is_said_to_be_vacuous():
    assert _group(2, vacuous=2).agreement_text() == (
        "no first-token head in any layer of the 2 seeds at any revision: Finding 1's floor and Finding 2's "
        "shape had nothing to test")
    text = _group(2, vacuous=1).agreement_text()
    assert text == ("Finding 1's zero-sink floor held in 2 of 2 (1 with no first-token head anywhere: nothing "
                    "tested there); sink shape: no rise in 2 of 2")


def test_the_group_row_keeps_the_members_bracket_notation():
    g = _group(2)
    assert g.gap_text() == "range of possible median gaps > 1.5× over 2 seeds; smallest > 1.5×, largest > 1.5×"
    assert "∞" not in g.gap_text()


def test_continuations_are_read_from_the_lineage_tables():
    from headtrace.report import lineage as RL

    table = pl.DataFrame({"model": ["base", "base", "base-shift", "base-shift"], "revision": ["s0", "s1", "s0", "s1"],
                          "continues": [None, None, "base", "base"]})
    assert RL.continuations(table) == {"base-shift": "base"}
    assert RL.continuations(table.drop("continues")) == {} and RL.continuations(None) == {}
