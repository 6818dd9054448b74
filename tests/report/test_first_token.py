"""The first-token statement on hand-built F1 tables: the share and the lowest layer at the last revision,
F1's floor as f1_floor says, models without a first-token head named together."""
from __future__ import annotations

import polars as pl
import pytest

from headtrace.report import first_token as FT


def _f1(model: str, tokens: int, revision: str, per_layer: list[int], heads: int = 9) -> list[dict]:
    return [{"model": model, "revision": revision, "tokens": tokens, "layer": l, "n_first_token": n,
             "n_heads": heads, "n_first_token_best_class": n} for l, n in enumerate(per_layer)]


def test_share_lowest_layer_and_floor_at_the_last_revision():
    f1 = pl.DataFrame(_f1("real", 10, "early", [0, 0, 0, 1]) + _f1("real", 20, "late", [0, 0, 5, 9])
                      + _f1("toy", 5, "step5", [0, 0, 0, 0], heads=4))
    floor = pl.DataFrame({"model": ["real", "toy"], "n_revisions": [2, 1], "max_first_token": [0, 0],
                          "floor_layers": ["0,1", "0,1"], "floor_holds": [True, True]})
    F = {"f1_bos_floor": f1, "f1_floor": floor}
    real = FT.of(F, "real")
    assert (real.revision, real.n_first, real.n_heads, real.lowest_layer) == ("late", 14, 36, 2)
    assert real.text() == "38.9% (14 of 36) at late, from layer 2 up; none in layers 0–1 at any revision"
    toy = FT.of(F, "toy")
    assert toy.n_first == 0 and toy.lowest_layer is None and toy.text() == "none at step5"
    assert FT.sentence([("real", real), ("toy", toy)]) == (
        "First-token heads (at or above the class threshold) at each model's last revision: real 38.9% (14 of 36) "
        "at late, from layer 2 up; none in layers 0–1 at any revision; none in toy.")
    assert FT.of(F, "absent") is None and FT.of({}, "real") is None and FT.sentence([]) is None


def test_a_floor_that_does_not_hold_is_said():
    f1 = pl.DataFrame(_f1("m", 1, "r", [1, 0, 3]))
    floor = pl.DataFrame({"model": ["m"], "n_revisions": [1], "max_first_token": [1], "floor_layers": ["0,1"],
                          "floor_holds": [False]})
    assert FT.of({"f1_bos_floor": f1, "f1_floor": floor}, "m").text() == (
        "14.8% (4 of 27) at r, from layer 0 up; some in layers 0–1")


def test_a_floor_every_model_keeps_is_said_once():
    f1 = pl.DataFrame(_f1("a", 1, "r", [0, 0, 9]) + _f1("b", 1, "s", [0, 0, 0, 3]))
    floor = pl.DataFrame({"model": ["a", "b"], "n_revisions": [3, 3], "max_first_token": [0, 0],
                          "floor_layers": ["0,1", "0,1"], "floor_holds": [True, True]})
    F = {"f1_bos_floor": f1, "f1_floor": floor}
    assert FT.sentence([("a", FT.of(F, "a")), ("b", FT.of(F, "b"))]) == (
        "First-token heads (at or above the class threshold) at each model's last revision: a 33.3% (9 of 27) at r, "
        "from layer 2 up; b 8.3% (3 of 36) at s, from layer 3 up; where there are any, none is in layers 0–1 at "
        "any revision (Finding 1's floor).")


# ---- issue 49, point 2: first-token heads by ratio alone, and the heads with mass on key 0 -----------------

def _screen_rows(heads, model="m", revision="r", tokens=100):
    """A screen table: heads = [(layer, head, sel_first_token, attn_first_token)], every other class at 1x."""
    from headtrace.core.tables import CLASS_COLUMNS, conform
    from headtrace.panel import reference as R
    rows = []
    for layer, head, sel, attn in heads:
        r = dict(model=model, revision=revision, tokens=tokens, layer=layer, head=head)
        r.update({f"sel_{c}": 1.0 for c in CLASS_COLUMNS})
        r.update({f"attn_{c}": 0.01 for c in CLASS_COLUMNS})
        r["sel_first_token"], r["attn_first_token"], r["attn_baseline"] = sel, attn, 0.01
        rows.append(r)
    df = R.classify_table(pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64}), class_threshold=30.0,
                          induction_threshold=50.0)
    return conform(df, "screen")


def test_the_key0_count_stands_beside_the_ratio_count():
    """F1 keeps the paper's count (sel_first_token >= 30x); beside it, the first-token heads that also put at
    least 0.3 of their attention on key 0. A previous-token-like head with 0.54% on key 0 at 54x counts as a
    first-token head (the paper's definition) but not as one with mass on key 0."""
    from headtrace.findings import trajectory as T
    screen = _screen_rows([(0, 0, 1.74, 0.02), (0, 1, 1.0, 0.5),          # layer 0: none by ratio (0.5 at 1x)
                           (2, 0, 54.0, 0.0054), (2, 1, 80.0, 0.64),      # layer 2: two by ratio, one by mass
                           (3, 0, 40.0, 0.30), (3, 1, 35.0, 0.2999)])     # the edge: >= 0.3 counts
    traj = T.assemble([screen], [])
    assert "attn_first_token" in traj.columns  # carried from the screen
    f1 = T.f1_bos_floor(traj)
    by = {r["layer"]: r for r in f1.iter_rows(named=True)}
    assert (by[0]["n_first_token"], by[0]["n_first_token_key0"]) == (0, 0)
    assert (by[2]["n_first_token"], by[2]["n_first_token_key0"]) == (2, 1)
    assert (by[3]["n_first_token"], by[3]["n_first_token_key0"]) == (2, 1)
    assert by[2]["key0_mass"] == 0.3 and by[0]["max_sel_first_token"] == pytest.approx(1.74)
    assert T.f1_bos_floor(traj, key0_mass=0.6).filter(pl.col("layer") == 2)["n_first_token_key0"][0] == 1
    assert T.f1_bos_floor(traj, key0_mass=0.005).filter(pl.col("layer") == 2)["n_first_token_key0"][0] == 2
    f2 = T.f2_bos_fraction(traj)
    assert (f2["n_first_token"][0], f2["n_first_token_key0"][0]) == (4, 2)
    floor = T.f1_floor_holds(f1)
    assert floor["floor_holds"][0] and floor["max_sel_first_token"][0] == pytest.approx(1.74)
    ft = FT.of({"f1_bos_floor": f1, "f1_floor": floor}, "m")
    assert ft.n_first == 4 and ft.n_key0 == 2
    assert "66.7% (4 of 6; 2 of them with at least 0.3 of their attention on key 0) at r" in ft.text()


def test_no_recorded_mass_means_no_key0_count():
    """A screen without attention masses (the published panel's) gives a null key0 count, not 0: the
    trajectory does not carry an all-null column, and the report leaves the clause out."""
    from headtrace.findings import trajectory as T
    screen = _screen_rows([(0, 0, 1.0, None), (2, 0, 54.0, None)])
    traj = T.assemble([screen], [])
    assert "attn_first_token" not in traj.columns
    f1 = T.f1_bos_floor(traj)
    assert f1["n_first_token_key0"].is_null().all()
    assert T.f2_bos_fraction(traj)["n_first_token_key0"].is_null().all()
    ft = FT.of({"f1_bos_floor": f1, "f1_floor": T.f1_floor_holds(f1)}, "m")
    assert ft.n_key0 is None and "key 0" not in ft.text()
    # one layer with a mass, another without: the model's count is unknown (null), not a partial sum
    mixed = T.assemble([_screen_rows([(2, 0, 54.0, 0.6), (3, 0, 40.0, None)])], [])
    assert T.f2_bos_fraction(mixed)["n_first_token_key0"].is_null().all()


def test_the_floor_of_one_checkpoint_is_said_as_what_it_is():
    """A model screened at one revision: F1's floor is said at that checkpoint, on one synthetic probe,
    with the largest first-token selectivity of its floor layers; a trajectory keeps 'at any revision'."""
    f1 = pl.DataFrame(_f1("one", 10, "instruct-q4_1", [0, 0, 5, 9]))
    floor = pl.DataFrame({"model": ["one"], "n_revisions": [1], "max_first_token": [0], "floor_layers": ["0,1"],
                          "floor_holds": [True], "max_sel_first_token": [1.7437]})
    ft = FT.of({"f1_bos_floor": f1, "f1_floor": floor}, "one")
    assert ft.one_checkpoint
    assert ft.text() == ("38.9% (14 of 36) at instruct-q4_1, from layer 2 up; none in layers 0–1 at this one "
                         "checkpoint (instruct-q4_1), on one synthetic probe (largest first-token selectivity "
                         "there 1.74×)")
    many = FT.of({"f1_bos_floor": f1, "f1_floor": floor.with_columns(n_revisions=pl.lit(10))}, "one")
    assert many.text().endswith("none in layers 0–1 at any revision")
    # a one-checkpoint model never shares the run's 'at any revision' clause
    f1b = pl.DataFrame(_f1("traj", 10, "s9", [0, 0, 3]))
    fb = pl.DataFrame({"model": ["traj"], "n_revisions": [9], "max_first_token": [0], "floor_layers": ["0,1"],
                       "floor_holds": [True], "max_sel_first_token": [2.0]})
    s = FT.sentence([("one", ft), ("traj", FT.of({"f1_bos_floor": f1b, "f1_floor": fb}, "traj"))])
    assert "at this one checkpoint (instruct-q4_1), on one synthetic probe" in s and "none in layers 0–1 at any revision" in s
    assert "where there are any" not in s


def test_summary_prints_the_key0_count_beside_each_count():
    """summary.md's F1 per-layer table and F2 fraction table carry the key-0 count in brackets."""
    from headtrace.findings import trajectory as T
    from headtrace.report import summary
    screen = _screen_rows([(0, 0, 1.74, 0.02), (0, 1, 1.0, 0.5), (2, 0, 54.0, 0.0054), (2, 1, 80.0, 0.64)])
    traj = T.assemble([screen], [])
    f1 = T.f1_bos_floor(traj)
    F = {"f1_bos_floor": f1, "f1_floor": T.f1_floor_holds(f1), "f2_bos_fraction": T.f2_bos_fraction(traj),
         "f2_shape": T.f2_shape(T.f2_bos_fraction(traj))}
    f1_text = summary._f1_section(F, traj, 30.0)
    assert "| r | 100 | 0/2 [0] | 2/2 [1] |" in f1_text and "1.74×" in f1_text and "(one checkpoint)" in f1_text
    assert "| 100 | 50.0% (50.0%) [25.0%] |" in summary._f2_section(F, traj, 30.0, 0.5)
