"""The strongest head of each class over the revisions (issue 51 point 6): where nothing crosses a
threshold, "none yet, rising" must read apart from "none". Built on a hand-made trajectory with the
issue's numbers: `tiny`'s strongest first-token head rises 1.06× → 15.2× over four revisions and its
induction stays ≤ 1.36×; `flat` stays at 1×; `formed` reaches the induction threshold at its third
revision and its first-token selectivity falls."""
from __future__ import annotations

import polars as pl
import pytest

from headtrace.core import tables
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.findings import strongest as S
from headtrace.findings.compute import all_findings
from headtrace.report import console, html
from headtrace.report import figures as Fg
from headtrace.report import strongest as W
from headtrace.report import summary
from helpers.trajectories import RENDER_SETTINGS

REVS = (("step0", 0), ("step100", 52_400_000), ("step400", 210_000_000), ("step1500", 786_000_000))
# model -> revision index -> {(layer, head): {class: selectivity}}; every other selectivity is 1.0
SEL = {
    "tiny": [{(2, 1): {"first_token": 1.06}, (1, 0): {"induction": 1.02}},
             {(2, 1): {"first_token": 2.5}, (1, 0): {"induction": 1.20}},
             {(2, 0): {"first_token": 7.0}, (1, 1): {"induction": 1.36}},  # another head leads here
             {(2, 1): {"first_token": 15.2}, (1, 1): {"induction": 1.30}}],
    "flat": [{}, {}, {}, {}],
    "formed": [{(1, 0): {"induction": 3.0, "first_token": 40.0}},
               {(1, 0): {"induction": 20.0, "first_token": 20.0}},
               {(1, 0): {"induction": 60.0, "first_token": 10.0}},
               {(1, 0): {"induction": 80.0, "first_token": 12.0}}],
}


def _traj() -> pl.DataFrame:
    rows = []
    for model, per_rev in SEL.items():
        for (rev, tokens), heads in zip(REVS, per_rev):
            for layer in range(3):
                for head in range(2):
                    sel = {c: 1.0 for c in CLASS_COLUMNS} | heads.get((layer, head), {})
                    best = max(sel, key=sel.get)
                    rows.append(dict(model=model, revision=rev, tokens=tokens, layer=layer, head=head, pr=1.5,
                                     **{f"sel_{c}": v for c, v in sel.items()}, best_class=best.replace("_", "-"),
                                     best_selectivity=sel[best], classification="unclassified",
                                     in_induction_circuit=sel["induction"] >= 50))
    return tables.conform(pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64}), "trajectory")


TRAJ = _traj()
F = all_findings(TRAJ)


def _trend(model: str, cls: str) -> dict:
    return F["strongest_trend"].filter((pl.col("model") == model) & (pl.col("class") == cls)).row(0, named=True)


def test_the_strongest_head_per_revision_is_the_largest_selectivity():
    best = F["strongest_head"].filter((pl.col("model") == "tiny") & (pl.col("class") == "first-token"))
    assert best["revision"].to_list() == [r for r, _ in REVS]  # training order
    assert best["selectivity"].to_list() == [1.06, 2.5, 7.0, 15.2]
    assert list(zip(best["layer"], best["head"])) == [(2, 1), (2, 1), (2, 0), (2, 1)]
    assert best["threshold"].unique().to_list() == [30.0] and not best["reached"].any()
    ind = F["strongest_head"].filter((pl.col("model") == "formed") & (pl.col("class") == "induction"))
    assert ind["threshold"].unique().to_list() == [50.0] and ind["reached"].to_list() == [False, False, True, True]
    flat = F["strongest_head"].filter(pl.col("model") == "flat")
    assert flat.height == 4 * 6 and flat["selectivity"].unique().to_list() == [1.0]
    assert (flat["layer"].unique().to_list(), flat["head"].unique().to_list()) == ([0], [0])  # ties: lowest head


def test_the_trend_says_rising_flat_falling_and_where_a_threshold_was_reached():
    ft = _trend("tiny", "first-token")
    assert (ft["first_selectivity"], ft["last_selectivity"], ft["peak_selectivity"]) == (1.06, 15.2, 15.2)
    assert ft["ratio"] == pytest.approx(15.2 / 1.06) and ft["trend"] == "rising"
    assert ft["reached_revision"] is None and ft["reached_last"] is False and ft["last_head"] == "L2H1"
    ind = _trend("tiny", "induction")
    assert ind["trend"] == "flat" and ind["peak_selectivity"] == 1.36 and ind["peak_revision"] == "step400"
    assert ind["peak_head"] == "L1H1" and ind["first_head"] == "L1H0"
    assert _trend("flat", "first-token")["trend"] == "flat"
    formed = _trend("formed", "induction")
    assert formed["trend"] == "rising" and formed["reached_revision"] == "step400"
    assert formed["reached_tokens"] == 210_000_000 and formed["reached_last"] is True
    fell = _trend("formed", "first-token")
    assert fell["trend"] == "falling" and fell["reached_revision"] == "step0" and fell["reached_last"] is False
    assert F["strongest_trend"].height == 3 * 6


def test_the_trend_factor_is_the_config_s():
    trend = S.strongest_trend(F["strongest_head"], trend_factor=20.0)
    row = trend.filter((pl.col("model") == "tiny") & (pl.col("class") == "first-token")).row(0, named=True)
    assert row["trend"] == "flat" and row["trend_factor"] == 20.0  # 15.2 / 1.06 = 14.3 < 20
    one = S.strongest_trend(F["strongest_head"].filter(pl.col("revision") == "step0"))
    assert set(one["trend"]) == {"one_revision"}


def test_the_words():
    assert W.class_text(_trend("tiny", "first-token")) == (
        "first-token 1.06× → 15.2× (L2H1; below 30× at every revision: none yet, rising)")
    assert W.class_text(_trend("tiny", "induction")) == (
        "induction 1.02× → 1.3× (L1H1, peak 1.36× at step400 (L1H1); below 50× at every revision: none, flat)")
    assert W.class_text(_trend("flat", "induction")).endswith("below 50× at every revision: none, flat)")
    assert W.state_text(_trend("formed", "induction")) == "reached 50× at step400"
    assert W.state_text(_trend("formed", "first-token")) == "reached 30× at step0, below it at the last revision"
    line = W.model_line(F["strongest_trend"], "tiny", W.CONSOLE_CLASSES)
    assert line.startswith("strongest head, first → last revision: induction 1.02× → 1.3× ")
    assert "; first-token 1.06× → 15.2× (L2H1; below 30× at every revision: none yet, rising)" in line
    assert W.model_line(None, "tiny") == "" and W.markdown(None, ["tiny"]) == ""


def test_summary_md_has_a_row_per_model_and_class():
    md = summary.render(TRAJ, F, **RENDER_SETTINGS)
    section = md[md.index("## The strongest head of each class"):]
    section = section[:section.find("\n## ", 1)]
    assert "| tiny | first-token | 1.06× → 15.2× | L2H1 | 15.2× at step1500 (L2H1) | 30× | below 30× at every " \
           "revision: none yet, rising |" in section
    assert "| flat | induction | 1× → 1× | L0H0 | 1× at step0 (L0H0) | 50× | below 50× at every revision: none, " \
           "flat |" in section
    assert section.count("\n| tiny |") == 6


def test_console_and_html_say_it_per_model(tmp_path):
    results = tmp_path / "results"
    for model in SEL:
        tables.write(TRAJ.filter(pl.col("model") == model), results / "models" / model / "trajectory.parquet",
                     schema="trajectory")
    summary.write_findings(F, results / "findings")
    text = console.summary(results)
    assert "\n    strongest head, first → last revision: induction 1.02× → 1.3×" in text
    flat = " ".join(ln.strip() for ln in text.splitlines())  # the line wraps at 110 characters
    assert "first-token 1.06× → 15.2× (L2H1; below 30× at every revision: none yet, rising)" in flat
    assert "induction 1× → 1× (L0H0; below 50× at every revision: none, flat)" in flat
    assert "induction 3× → 80× (L1H0; reached 50× at step400)" in flat
    from headtrace.report import headline
    rows = headline.headline_rows(F, None)
    page = html.page(rows, headline.sentences(rows), F)
    assert "<b>Strongest head per class</b>, first → last revision: induction 1.02× → 1.3×" in page


@pytest.mark.slow
def test_the_figure(tmp_path):
    Fg.plot_strongest_heads(F["strongest_head"], tmp_path / "strongest.png")
    assert (tmp_path / "strongest.png").stat().st_size > 10_000
    Fg.plot_strongest_heads(F["strongest_head"].head(0), tmp_path / "none.png")
    assert (tmp_path / "none.png").exists()
