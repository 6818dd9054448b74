"""Figures render (Agg) from the published panel and from toy tables with tokens 0 / null PR."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from headtrace.core.tables import CLASS_COLUMNS, conform
from headtrace.findings import trajectory as T
from headtrace.findings.compute import all_findings
from headtrace.panel import reference as R
from headtrace.report import figures as Fg
from headtrace.report import plotting
from helpers.trajectories import RENDER_SETTINGS

THRESHOLD = {"induction_threshold": RENDER_SETTINGS["induction_threshold"]}  # the figures are told it


def _png_ok(path):
    assert path.exists() and path.stat().st_size > 5000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def panel():
    s, p = zip(*(R.import_model(None, m) for m in R.PUBLISHED))
    return T.assemble(list(s), list(p))


def toy_ablation(zero_tokens=True):
    rng = np.random.default_rng(0)
    rows = []
    revs = [("step0", 0 if zero_tokens else 1), ("step3000", 6_291_456_000), ("step143000", 299_892_736_000)]
    for i, (rev, tok) in enumerate(revs):
        base = 0.01 * (i + 1)
        for cond, draws, f in (("baseline", 1, 1.0), ("circuit", 1, 0.1), ("final_circuit", 1, 0.2),
                               ("matched_random", 20, None)):
            for d in range(draws):
                top1 = base * (f if f is not None else rng.uniform(0.8, 1.1))
                rows.append(dict(model="toy", revision=rev, tokens=tok, condition=cond, draw=d,
                                 n_heads=0 if cond == "baseline" else 3, heads=[] if cond == "baseline" else ["L4H4"],
                                 top1=top1, top5=2 * top1, ce=8.0, logit_b=3.0, top1_control=0.004,
                                 top1_context=0.3, n_sequences=100, n_matched_sets=20 if cond == "matched_random" else None,
                                 ablation_probe="held_out", ablation_probe_seed=43, ablation_probe_sha256="0" * 64,
                                 ablation_probe_redrawn=0,
                                 **{f"{m}{s}": v + (-0.01 if s.endswith("lo") else 0.01)
                                    for m, v in (("top1", top1), ("logit_b", 3.0), ("ce", 8.0))
                                    for s in ("_lo", "_hi", "_effect_lo", "_effect_hi")},
                                 top1_fraction_lo=f or 1.0, top1_fraction_hi=f or 1.0,
                                 **{f"{m}_fraction_{s}": None for m in ("logit_b", "ce") for s in ("lo", "hi")},
                                 reference_exact=(cond == "matched_random") or None, method="zero"))
    return conform(pl.DataFrame(rows, schema_overrides={"n_matched_sets": pl.Int64, "reference_exact": pl.Boolean,
                                                        "method": pl.String}), "ablation")


def toy_traj():
    rows = []
    for rev, tok in (("step0", 0), ("step1", 2_000_000), ("step2", 20_000_000), ("stepX", None)):
        for layer in range(2):
            for head in range(2):
                sel = {c: 1.0 for c in CLASS_COLUMNS}
                if rev != "step0" and (layer, head) == (1, 0):
                    sel["induction"] = 80.0
                if rev == "step2" and layer == 1:
                    sel["first_token"] = 40.0
                pr = None if rev == "step1" else 1.0 + 10 * (rev == "step2")
                rows.append(dict(model="toy", revision=rev, tokens=tok, layer=layer, head=head, pr=pr,
                                 **{f"sel_{c}": v for c, v in sel.items()}))
    df = pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64})
    return conform(R.classify_table(df), "trajectory")


def test_zero_floor():
    assert plotting.zero_floor([0, 2_097_152, 10**9]) == 1e5
    assert plotting.zero_floor([0, None]) == 1.0


@pytest.mark.slow
def test_panel_figures(panel, tmp_path):
    paths = Fg.plot_all(panel, tmp_path, all_findings(panel), ablation=toy_ablation(), **THRESHOLD)
    assert set(paths) == {"bos_fraction", "bos_heatmap", "layer_onset", "milestones", "circuit_recall",
                          "head_trajectories", "strongest_heads", "ablation"}
    for p in paths.values():
        _png_ok(p)


@pytest.mark.slow
def test_toy_figures_zero_tokens_and_missing_pr(tmp_path):
    t = toy_traj()
    paths = Fg.plot_all(t, tmp_path, all_findings(t), ablation=toy_ablation(), **THRESHOLD)
    for p in paths.values():
        _png_ok(p)


@pytest.mark.slow
def test_figures_from_the_findings_jobs_tables_compute_nothing(tmp_path, monkeypatch):
    from headtrace.findings import compute
    t = toy_traj()
    tables = all_findings(t)
    monkeypatch.setattr(compute, "all_findings", lambda *a, **k: pytest.fail("findings recomputed"))
    paths = Fg.plot_all(t, tmp_path, findings=tables, **THRESHOLD)
    assert {"bos_fraction", "milestones", "layer_onset"} <= set(paths)
    for p in paths.values():
        _png_ok(p)


def test_head_trajectories_without_induction_heads(tmp_path):
    t = toy_traj().with_columns(sel_induction=pl.lit(1.0))
    fin = all_findings(t)["f4_final_circuit"]  # the findings job's: no head
    assert not fin.height
    Fg.plot_head_trajectories(t, tmp_path / "none.png", RENDER_SETTINGS["induction_threshold"], final=fin)
    assert (tmp_path / "none.png").exists()
