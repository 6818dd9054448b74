"""The pages of a finished run (the session's tiny panel, ``tiny_panel`` in tests/conftest.py, read-only):
what summary.html says is what the run's tables decided."""
from __future__ import annotations

import html
import re

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
