"""The first-token statement on hand-built F1 tables: the share and the lowest layer at the last revision,
F1's floor as f1_floor says, models without a first-token head named together."""
from __future__ import annotations

import polars as pl

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
    floor = pl.DataFrame({"model": ["a", "b"], "n_revisions": [1, 1], "max_first_token": [0, 0],
                          "floor_layers": ["0,1", "0,1"], "floor_holds": [True, True]})
    F = {"f1_bos_floor": f1, "f1_floor": floor}
    assert FT.sentence([("a", FT.of(F, "a")), ("b", FT.of(F, "b"))]) == (
        "First-token heads (at or above the class threshold) at each model's last revision: a 33.3% (9 of 27) at r, "
        "from layer 2 up; b 8.3% (3 of 36) at s, from layer 3 up; where there are any, none is in layers 0–1 at "
        "any revision (Finding 1's floor).")
