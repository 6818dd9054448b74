"""report.answers: every generated sentence checked against the tables it reads (bounds, counts,
verdicts), including the NaN, censored and no-control paths; outward rounding of bounds; the
checkpoint-integrity marks; the verdict's upper-bound columns and exactness; the seed-specificity
paragraph."""
from __future__ import annotations

import math
import re

import polars as pl
import pytest
from helpers.findings_tables import as_written

from headtrace import experiments as E
from headtrace.causal import ablation
from headtrace.core import tables
from headtrace.report import answers as A
from headtrace.report import console, html
from headtrace.report import experiment_summary as ES
from headtrace.report import headline as HL
from headtrace.report.format import fmt_bound, fmt_interval, fmt_ratio, fmt_token_bound

I3, F10, F50 = "induction_3_heads", "first_token_10pct", "first_token_50pct"


# ---------------------------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("x, side, text", [
    (26.4, "hi", "27×"),     # OLMo's upper end: up, never "26×"
    (12.67, "lo", "12×"),    # Pythia's lower end: down, never "13×"
    (1.067, "lo", "1.0×"),   # toy-neox-shift's: down, never "1.1×"
    (5.13, "lo", "5.1×"), (5.1, "lo", "5.1×"),  # 5.1 is not 5.0999…: no spurious step down
    (9.96, "hi", "10×"), (0.987, "lo", "0.98×"), (201.0, "hi", "210×"), (26.0, "hi", "26×"),
    (math.inf, "hi", "∞"), (None, "lo", "?"), (math.nan, "hi", "?"),
])
def test_bounds_round_outward(x, side, text):
    assert fmt_bound(x, side) == text


def test_interval_point_and_token_bounds():
    assert fmt_interval(5.13, 26.4) == "(5.1×, 27×]"
    assert fmt_interval(12.67, None) == "(12×, ∞]"
    assert fmt_ratio(26.4) == "26×" and fmt_ratio(12.67) == "13×"  # a point value rounds to the nearest
    assert fmt_token_bound(614400, "hi") == "615K" and fmt_token_bound(614400, "lo") == "614K"
    assert fmt_token_bound(2097152, "lo") == "2.09M" and fmt_token_bound(1000, "lo") == "1K"
    with pytest.raises(ValueError):
        fmt_bound(1.0, "up")


# ---------------------------------------------------------------------------------------------- tables


def sizes(models):
    rows = [(m, r, t) for m, revs in models.items() for r, t in revs]
    return pl.DataFrame({"model": [r[0] for r in rows], "revision": [r[1] for r in rows],
                         "tokens": [r[2] for r in rows]}, schema={"model": pl.String, "revision": pl.String,
                                                                  "tokens": pl.Int64})


def milestones(rows):
    return pl.DataFrame({"model": [r[0] for r in rows], "milestone": [r[1] for r in rows],
                         "revision": [r[2] for r in rows], "tokens": [r[3] for r in rows]},
                        schema={"model": pl.String, "milestone": pl.String, "revision": pl.String,
                                "tokens": pl.Float64})


def gaps(rows):
    cols = ["model", "later", "earlier", "gap_ratio", "gap_lo", "gap_hi", "same_revision",
            "earlier_left_censored", "later_right_censored"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows],
                        schema={c: (pl.String if i < 3 else pl.Boolean if i > 5 else pl.Float64)
                                for i, c in enumerate(cols)})


def vrow(model, rev, tokens, *, circuit="final_circuit", heads=("L1H0",), verdict="causal", p=0.014,
         n_sets=70, space=70, exact=True, reason=None, effect=0.4, why_not=None):
    return {"model": model, "revision": rev, "tokens": tokens, "circuit": circuit, "n_heads": len(heads),
            "heads": list(heads), "metric": "top1", "baseline_top1": 0.6, "ablated_top1": 0.2, "effect": effect,
            "effect_lo": effect - 0.1, "effect_hi": effect + 0.1, "p_value": p if n_sets else math.nan,
            "n_distinct_draws": n_sets, "n_random": n_sets, "n_matched_sets": space, "control_exact": exact,
            "min_p": (1 / n_sets if exact else 1 / (n_sets + 1)) if n_sets else math.nan, "random_top1_mean": 0.55, "random_effect_mean": 0.05,
            "upper_bound": "upper_bound", "upper_bound_top1": 0.0, "upper_bound_share": 0.5,
            "verdict": verdict, "causal": verdict == "causal", "underpowered_reason": reason,
            "not_causal_reason": why_not}


def vtable(rows):
    return pl.DataFrame(rows, schema_overrides={"n_matched_sets": pl.Int64, "control_exact": pl.Boolean,
                                                "underpowered_reason": pl.String, "p_value": pl.Float64,
                                                "not_causal_reason": pl.String,
                                                "min_p": pl.Float64})


def toy_run():
    """toy: circuit at s2 (after s1), sink 50% at s3; its 4-head circuit causal at s2 over all 70 sets
    (p = 1/70), the final one underpowered (it fills its layer); full: a circuit already at the first
    revision; never: nothing formed, nothing ablated."""
    F = {"circuit_size": sizes({"toy": [("s1", 1000), ("s2", 2000), ("s3", 26400)],
                                "full": [("f1", 100), ("f2", 200)], "never": [("n1", 10), ("n2", 20)]}),
         "f3_milestones": milestones([("toy", I3, "s2", 2000.0), ("toy", F10, "s2", 2000.0),
                                      ("toy", F50, "s3", 26400.0), ("full", I3, "f1", 100.0),
                                      ("full", F10, "f2", 200.0), ("full", F50, "f2", 200.0),
                                      ("never", I3, None, None), ("never", F10, None, None),
                                      ("never", F50, None, None)]),
         "f3_gaps": gaps([("toy", F50, I3, 13.2, 2000 / 1875, 26.4, False, False, False),
                          ("full", F50, I3, 2.0, 1.0, None, False, True, False),
                          ("never", F50, I3, None, None, None, None, False, False)])}
    V = vtable([
        vrow("toy", "s2", 2000, circuit="circuit", heads=("L1H0", "L1H1", "L1H2", "L1H3"), p=1 / 70),
        vrow("toy", "s3", 26400, heads=("L1H0", "L1H1", "L1H2", "L1H3", "L1H4", "L1H5", "L1H6", "L1H7"),
             verdict="underpowered", p=1.0, n_sets=1, space=1, exact=True,
             reason="its reference set allows p >= 1/1 > alpha = 0.05 (all 1 sets of its layers (exact))"),
        vrow("full", "f2", 200, verdict="not_causal", p=0.4, n_sets=20, space=1820, exact=False,
             why_not="p = 0.4 > alpha = 0.05"),
        vrow("never", "n2", 20, heads=(), verdict="not_causal", n_sets=0, space=0, exact=False),
    ])
    return as_written(F), V


# ---------------------------------------------------------------------------------------------- sentences


def test_every_sentence_matches_the_tables():
    F, V = toy_run()
    run = A.build(F, V, families={"toy": "gpt_neox", "full": "olmo", "never": "gpt2"})
    formation, sink, decided, final, undecided = run.sentences
    # formation: counts of models and revisions (circuit_size), which formed (f3_milestones), the
    # earliest with its bracket rounded outward
    assert formation.startswith("This run screened 3 models over 7 revisions in all; 2 of the 3 models formed")
    assert "the earliest full by 100 tokens (f1, already at the first revision screened)" in formation
    assert "never never did" in formation
    # sink: who reached 50% (f3_milestones) and the ordered ones' lower bound from f3_gaps, rounded down
    # full's circuit predates its first revision and its sink was seen later: ordered too, the size open
    assert "came in 2 of 3 models" in sink and "in toy and full it came after" in sink and "at least 1.0×" in sink
    assert "full had the circuit at its first revision, so the gap has no upper bound" in sink
    # where the causal test decided, before the final circuit's verdicts
    assert decided.startswith("The causal test")
    assert ("toy: causal at s2 (smallest p = 1/70 ≤ 0.015: the 4-head circuit at s2, over all 70 sets of its "
            "layers (exact))") in decided
    # a not_causal verdict carries the criteria it missed (the verdict's not_causal_reason)
    assert "full: not causal at f2, as p = 0.4 > alpha = 0.05 (smallest p = 0.4" in decided
    assert "20 draws of the 1,820 sets of its layers (sampled)" in decided
    assert "it decided at no revision of never" in decided
    # every final verdict said once, the open one with its reason
    assert final == ("Ablating the final circuit at the last revision: not causal in full; no circuit to ablate in "
                     "never; underpowered, so the test cannot decide, in 1 model (toy: its reference set allows p >= "
                     "1/1 > alpha = 0.05 (all 1 sets of its layers (exact))).")
    # undecided: the empty circuit, each undecided order's reason; the open verdict is not said twice
    assert "toy: its reference set" not in undecided
    assert "never (no circuit at the final revision to ablate)" in undecided
    assert "in full" not in undecided  # its order is decided (a censored end), only the size is open
    assert "the order of sink and circuit in never (no induction circuit formed)" in undecided
    assert not run.all_decided and "Every" not in undecided
    # each statement rests on the revisions it reads
    st = run.statements
    assert ("toy", "s2") in st[2].rests_on and ("full", "f2") in st[2].rests_on
    assert set(st[3].rests_on) == {("toy", "s3"), ("full", "f2"), ("never", "n2")}


def test_headline_cells_state_the_decided_revisions_and_rounded_bounds():
    F, V = toy_run()
    rows = {r["model"]: r for r in HL.headline_rows(F, V)}
    toy = rows["toy"]
    assert toy["gap_text"] == "13×, in (1.0×, 27×]"  # 26.4 up, 1.067 down
    assert toy["decided_text"] == "causal at s2; smallest p = 0.015 at s2 (all 70 sets of its layers (exact))"
    assert toy["verdict"] == "underpowered" and toy["reason"].startswith("its reference set allows p >= 1/1")
    assert "smallest p" not in toy["short_reason"]  # never the min-p sentence for a full layer
    assert rows["never"]["decided_text"] == "nowhere" and rows["never"]["verdict_text"] == "no circuit"
    assert rows["full"]["decided_text"].startswith("not causal at f2, as p = 0.4 > alpha = 0.05; smallest p = 0.4")
    assert rows["full"]["reason"].endswith("; not causal: p = 0.4 > alpha = 0.05")
    full_row = V.filter(pl.col("model") == "full").row(0, named=True)
    assert console.verdict_line(full_row).endswith("verdict: not causal (p = 0.4 > alpha = 0.05)")
    assert rows["full"]["gap_text"] == "≥ 1.0× (circuit already at the first revision)"


def test_nothing_formed_panel_gives_consistent_sentences():
    """A 6-revision local GPT-2 run where nothing formed: no 'Every verdict … was decided' beside
    'no model gave a decided verdict'; the family as resolved."""
    revs = [(f"r{i}", 10 ** i) for i in range(6)]
    F = {"circuit_size": sizes({"gpt2": revs}),
         "f3_milestones": milestones([("gpt2", I3, None, None), ("gpt2", F10, None, None),
                                      ("gpt2", F50, None, None)]),
         "f3_gaps": gaps([("gpt2", F50, I3, None, None, None, None, False, True)])}
    F = as_written(F)
    V = vtable([vrow("gpt2", "r5", 10 ** 5, heads=(), verdict="not_causal", n_sets=0, space=0, exact=False)])
    run = A.build(F, V, families={"gpt2": "gpt2"})
    text = " ".join(run.sentences)
    assert "no model formed an induction circuit" in text and "gpt2 never did" in text
    assert "no circuit to ablate in gpt2" in text
    assert "It could not decide whether an induction circuit is causal in gpt2" in text
    assert "nor the order of sink and circuit in gpt2 (no induction circuit formed)" in text
    assert "was decided" not in text and not run.all_decided
    assert HL.headline_rows(F, V, families={"gpt2": "gpt2"})[0]["family"] == "gpt2"


def test_all_decided_only_when_every_final_verdict_and_gap_is():
    F = {"circuit_size": sizes({"m": [("a", 100), ("b", 1000), ("c", 100000)]}),
         "f3_milestones": milestones([("m", I3, "b", 1000.0), ("m", F50, "c", 100000.0)]),
         "f3_gaps": gaps([("m", F50, I3, 100.0, 10.0, 1000.0, False, False, False)])}
    F = as_written(F)
    V = vtable([vrow("m", "c", 100000, p=0.01, n_sets=99, space=4000, exact=False)])
    run = A.build(F, V)
    assert run.all_decided and run.sentences[-1] == ("Every model's final verdict and sink/circuit order in this "
                                                     "run was decided.")
    # the same run without its ablation: not decided, and said so
    run = A.build(F, None)
    assert not run.all_decided and "m (not ablated)" in run.sentences[-1]
    assert run.sentences[2] == ("The causal test (ablating the induction circuit against every head set of its "
                                "shape in its layers) ran on no revision of this run.")


def test_no_control_and_foreign_control_reasons():
    # no control at all (n_distinct_draws 0, no reason recorded: an older table)
    no_ctl = vrow("m", "c", 1, verdict="underpowered", n_sets=0, space=0, exact=False)
    assert A.underpowered_why(no_ctl) == "no reference set, nothing to compare with"
    assert console.circuit_line(no_ctl).endswith("no reference set -> underpowered: no reference set, "
                                                 "nothing to compare with (the test cannot decide here)")
    # a control of other per-layer sizes with 20 sets: its own reason, not "the smallest p 20 sets allow"
    foreign = vrow("m", "c", 1, verdict="underpowered", n_sets=20, space=1820, exact=False, p=0.048,
                   reason="control matched_random has sets of other per-layer sizes (L1: 2) than the circuit (L1: 3)")
    for text in (A.underpowered_why(foreign), console.underpowered_reason(foreign), console.verdict_line(foreign),
                 console.circuit_line(foreign)):
        assert "other per-layer sizes" in text and "smallest p" not in text
    # too few sets, reason as the verdict job writes it
    few = vrow("m", "c", 1, verdict="underpowered", n_sets=5, space=5, exact=True, p=1 / 5,
               reason="its reference set allows p >= 1/5 > alpha = 0.05 (all 5 sets of its layers (exact))")
    assert "p >= 1/5" in A.underpowered_why(few)
    # exactness unknown (the space's size not recorded): never 'all N sets'
    unknown = vrow("m", "c", 1, n_sets=20, space=None, exact=None)
    v = A.verdict_of(unknown)
    assert v.exact is None and v.control_text() == "20 draws (the reference set's size not recorded)"
    assert "all 20" not in console.verdict_line(unknown)
    # a table written before null meant 'unknown': exact true without a space size is not trusted
    assert A.verdict_of({**unknown, "control_exact": True}).exact is None


def test_nan_paths_of_the_verdict_sentences():
    nan = vrow("m", "c", 1, verdict="not_causal", p=math.nan, n_sets=20, space=20, effect=math.nan)
    nan["effect_lo"] = nan["effect_hi"] = math.nan
    v = A.verdict_of(nan)
    assert v.p is None and v.p_text() == "p undefined" and A.effect_text(v) == "nan"
    a = A.model_answers({"circuit_size": sizes({"m": [("c", 1)]})}, vtable([nan]))[0]
    assert "p undefined" in a.reason() and a.best is None


# ---------------------------------------------------------------------------------------------- flags


def test_statements_resting_on_a_flagged_revision_are_marked():
    F, V = toy_run()
    suspect = {("toy", "s2"): ["duplicate_of s1"], ("never", "n1"): ["not_descended_from_init"]}
    run = A.build(F, V, suspect=suspect)
    marked = [s for s in run.statements if s.flags]
    # s2 carries toy's circuit milestone (the lower end of its gap: the sink sentence) and its decided
    # verdict; the earliest circuit is full's, toy's final verdict rests on s3, n1 is in no statement
    assert [s.text.split(" ")[0] for s in marked] == ["A", "The"]
    assert all(f == "toy s2: duplicate_of s1" for s in marked for f in s.flags)
    assert run.flags == ("toy s2: duplicate_of s1",)
    rows = HL.headline_rows(F, V, suspect=suspect)
    sents = HL.sentences(rows)
    assert [s.endswith(HL.DAGGER) for s in sents] == [bool(s.flags) for s in run.statements]
    toy = {r["model"]: r for r in rows}["toy"]
    assert toy["circuit_text"].endswith(HL.DAGGER) and toy["decided_text"].endswith(HL.DAGGER)
    assert not toy["verdict_text"].endswith(HL.DAGGER)  # the final verdict rests on s3 only
    md = HL.markdown(rows, sents)
    assert "† Rests on a revision the checkpoint-integrity check flags: toy s2: duplicate_of s1." in md
    page = html.page(rows, sents, F, V)
    assert 'id="flags"' in page and "toy s2: duplicate_of s1" in page
    # no flags: no marks, no note
    rows = HL.headline_rows(F, V)
    assert HL.DAGGER not in HL.markdown(rows) and 'id="flags"' not in html.page(rows, HL.sentences(rows), F, V)


def test_summary_html_first_screen_says_where_the_causal_test_decided(tmp_path):
    F, V = toy_run()
    rows = html.write(F, V, tmp_path / "summary.html")
    page = (tmp_path / "summary.html").read_text()
    lede = page[page.index('id="sentences"'):page.index('id="headline"')]
    assert "toy: causal at s2" in lede and "1/70" in lede and "all 70 sets of its layers (exact)" in lede
    assert lede.index("The causal test") < lede.index("Ablating the final circuit")
    assert len(rows) == 3


def test_console_prints_the_headline_sentences(tmp_path):
    F, V = toy_run()
    (tmp_path / "findings").mkdir()
    for name, t in F.items():
        t.write_parquet(tmp_path / "findings" / f"{name}.parquet")
    for r in V.iter_rows(named=True):
        d = tmp_path / "cells" / r["model"] / r["revision"]
        d.mkdir(parents=True)
        V.filter((pl.col("model") == r["model"]) & (pl.col("revision") == r["revision"])).write_parquet(
            d / "verdict.parquet")
    traj = pl.DataFrame({"model": ["toy"] * 2, "revision": ["s2", "s3"], "tokens": [2000, 26400], "layer": [1, 1],
                         "head": [0, 0], "in_induction_circuit": [True, True], "sel_induction": [60.0, 60.0],
                         "sel_first_token": [1.0, 1.0]})
    (tmp_path / "models" / "toy").mkdir(parents=True)
    traj.write_parquet(tmp_path / "models" / "toy" / "trajectory.parquet")
    out = console.summary(tmp_path)
    run = A.build(F, V)
    flat = " ".join(out.split())
    for s in run.sentences:  # the same words as the headline
        assert " ".join(s.split()) in flat
    assert "where the causal test decided: causal at s2" in out


# ---------------------------------------------------------------------------------------------- verdict


def _table(rows, metric_rows=True):
    ci = {c: None for c in tables.SCHEMAS["ablation"] if c.endswith(("_lo", "_hi"))}
    full = [{"model": "m", "revision": "r", "tokens": 1, "draw": 0, "top5": 0.0, "ce": 0.0, "logit_b": 0.0,
             "top1_control": 0.0, "top1_context": 0.0, "n_sequences": 100, "n_matched_sets": None,
             "reference_exact": None, "method": None, **ci, **{c: None for c in ablation.PROBE_RECORD}, **r,
             "n_heads": len(r.get("heads", [])), "heads": r.get("heads", [])} for r in rows]
    return tables.conform(pl.DataFrame(full, schema_overrides={c: pl.Float64 for c in ci} | {
        "n_matched_sets": pl.Int64, "reference_exact": pl.Boolean, "method": pl.String}), "ablation")


def _rows(space):
    return [{"condition": "baseline", "top1": 0.40, "logit_b": 5.0},
            {"condition": "circuit", "top1": 0.02, "logit_b": 1.0, "heads": ["L1H0", "L1H1"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.39, "logit_b": 4.9, "n_matched_sets": space,
               "reference_exact": space == 20 if space else None, "heads": [f"L1H{i + 2}", f"L1H{i + 3}"]}
              for i in range(20)),
            {"condition": "upper_bound", "top1": 0.01, "logit_b": -3.0, "heads": ["L1H0", "L1H1", "L1H2", "L1H3"]}]


def test_verdict_upper_bound_on_the_decision_metric_and_exactness():
    c = ablation.verdict(_table(_rows(20))).row(0, named=True)
    assert c["upper_bound_value"] == pytest.approx(0.01) and c["upper_bound_effect"] == pytest.approx(0.39)
    assert c["upper_bound_share"] == pytest.approx(0.38 / 0.39) and c["upper_bound_saturates"]
    assert c["n_matched_sets"] == 20 and c["control_exact"] is True
    # logit_b: value and share on logit_b; saturation undefined (no floor), not computed on top-1
    c = ablation.verdict(_table(_rows(20)), metric="logit_b").row(0, named=True)
    assert c["upper_bound_value"] == -3.0 and c["upper_bound_effect"] == pytest.approx(8.0)
    assert c["upper_bound_share"] == pytest.approx(4.0 / 8.0) and c["upper_bound_saturates"] is None
    assert c["upper_bound_top1"] == pytest.approx(0.01)
    # the space's size not recorded: exactness unknown, never 'exact'
    c = ablation.verdict(_table(_rows(None))).row(0, named=True)
    assert c["n_matched_sets"] is None and c["control_exact"] is None and c["n_distinct_draws"] == 20
    # sampled
    c = ablation.verdict(_table(_rows(1820))).row(0, named=True)
    assert c["control_exact"] is False
    assert {"upper_bound_value", "upper_bound_effect", "upper_bound_share"} <= set(tables.SCHEMAS["verdict"])
    # no upper-bound condition: no share
    c = ablation.verdict(_table(_rows(20)[:-1])).row(0, named=True)
    assert c["upper_bound_share"] is None and math.isnan(c["upper_bound_value"])


# ---------------------------------------------------------------------------------------------- seeds


def test_cross_seed_controls_follow_exact_max():
    circuits = {"a": [(1, 0), (1, 1)], "b": [(1, 2), (1, 3)]}
    # 8 heads a layer: a 2-head circuit's reference set is C(8, 2) = 28 sets; n_random 3 draws, exact_max 30 takes all
    sampled = [c for c in E.cross_seed_conditions(circuits, 8, 3, 0) if c.name == "random:a"]
    exact = [c for c in E.cross_seed_conditions(circuits, 8, 3, 0, exact_max=30) if c.name == "random:a"]
    assert len(sampled) == 3 and len(exact) == 28 and len({c.heads for c in exact}) == 28
    conds = E.cross_seed_conditions(circuits, 8, 3, 0, exact_max=30)
    # the circuit's own set among them hurts as much as the circuit: its rank is 1 of 28
    results = [{"name": c.name, "top1": 0.5 if c.name == "baseline" else 0.2 if c.name.startswith("circuit")
                or tuple(c.heads) == tuple(circuits[c.name.split(":")[1]]) else 0.45, "n_sets": c.n_sets,
                "exact": c.exact} for c in conds]
    df = E.cross_seed_table(results, circuits, "a", {"a": 0, "b": 1})
    assert df["n_matched_sets"].to_list() == [28, 28] and df["control_exact"].to_list() == [True, True]
    assert df["p_value"].to_list() == pytest.approx([1 / 28, 1 / 28])


def _cross_seed(excess_other=math.nan, excess_own=0.3):
    """Both seeds' rows, with the whole table's call made as the cross_seed_table job makes it."""
    return E.seed_specificity(pl.DataFrame({
        "circuit_seed": [0, 1, 0, 1], "model_seed": [0, 1, 1, 0], "same_seed": [True, True, False, False],
        "model": ["s0", "s1", "s1", "s0"], "circuit": [["L1H0"], ["L1H1"], ["L1H0"], ["L1H1"]],
        "n_heads": [1, 1, 1, 1], "top1_drop": [0.4, 0.4, 0.1, 0.1],
        "top1_drop_vs_random": [excess_own, excess_own, excess_other, excess_other],
        "jaccard": [1.0, 1.0, 0.0, 0.0], "control_exact": [True, True, None, None]}))


def test_seed_specificity_without_matched_draws_is_undecidable():
    text = ES.summary_markdown(cross_seed=_cross_seed())
    assert "nan" not in text.lower()
    assert "beyond the reference set: undecidable, no reference draws" in text
    assert "Seed specificity is undecidable: no reference draws for the foreign circuits" in text
    assert "not clearly seed-specific" not in text and "hurts far less" not in text
    assert ("Reference sets: 2 exact (every set of the circuit's shape in its layers), 0 sampled, 2 without "
            "reference draws.") in text
    # with draws: decided either way, with the numbers of the table
    text = ES.summary_markdown(cross_seed=_cross_seed(excess_other=0.01))
    assert "+30.0 pp beyond the reference set" in text and "+1.0 pp beyond the reference set" in text
    assert "hurts far less than the own one" in text
    text = ES.summary_markdown(cross_seed=_cross_seed(excess_other=0.29))
    assert "not clearly seed-specific" in text


def _check_against_tables(F, V, run):
    """What each sentence states, recomputed from the tables it reads (not from the answers)."""
    formation, sink, decided, final, last = run.sentences
    cs = F["circuit_size"].unique(subset=["model", "revision"])
    assert f"screened {len(cs['model'].unique())} model" in formation
    assert f"over {cs.height} revision" in formation
    ms = F["f3_milestones"].filter(pl.col("milestone") == I3)
    k, n = ms['revision'].drop_nulls().len(), len(cs['model'].unique())
    assert "; " + ("no model formed" if k == 0 else "the model formed" if n == 1 else f"{k} of the {n} models formed") \
        in formation
    s50 = F["f3_milestones"].filter((pl.col("milestone") == F50) & pl.col("revision").is_not_null())
    n_models = len(cs['model'].unique())
    assert (f"came in {s50.height} of {n_models} models" if n_models != 1 else
            "came in the one model" if s50.height else "did not come in the one model") in sink
    d = (V.filter(pl.col("verdict").is_in(["causal", "not_causal"]) & (pl.col("n_heads") > 0)
                  & pl.col("circuit").is_in(["circuit", "final_circuit"]))
         if V is not None else pl.DataFrame())
    for (m,), g in (d.group_by("model") if d.height else []):
        best = g.sort("p_value").row(0, named=True)
        assert f"{m}: " in decided and f"{A.fmt_p(best['p_value'])}" in decided.split(f"{m}: ")[1]
        n, space = best["n_random"] or best["n_distinct_draws"], best["n_matched_sets"]
        assert (f"all {n:,} sets of its layers (exact)" if best["control_exact"] else
                f"{n} draw{'s' if n != 1 else ''} of the {space:,} sets of its layers (sampled)" if space else
                f"{n} draw") in decided
    for m in cs["model"].unique().to_list():
        if d.height == 0 or m not in d["model"].to_list():
            assert m in decided.split("decided at no revision of")[-1] or "ran on no revision" in decided
        assert m in final or m in last  # an undecided final verdict is named once, with its reason
    assert ("Every model's final verdict" in last) == run.all_decided


@pytest.mark.parametrize("case", ["toy", "nothing", "decided"])
def test_sentences_restate_the_tables(case):
    if case == "toy":
        F, V = toy_run()
    elif case == "nothing":
        F = {"circuit_size": sizes({"g": [("a", 1), ("b", 2)]}),
             "f3_milestones": milestones([("g", I3, None, None), ("g", F50, None, None)]),
             "f3_gaps": gaps([("g", F50, I3, None, None, None, None, False, True)])}
        V = vtable([vrow("g", "b", 2, heads=(), verdict="not_causal", n_sets=0, space=0, exact=False)])
    else:
        F = {"circuit_size": sizes({"m": [("a", 100), ("b", 1000), ("c", 100000)]}),
             "f3_milestones": milestones([("m", I3, "b", 1000.0), ("m", F50, "c", 100000.0)]),
             "f3_gaps": gaps([("m", F50, I3, 100.0, 10.0, 1000.0, False, False, False)])}
        V = vtable([vrow("m", "b", 1000, circuit="circuit", p=0.2, n_sets=99, space=4000, exact=False,
                         verdict="not_causal"),
                    vrow("m", "c", 100000, p=0.01, n_sets=99, space=4000, exact=False)])
    _check_against_tables(F, V, A.build(F, V))


def test_cross_seed_figure_says_undecidable_without_draws(tmp_path, monkeypatch):
    from headtrace.report import experiment_figures as EF

    texts = []

    def keep(fig, path):
        texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)
        EF.plt.close(fig)

    monkeypatch.setattr(EF, "save", keep)
    EF.plot_cross_seed(_cross_seed(), tmp_path / "cs.png")
    excess = [t for t in texts if "(" in t]  # the left panel: excess, then the raw drop in brackets
    assert len(excess) == 4 and all("nan" not in t for t in excess)
    assert sum(t.startswith("undecidable") for t in excess) == 2 and "+30.0\n(+40.0)" in excess


def test_a_gap_with_both_milestones_at_the_first_revision_has_no_bound():
    """One checkpoint (or a panel starting late): circuit and sink both first seen at the first revision.
    Nothing bounds their ratio, so the clause must not call it a lower bound."""
    both = A.Gap("first_token_50pct", "induction_3_heads", "circuit_at_first", None, None, None, ("r0",))
    assert both.why_undecided() == ("circuit and sink were both there at the first revision screened: no bound "
                                    "either way")
    assert both.text() == "circuit already at the first revision: unbounded"
    later = A.Gap("first_token_50pct", "induction_3_heads", "circuit_at_first", None, 10.0, None, ("r0", "r3"))
    assert later.why_undecided().endswith("a lower bound only") and later.text().startswith("≥ 10")
