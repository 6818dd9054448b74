"""The pages of a finished run (the session's tiny panel, ``tiny_panel`` in tests/conftest.py, read-only):
what summary.html says is what the run's tables decided."""
from __future__ import annotations

import html
import re
import subprocess

import polars as pl
import pytest

pytestmark = pytest.mark.slow


def test_summary_page_shows_the_tables_answers(tiny_panel):
    """results/findings/summary.html: one headline row per model whose milestone revision, gap and
    final verdict are those of f3_milestones, f3_gaps and the last revision's verdict.parquet."""
    res = tiny_panel.workdir / "results"
    page = (res / "findings" / "summary.html").read_text()
    rows = dict(re.findall(r'<tr data-model="([^"]+)">(.*?)</tr>', page.split('id="headline"', 1)[1], re.S))
    assert set(rows) == {"tiny-olmo", "tiny-gguf", "tiny-toy"}
    # family: auto shows what it resolved to (the checkpoints' model_type, a GGUF's header), not 'local'
    assert "<td>olmo</td>" in rows["tiny-olmo"] and "<td>gpt_neox</td>" in rows["tiny-toy"]
    assert "<td>llama</td>" in rows["tiny-gguf"]
    ms = pl.read_parquet(res / "findings" / "f3_milestones.parquet")
    gaps = pl.read_parquet(res / "findings" / "f3_gaps.parquet")
    for model, last in (("tiny-olmo", "rev-c"), ("tiny-toy", "step4")):
        text = html.unescape(re.sub(r"<[^>]+>", " ", rows[model]))
        circuit = ms.filter((pl.col("model") == model) & (pl.col("milestone") == "induction_3_heads")).row(0, named=True)
        reached = circuit["revision"] is not None
        assert (circuit["revision"] in text) if reached else ("not reached" in text)
        gap = gaps.filter((pl.col("model") == model) & (pl.col("earlier") == "induction_3_heads")
                          & (pl.col("later") == "first_token_50pct")).row(0, named=True)
        if not reached:
            assert "no circuit" in text
        elif gap["later_revision"] is None:
            assert "no sink by the last revision" in text  # a lower bound, never a point
        v = pl.read_parquet(res / "cells" / model / last / "verdict.parquet")
        final = v.filter(pl.col("circuit") == "final_circuit") if (v["circuit"] == "final_circuit").any() else v
        # an empty final circuit has nothing to ablate: the page says so instead of a verdict word
        assert final["verdict"][0] in text if final["n_heads"][0] else "no circuit" in text


def test_headtrace_summary_of_the_run_names_its_panel_and_each_probe_as_drawn(tiny_panel):
    """``headtrace summary results`` (make demo's last lines) on a finished run: the three models of its
    panel.json, one line per distinct probe as the probe job drew it, and a row per model whose verdict
    word is its last revision's verdict table's."""
    from helpers.workflow import HEADTRACE

    from headtrace.core import results
    from headtrace.probe import words as probe_words

    proc = subprocess.run([HEADTRACE, "summary", "results"], cwd=tiny_panel.workdir, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = re.sub(r"\s+", " ", proc.stdout)
    assert "(3 models of its panel.json)" in out
    res = results.read(tiny_panel.workdir / "results")
    assert res.findings_built and sorted(res.trajectories) == ["tiny-gguf", "tiny-olmo", "tiny-toy"]
    shown = {model: probe_words.from_table(table) for model, table in res.probes.items()}
    assert sorted(shown) == sorted(res.trajectories)
    for line in probe_words.lines(shown):
        assert re.sub(r"\s+", " ", line) in out
    bos = res.findings["f2_bos_fraction"]
    for model, last in (("tiny-olmo", "rev-c"), ("tiny-gguf", "rev-c"), ("tiny-toy", "step4")):
        (row,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(model + " ")]
        b = bos.filter((pl.col("model") == model) & (pl.col("revision") == last)).row(0, named=True)
        assert f" {b['n_first_token']}/{b['n_heads']} " in row, row  # F2's count at the config's threshold
        v = res.verdicts.filter((pl.col("model") == model) & (pl.col("revision") == last))
        final = v.filter(pl.col("circuit") == "final_circuit") if (v["circuit"] == "final_circuit").any() else v
        block = proc.stdout.split(row, 1)[1].split("\n" + "tiny-", 1)[0]
        if not final["n_heads"][0]:
            assert "final ablation: no induction circuit at the final revision (nothing to ablate)" in block
        else:
            assert final["verdict"][0].replace("_", " ") in block
