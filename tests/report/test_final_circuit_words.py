"""summary.md's Findings 4 and 5 word the findings job's final circuit (``f4_final_circuit``) and strict
recall (``f4_recall_milestones_strict``) and recompute neither: the expected words are derived by hand
from ``helpers.trajectories.FINAL_CIRCUIT_PLAN``."""
from __future__ import annotations

import polars as pl
import pytest

from headtrace.findings.compute import all_findings
from headtrace.report import figures, summary
from helpers.trajectories import RENDER_SETTINGS, final_circuit_trajectory


@pytest.fixture(scope="module")
def md():
    return summary.render(final_circuit_trajectory(), all_findings(final_circuit_trajectory()), **RENDER_SETTINGS)


def test_f4_words_the_tables(md):
    f4 = md[md.index("## Finding 4"):md.index("## Finding 5")]
    lenient = f4[f4.index("*found at the class threshold*"):f4.index("*strict")]
    strict = f4[f4.index("*strict: found at the circuit threshold*"):]
    for part in (lenient, strict):
        assert "m (3-head circuit: L0H0, L0H1, L1H0)" in part and "L1H1" not in part
        assert "none (no final circuit: nothing to recall)" in part
    assert "| s1 (100) | s1 (100) | s2 (1K) | 10.0% |" in lenient
    assert "| s1 (100) | s2 (1K) | s2 (1K) | 100.0% |" in strict


def test_f4_reads_the_strict_table_it_is_handed(md):
    """The strict table is read, not rebuilt: a table saying otherwise is what the page says."""
    F = all_findings(final_circuit_trajectory())
    F["f4_recall_milestones_strict"] = F["f4_recall_milestones_strict"].with_columns(
        revision=pl.when(pl.col("model") == "m").then(pl.lit("s0")).otherwise(pl.col("revision")), tokens=pl.lit(0))
    other = summary.render(final_circuit_trajectory(), F, **RENDER_SETTINGS)
    assert "| s0 (0) | s0 (0) | s0 (0) |" in other and other != md


def test_f5_example_is_the_final_circuits_most_selective_head(md):
    f5 = md[md.index("## Finding 5"):]
    assert "Example, m L0H1 (final induction selectivity 80×)" in f5 and "Example, none" not in f5


def test_head_trajectories_draw_the_final_circuit_table(tmp_path, monkeypatch):
    drawn = []
    real = figures._ordered
    monkeypatch.setattr(figures, "_ordered", lambda df: drawn.append(df) or real(df))
    F = all_findings(final_circuit_trajectory())
    figures.plot_head_trajectories(final_circuit_trajectory(), tmp_path / "f5.png",
                                   RENDER_SETTINGS["induction_threshold"], F["f5_pr_lead"],
                                   final=F["f4_final_circuit"].filter(pl.col("layer") == 0))
    assert drawn[0].select("model", "layer", "head").unique().sort("layer", "head").rows() == [("m", 0, 0), ("m", 0, 1)]
    assert (tmp_path / "f5.png").stat().st_size > 1000
