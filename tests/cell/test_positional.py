"""positional: the share of a head's induction mass from one A position, on hand-built masses with
known answers, and through the capture's files on a tiny random model."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from tiny import tiny_model

from headtrace.cell import capture
from headtrace.cell import positional as P
from headtrace.core import tables
from headtrace.models import families
from headtrace.probe import synthetic
from headtrace.report import positional as report_positional


def _masses(ab, per_head):
    """(N, 1, H, 7) class masses: the induction channel of head h is ``per_head[h](ab)``."""
    n = len(ab)
    m = np.zeros((n, 1, len(per_head), 7), np.float32)
    for h, f in enumerate(per_head):
        m[:, 0, h, 0] = f(np.asarray(ab))
    return m


AB = np.repeat([10, 11, 12, 13], 3)  # 12 sequences, 4 A positions, 3 each
CONTENT = lambda ab: np.full(ab.shape, 0.5)  # noqa: E731  (the same mass wherever the pair sits)
OFFSET = lambda ab: (ab == 12).astype(float)  # noqa: E731  (a head fixed on the key of ab = 12)
IDLE = lambda ab: np.zeros(ab.shape)  # noqa: E731


def test_peak_share_known_answers():
    share, peak = P.peak_share(_masses(AB, [CONTENT, OFFSET, IDLE])[..., 0], AB, np.ones(12, bool))
    np.testing.assert_allclose(share[0, :2], [0.25, 1.0])
    assert np.isnan(share[0, 2]) and peak[0].tolist() == [10, 12, -1]  # ties: the first A position
    assert P.uniform_peak_share(AB, np.ones(12, bool)) == 0.25


def test_invalid_sequences_do_not_count():
    valid = np.ones(12, bool)
    valid[6:9] = False  # every sequence at ab = 12
    m = _masses(AB, [OFFSET, CONTENT])[..., 0]
    share, peak = P.peak_share(m, AB, valid)
    assert np.isnan(share[0, 0]) and peak[0, 0] == -1  # its only mass sat on invalid sequences
    assert share[0, 1] == pytest.approx(1 / 3) and P.uniform_peak_share(AB, valid) == pytest.approx(1 / 3)
    assert np.isnan(P.uniform_peak_share(AB, np.zeros(12, bool)))


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="must agree"):
        P.peak_share(np.zeros((12, 1, 2)), AB[:5], np.ones(12, bool))
    with pytest.raises(ValueError, match="do not match"):
        P.cell_table(np.zeros((5, 1, 2, 7)), np.ones(12, bool), AB, "m", "r", 0)


def test_cell_table_flags_the_offset_head_only():
    t = P.cell_table(_masses(AB, [CONTENT, OFFSET, IDLE]), np.ones(12, bool), AB, "m", "step1", 7)
    assert t.columns[: len(tables.SCHEMAS["positional"])] == list(tables.SCHEMAS["positional"])
    assert t["positional_induction"].to_list() == [False, True, False]  # idle head: unknown, not flagged
    assert t["induction_peak_share"].to_list()[2] is None and t["induction_peak_ab"].to_list() == [10, 12, -1]
    assert (t["n_ab"] == 4).all() and (t["uniform_peak_share"] == 0.25).all() and (t["tokens"] == 7).all()
    # a majority from one position is the cut: 0.5 exactly is not positional
    half = lambda ab: np.where(ab == 12, 0.75, 0.25)  # noqa: E731  2.25 of 4.5 at ab = 12
    assert not P.cell_table(_masses(AB, [half]), np.ones(12, bool), AB, "m", "r", 0)["positional_induction"][0]


def test_run_cell_reads_the_capture_files(tmp_path):
    """The workflow's path: a real capture pass's class-mass file + the probe table; a class-mass
    file from another probe is refused."""
    model = tiny_model("olmo", vocab_size=128, n_heads=4)
    batch = synthetic.make_batch(24, 64, (10, 100), 1, (4, 20))
    res = capture.run(model, families.get("olmo"), batch, batch_size=8, device="cpu", keep_head_outputs=False,
                      progress=False)
    capture.save_class_masses(res, tmp_path / "m.safetensors")
    tables.write(synthetic.batch_table(batch), tmp_path / "probe.parquet", schema="probe")
    t = P.run_cell(tmp_path / "m.safetensors", tmp_path / "probe.parquet", "tiny", "r", None)
    direct = P.cell_table(res.sequence_masses, res.valid, batch.ab, "tiny", "r", None)
    assert t.equals(direct) and t.height == 2 * 4
    other = synthetic.make_batch(24, 80, (10, 100), 1, (4, 20))
    tables.write(synthetic.batch_table(other), tmp_path / "other.parquet", schema="probe")
    with pytest.raises(ValueError, match="was not captured on the probe"):
        P.run_cell(tmp_path / "m.safetensors", tmp_path / "other.parquet", "tiny", "r", None)


def _trajectory(rows):
    return pl.DataFrame(rows, schema=["model", "revision", "tokens", "layer", "head", "in_induction_circuit"],
                        orient="row")


def test_summary_names_the_positional_circuit_heads():
    traj = _trajectory([("a", "s1", 1, 0, 0, True), ("a", "s1", 1, 0, 1, True), ("a", "s1", 1, 1, 0, False),
                        ("a", "s2", 2, 0, 0, True), ("b", "s1", 1, 0, 0, True), ("pub", "s1", 1, 0, 0, True)])
    pos = pl.concat([
        P.cell_table(_masses(AB, [OFFSET, CONTENT]), np.ones(12, bool), AB, "a", "s1", 1),
        P.cell_table(_masses(AB, [CONTENT]), np.ones(12, bool), AB, "a", "s2", 2),
        P.cell_table(_masses(AB, [CONTENT]), np.ones(12, bool), AB, "b", "s1", 1),
    ])
    flags = P.circuit_flags(pos, traj)
    assert set(flags["model"]) == {"a", "b"}  # the published model has no positional table
    assert flags.filter(pl.col("positional_induction")).select("model", "revision", "layer", "head").rows() == [
        ("a", "s1", 0, 0)]
    text = report_positional.summary_section(flags)
    assert text.startswith("## Screen check")
    assert "**a**: positional heads in the circuits of 1 of 2 revision(s)" in text
    assert "s1: 1 of 2 — L0H0 (1.0)" in text
    assert "**b**: no positional head" in text
    assert "No model" in report_positional.summary_section(flags.clear())


def test_make_demo_summary_names_positional_final_circuit_heads(tmp_path):
    """`headtrace summary results` (make demo's last lines) names the final circuit's positional heads."""
    from headtrace.report import console

    rows = [("a", rev, tok, 0, h, h < 2, 100.0 if h < 2 else 1.0, 1.0) for rev, tok in (("s1", 1), ("s2", 2))
            for h in range(3)]
    traj = pl.DataFrame(rows, schema=["model", "revision", "tokens", "layer", "head", "in_induction_circuit",
                                      "sel_induction", "sel_first_token"], orient="row")
    (tmp_path / "models" / "a").mkdir(parents=True)
    traj.write_parquet(tmp_path / "models" / "a" / "trajectory.parquet")
    cell = tmp_path / "cells" / "a" / "s2"
    cell.mkdir(parents=True)
    pos = P.cell_table(_masses(AB, [OFFSET, CONTENT, IDLE]), np.ones(12, bool), AB, "a", "s2", 2)
    tables.write(pos, cell / "positional.parquet", schema="positional")
    # the findings job's table of the flags, as it writes it (its summary.md not built here)
    tables.write(P.circuit_flags(pos, traj), tmp_path / "findings" / "circuit_positional.parquet",
                 schema="circuit_positional")
    text = console.summary(tmp_path)
    assert "positional heads in the final circuit (1 of 2" in text and text.rstrip().endswith("(not built)")
    assert "): L0H0" in text
