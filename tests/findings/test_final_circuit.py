"""Finding 4's final circuit and its strict recall are findings tables (``f4_final_circuit``,
``f4_recall_milestones_strict``), computed once by the findings job (``findings.compute.all_findings``);
summary.md and the F5 figure only word and draw them. Known answers on a hand-built trajectory
(``helpers.trajectories.FINAL_CIRCUIT_PLAN``)."""
from __future__ import annotations

import polars as pl
import pytest

from headtrace.core.tables import conform
from headtrace.findings.compute import all_findings
from helpers.trajectories import final_circuit_trajectory


@pytest.fixture(scope="module")
def F():
    return all_findings(final_circuit_trajectory(), class_threshold=30.0, induction_threshold=50.0)


def test_final_circuit_table(F):
    fin = F["f4_final_circuit"]
    conform(fin, "f4_final_circuit")
    assert fin.select("model", "layer", "head", "revision", "tokens").rows() == [
        ("m", 0, 0, "s2", 1000), ("m", 0, 1, "s2", 1000), ("m", 1, 0, "s2", 1000)]
    assert fin["sel_induction"].to_list() == [60.0, 80.0, 55.0]
    assert fin["induction_threshold"].unique().to_list() == [50.0]
    assert "none" not in fin["model"].to_list()  # no head at the final revision: no row
    # the circuit threshold moves it: at 56x L1H0 (55x) is out
    tighter = all_findings(final_circuit_trajectory(), induction_threshold=56.0)["f4_final_circuit"]
    assert tighter.select("layer", "head").rows() == [(0, 0), (0, 1)] and tighter["induction_threshold"][0] == 56.0


def test_strict_recall_milestones(F):
    def first(table, model):
        return dict(table.filter(pl.col("model") == model).select("level_label", "revision").iter_rows())
    # at the class threshold: 67% at s1 (2 of 3); strictly at the circuit threshold: 33% at s1, 67% only at s2
    assert first(F["f4_recall_milestones"], "m") == {"33%": "s1", "67%": "s1", "100%": "s2"}
    assert first(F["f4_recall_milestones_strict"], "m") == {"33%": "s1", "67%": "s2", "100%": "s2"}
    assert first(F["f4_recall_milestones_strict"], "none") == {"33%": None, "67%": None, "100%": None}
    assert F["f4_recall_milestones_strict"].filter(pl.col("model") == "m")["token_share"].to_list() == \
        pytest.approx([0.1, 1.0, 1.0])
    conform(F["f4_recall_milestones_strict"], "f4_recall_milestones_strict")
