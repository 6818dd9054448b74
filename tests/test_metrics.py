"""The metric registry (``headtrace.core.metrics``, issue 50 point 2): one record per metric, read by the
ablation engine, the table schemas, the intervals, the verdict and the pages; checked against the config
schema's enums; and a metric added in a test, in the registry only, measured, tabled, decided and worded."""
from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import polars as pl
import pytest
import torch

from headtrace.causal import ablation
from headtrace.causal import verdict as V
from headtrace.core import metrics, schema, tables
from headtrace.report import console
from headtrace.report import verdicts as VS


def schema_disagreements() -> list[str]:
    """Where the registry and the ``ablation.metric`` / ``ablation.fallback_metric`` enums of
    config/schema.yaml differ (empty: they agree)."""
    block = schema.schema()["properties"]["ablation"]["properties"]
    out = []
    for key, want in (("metric", metrics.decision_metrics()), ("fallback_metric", (*metrics.fallback_metrics(), None))):
        enum = block[key]["enum"]
        out += [f"ablation.{key}: {m!r} in the registry, not in the schema's enum" for m in want if m not in enum]
        out += [f"ablation.{key}: {m!r} in the schema's enum, not in the registry" for m in enum if m not in want]
    return out


def test_the_registry_agrees_with_the_config_schema_enums():
    assert schema_disagreements() == []


def test_the_registry_holds_what_the_constants_it_replaced_held():
    """The registry reproduces the constants it replaced (verdict.py, ablation.py, cell_schemas.py,
    report/verdicts.py before issue 50), value for value."""
    assert tuple(metrics.METRICS) == ("top1", "top5", "logit_b", "ce", "top1_control", "top1_context")
    assert metrics.decision_metrics() == ("top1", "logit_b", "ce")  # DECISION_METRICS
    assert metrics.interval_metrics() == ("top1", "logit_b", "ce")  # CI_METRICS
    assert metrics.fraction_metrics() == ("top1", "logit_b", "ce")  # FRACTION_METRICS
    assert sorted(metrics.fallback_metrics()) == ["ce", "logit_b"]
    assert [m for m in metrics.METRICS if metrics.has_floor(m)] == ["top1", "top5"]  # HALF_METRICS
    assert dict(V.DIRECTION) == {"top1": 1.0, "top5": 1.0, "logit_b": 1.0, "ce": -1.0}
    assert dict(V.METRIC_WORDS) == {"top1": "top-1", "top5": "top-5", "ce": "the cross-entropy of B",
                                    "logit_b": "the logit of B"}
    assert {m: VS.METRIC_SAY[m] for m in ("top1", "top5", "ce", "logit_b")} == {
        "top1": "top-1", "top5": "top-5", "ce": "cross-entropy of B", "logit_b": "logit of B"}
    assert {m: metrics.METRICS[m].unit for m in ("top1", "logit_b", "ce")} == {"top1": "", "logit_b": "", "ce": " nats"}
    with pytest.raises(ValueError, match=r"unknown metric 'top1_control'; one of \['ce', 'logit_b', 'top1', 'top5'\]"):
        metrics.damage("top1_control", 0.5, 0.2)


def test_every_record_is_whole():
    """A metric that decides has a direction, intervals and the halving rule's share; a fallback has no
    floor (it decides where top-1 is at its floor); a metric with a floor says what one hit is."""
    for m in metrics.METRICS.values():
        if m.decides:
            assert m.direction is not None and m.interval and m.fraction, m.name
        if m.fallback:
            assert m.decides and not m.floor, m.name
        if m.floor:
            assert m.hit and m.direction is not None, m.name
        if m.interval or m.fraction:
            assert m.direction is not None, m.name


def test_the_schemas_carry_every_metric_of_the_registry():
    cols = tables.SCHEMAS["ablation"]
    for m in metrics.METRICS:
        assert cols[m] == pl.Float64
    for m in metrics.interval_metrics():
        assert all(f"{m}{s}" in cols for s in ("_lo", "_hi", "_effect_lo", "_effect_hi"))
    for m in metrics.fraction_metrics():
        assert all(f"{m}_fraction{s}" in cols for s in ("_lo", "_hi"))
    assert not any(c.startswith("top5_") for c in cols)  # top-5 is measured, without intervals


# ---------------------------------------------------------------------------- a new metric, in the registry only


TOP2 = metrics.Metric(
    "top2", lambda q: (q.logits.topk(min(2, q.logits.shape[1]), dim=1).indices == q.target[:, None]).any(dim=1),
    "top-2", direction=1.0, floor=True, hit="in its top 2", decides=True, interval=True, fraction=True)


@pytest.fixture
def with_top2(monkeypatch):
    """The registry with one more metric, top-2, and the table schemas as a fresh import of
    ``headtrace.core.cell_schemas`` builds them from it: no other module is edited."""
    monkeypatch.setitem(metrics.METRICS, "top2", TOP2)
    spec = importlib.util.find_spec("headtrace.core.cell_schemas")
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)  # the module's own code, run again over the registry with top-2
    monkeypatch.setitem(tables.SCHEMAS, "ablation", fresh.CELL_SCHEMAS["ablation"])
    yield


LAYER = [(2, h) for h in range(8)]
CIRCUIT = ((2, 0), (2, 1))  # one of C(8, 2) = 28 sets of its layer: exact, min p = 1/28
N = 40


def _condition(name, heads, hits, draw=0, n_sets=None, exact=None):
    """A result of ``ablation.run`` for a condition whose top-2 (and every other metric, alike) hits the first
    ``hits`` of the N sequences."""
    v = np.r_[np.ones(hits), np.zeros(N - hits)]
    ps = {m: v.copy() for m in metrics.METRICS}
    return {"name": name, "draw": draw, "heads": heads, "n_heads": len(heads), **{m: float(v.mean()) for m in ps},
            "n_sequences": N, "n_sets": n_sets, "exact": exact, "method": "zero", "per_sequence": ps}


def test_a_metric_added_to_the_registry_alone_is_measured_tabled_decided_and_worded(with_top2):
    # measured: the engine's per-row values from logits
    logits = torch.tensor([[5.0, 4.0, 0.0, -1.0], [5.0, 0.0, 4.0, -1.0], [5.0, 4.0, 3.0, -1.0]])
    m = ablation._metrics(logits, torch.tensor([1, 1, 2]), torch.tensor([-1, -1, -1]), torch.tensor([[0, 1]] * 3))
    assert m["top2"].tolist() == [1.0, 0.0, 0.0] and m["top2"].dtype == torch.float64

    # tabled: its column and its intervals in the ablation table
    sets = list(itertools.combinations(LAYER, 2))
    results = [_condition("baseline", (), N), _condition("circuit", CIRCUIT, 4),
               *(_condition("matched_random", s, 4 if s == CIRCUIT else 36, draw=i + 1, n_sets=len(sets), exact=True)
                 for i, s in enumerate(sets)),
               _condition("upper_bound", tuple(LAYER), 0)]
    table = ablation.ablation_table(results, "toy", "step1", 1, n_boot=200, seed=0)
    assert table.filter(pl.col("condition") == "circuit")["top2"][0] == pytest.approx(0.1)
    for c in ("top2_lo", "top2_hi", "top2_effect_lo", "top2_effect_hi", "top2_fraction_lo", "top2_fraction_hi"):
        assert table[c].null_count() == 0, c

    # decided: the verdict on top-2, with its floor, its halving rule on ablated / baseline, its interval
    row = V.verdict(table, metric="top2").filter(pl.col("circuit") == "circuit").row(0, named=True)
    assert row["metric"] == "top2" and row["verdict"] == "causal" and row["half_baseline"] == "at_most_half"
    assert row["p_value"] == pytest.approx(1 / 28) and row["effect"] == pytest.approx(0.9)
    assert row["ablated_fraction"] == pytest.approx(0.1) and row["ablated_fraction_hi"] <= 0.5
    assert V.at_floor("top2", 0.1, N) and not V.at_floor("top2", 0.5, N)
    assert V.floor_reason("top2", 0.1, N, 10, "ce").startswith(
        "top-2 is near its floor: the unablated model predicts B in its top 2 in 4 of 40 sequences (10.0%)")

    # worded: the pages print it in its unit, in its words
    assert VS.fmt_metric("top2", 0.1) == "10.00%"
    assert VS.effect_text(row).startswith("90.00 pp [")
    line = console.verdict_line(row)
    assert line.startswith("top-2 100.00% -> circuit 10.00%, reference-set mean") and "; top-2 effect 90.00 pp" in line

    # and the config schema is the one other place to name it
    assert schema_disagreements() == ["ablation.metric: 'top2' in the registry, not in the schema's enum"]


def test_the_added_metric_leaves_with_the_fixture():
    assert "top2" not in metrics.METRICS and "top2" not in tables.SCHEMAS["ablation"]
