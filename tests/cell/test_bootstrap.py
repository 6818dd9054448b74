"""bootstrap: resampling the probe sequences, on hand-built per-sequence masses with known answers."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from headtrace.cell import bootstrap as B
from headtrace.cell import screen
from headtrace.core.classes import CLASSES
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.findings import onsets
from headtrace.findings import trajectory as T

IND, PREV, FIRST = (CLASSES.index(c) for c in ("induction", "previous-token", "first-token"))
BASE = len(CLASSES)  # the sampled-baseline channel


def masses(n=2000, layers=1, heads=3, seed=0, valid=None):
    """Per-sequence masses: baseline 0.01 everywhere, class masses 0.01 (selectivity 1x) unless set."""
    m = np.full((n, layers, heads, len(B.MASS_CHANNELS)), 0.01, np.float32)
    v = np.ones(n, bool) if valid is None else valid
    return m, v


def symmetric(n, centre, spread, seed):
    """n values with mean exactly ``centre`` (pairs centre +- d), shuffled."""
    d = np.random.default_rng(seed).uniform(0, spread, n // 2)
    x = np.concatenate([centre + d, centre - d])
    return np.random.default_rng(seed + 1).permutation(x)


def test_channels_match_capture():
    from headtrace.cell import capture
    assert B.MASS_CHANNELS == capture._MASS_NAMES


def test_resample_counts_deterministic_and_sum_to_n():
    a = B.resample_counts(50, 200, seed=7)
    assert a.shape == (200, 50) and (a.sum(1) == 50).all()
    assert np.array_equal(a, B.resample_counts(50, 200, seed=7))
    assert not np.array_equal(a, B.resample_counts(50, 200, seed=8))
    with pytest.raises(ValueError):
        B.resample_counts(0, 10, seed=0)


def test_identity_resample_is_the_point_estimate():
    """All-ones counts reproduce screen.selectivity_table on the means (both baselines, validity)."""
    rng = np.random.default_rng(0)
    n, L, H = 40, 2, 3
    valid = rng.random(n) > 0.3
    m = rng.uniform(0.001, 0.2, (n, L, H, 7)).astype(np.float32)
    m[~valid, :, :, :2] = 0.0  # the capture weights induction/duplicate-token by validity
    for baseline in ("sampled", "uniform"):
        sel = B.selectivity_resamples(m, valid, np.ones((1, n)), seq_len=64, baseline=baseline)[0]
        mean = m.astype(np.float64).mean(0)
        mean[..., :2] = m[valid][..., :2].astype(np.float64).mean(0)
        rows = {"attn_baseline_sampled": mean[..., BASE].ravel(), "attn_baseline_uniform": np.full(L * H, 1 / 64)}
        rows.update({f"attn_{c}": mean[..., i].ravel() for i, c in enumerate(CLASS_COLUMNS)})
        ref = screen.selectivity_table(pl.DataFrame(rows), baseline=baseline)
        for i, c in enumerate(CLASS_COLUMNS):
            np.testing.assert_allclose(sel[..., i].ravel(), ref[f"sel_{c}"].to_numpy(), rtol=1e-12)


def test_threshold_head_half_clear_head_one_and_same_seed_same_intervals():
    n = 2000
    m, v = masses(n, heads=3)
    m[:, 0, 0, IND] = symmetric(n, 0.5, 0.3, seed=1)  # mean exactly 50x the 0.01 baseline
    m[:, 0, 1, IND] = symmetric(n, 2.0, 0.3, seed=2)  # 200x: clearly in the circuit
    # head 2 stays at 1x
    sel = B.selectivity_resamples(m, v, B.resample_counts(n, 1000, seed=0), seq_len=256)
    iv = B.head_intervals(sel, interval=0.9)
    p = iv["p_circuit"][0, :, IND]
    assert p[0] == pytest.approx(0.5, abs=0.06)
    assert p[1] == 1.0 and p[2] == 0.0
    assert iv["sel_lo"][0, 0, IND] < 50 < iv["sel_hi"][0, 0, IND]
    assert iv["sel_lo"][0, 1, IND] > 150
    assert iv["p_above"][0, 1, IND] == 1.0 and iv["p_classified"][0, 1, IND] == 1.0
    # deterministic by seed
    again = B.head_intervals(B.selectivity_resamples(m, v, B.resample_counts(n, 1000, seed=0), seq_len=256))
    for k in iv:
        np.testing.assert_array_equal(iv[k], again[k])
    other = B.head_intervals(B.selectivity_resamples(m, v, B.resample_counts(n, 1000, seed=1), seq_len=256))
    assert not np.array_equal(iv["sel_lo"], other["sel_lo"])


def test_previous_token_circuit_needs_best_class_and_100x():
    n = 500
    m, v = masses(n, heads=2)
    m[:, 0, 0, PREV] = 1.5  # 150x previous-token, best class
    m[:, 0, 1, PREV] = 1.5
    m[:, 0, 1, FIRST] = 3.0  # ... but first-token (300x) is this head's best class
    iv = B.head_intervals(B.selectivity_resamples(m, v, B.resample_counts(n, 200, seed=0), seq_len=256))
    assert iv["p_circuit"][0, 0, PREV] == 1.0 and iv["p_circuit"][0, 1, PREV] == 0.0
    assert iv["p_above"][0, 1, PREV] == 1.0 and iv["p_classified"][0, 1, PREV] == 0.0
    assert iv["p_classified"][0, 1, FIRST] == 1.0
    assert np.isnan(iv["p_circuit"][0, 0, FIRST])  # no circuit threshold for that class


def test_induction_mean_is_over_valid_sequences_only():
    n = 100
    valid = np.arange(n) < 50
    m, _ = masses(n, heads=1, valid=valid)
    m[:, 0, 0, IND] = np.where(valid, 0.6, 0.0)  # 60x over the valid half, 0 mass on invalid ones
    sel = B.selectivity_resamples(m, valid, B.resample_counts(n, 300, seed=0), seq_len=256)
    np.testing.assert_allclose(sel[..., 0, 0, IND], 60.0, rtol=1e-5)  # every resample: 60x, not ~30x


def test_cell_tables_schema_and_counts():
    n = 300
    m, v = masses(n, layers=2, heads=2)
    m[:, 1, 0, FIRST] = 0.5  # one first-token head (50x)
    m[:, 1, 1, IND] = symmetric(n, 0.5, 0.4, seed=3)  # an induction head on the threshold
    heads, per = B.cell_tables(m, v, 256, "toy", "step5", 5, n_resamples=400, seed=0)
    assert heads.height == 2 * 2 * 6 and set(heads["class"]) == set(CLASSES)
    assert per.height == 400 and (per["n_first_token"] == 1).all() and (per["n_heads"] == 4).all()
    assert 0.3 < per["n_induction_circuit"].mean() < 0.7
    r = heads.filter((pl.col("layer") == 1) & (pl.col("head") == 0) & (pl.col("class") == "first-token"))
    assert r["p_classified"][0] == 1.0 and r["p_circuit"][0] is None


def _counts(model, first_at):
    """bootstrap_milestones rows: resample b reaches 3 induction heads from revision first_at[b] on
    (None: never); 4 revisions, 10 heads."""
    rows = []
    for b, f in enumerate(first_at):
        for r in range(4):
            rows.append(dict(model=model, revision=f"step{r}", tokens=r * 100, resample=b,
                             n_induction_circuit=3 if f is not None and r >= f else 0,
                             n_first_token=10 if r == 3 else 0, n_heads=10))
    return pl.DataFrame(rows).pipe(lambda d: d.cast({"tokens": pl.Int64, "resample": pl.Int32,
                                                     "n_induction_circuit": pl.Int32, "n_first_token": pl.Int32,
                                                     "n_heads": pl.Int32}))


def test_onset_intervals_percentiles_never_and_missing_models():
    first = [1] * 10 + [2] * 80 + [None] * 10  # 5th pct: step1; 95th: never
    out = onsets.onset_intervals(_counts("toy", first), ["toy", "published"], interval=0.9)
    r = out.filter((pl.col("model") == "toy") & (pl.col("milestone") == "induction_3_heads")).row(0, named=True)
    assert r["onset_lo_revision"] == "step1" and r["onset_lo_tokens"] == 100
    assert r["onset_hi_revision"] is None and r["p_reached"] == pytest.approx(0.9) and r["n_resamples"] == 100
    f = out.filter((pl.col("model") == "toy") & (pl.col("milestone") == "first_token_50pct")).row(0, named=True)
    assert f["onset_lo_revision"] == f["onset_hi_revision"] == "step3"
    pub = out.filter(pl.col("model") == "published")
    assert pub.height == len(T.milestone_specs()) and pub["onset_lo_revision"].null_count() == pub.height
    assert (pub["n_resamples"] == 0).all()
    narrow = onsets.onset_intervals(_counts("toy", [2] * 100))
    assert narrow.filter(pl.col("milestone") == "induction_3_heads")["onset_hi_revision"][0] == "step2"


def test_onset_intervals_same_milestones_as_point_estimate():
    names = onsets.onset_intervals(_counts("toy", [1] * 5))["milestone"].to_list()
    assert names == [s[0] for s in T.milestone_specs()] == [
        "induction_2_heads", "induction_3_heads", "induction_5_heads", "first_token_10pct",
        "first_token_25pct", "first_token_30pct", "first_token_50pct", "first_token_70pct"]
    assert onsets.onset_intervals(_counts("toy", [1] * 5), induction_counts=(2,), first_token_fractions=(0.25,))[
        "milestone"].to_list() == ["induction_2_heads", "first_token_25pct"]


def test_with_onset_columns_fills_f3_onsets_style_tables():
    iv = onsets.onset_intervals(_counts("toy", [1] * 10 + [2] * 90), ["toy", "published"])
    table = pl.DataFrame({"model": ["toy", "published", "toy"],
                          "milestone": ["induction_3_heads", "induction_3_heads", "first_token_50pct"],
                          "lo_revision": ["step1", "x", "step2"], "onset_lo_revision": [None, None, None],
                          "onset_hi_revision": [None, None, None], "stop": ["a", "b", "c"]},
                         schema_overrides={"onset_lo_revision": pl.String, "onset_hi_revision": pl.String})
    out = onsets.with_onset_columns(table, iv)
    assert out.columns == table.columns and out["stop"].to_list() == ["a", "b", "c"]
    assert out["onset_lo_revision"].to_list() == ["step1", None, "step3"]
    assert out["onset_hi_revision"].to_list() == ["step2", None, "step3"]
    assert onsets.with_onset_columns(table, None)["onset_lo_revision"].null_count() == 3


def test_milestones_figure_draws_intervals(tmp_path):
    from headtrace.report import onset_figures

    counts = _counts("toy", [1] * 10 + [2] * 80 + [None] * 10)
    iv = onsets.onset_intervals(counts, ["toy", "published"])
    ms = pl.DataFrame({"model": ["toy", "published"], "milestone": ["induction_3_heads"] * 2,
                       "revision": ["step2", None], "tokens": [200, None]}, schema_overrides={"tokens": pl.Int64})
    revs = pl.DataFrame({"model": ["toy"] * 4 + ["published"], "revision": ["step0", "step1", "step2", "step3", "s"],
                         "tokens": [0, 100, 200, 300, 10]})
    path = tmp_path / "milestones.png"
    onset_figures.plot_milestones(ms, iv, revs, path)
    assert path.stat().st_size > 5000 and path.read_bytes()[:4] == b"\x89PNG"


def test_f3_onsets_gets_the_bootstrap_columns():
    """refine.onsets fills onset_lo/hi_revision from f3_onset_bootstrap (null for a reference model)."""
    from helpers.trajectories import one_layer_trajectory as traj

    from headtrace.panel import refine

    t = pl.concat([traj("m", [("step0", 0), ("step1", 100), ("step2", 200), ("step3", 300)], {"step2": 3, "step3": 3}),
                   traj("r", [("p1", 10), ("p2", 100)], {"p2": 3})])
    info = {"m": {"milestones": ["induction_3_heads"], "target_ratio": 1.5, "refine": False, "source": "local"},
            "r": {"milestones": ["induction_3_heads"], "target_ratio": 1.5, "refine": False, "source": "reference"}}
    iv = onsets.onset_intervals(_counts("m", [1] * 10 + [2] * 90), ["m", "r"])
    out = refine.onsets(t, info, {}, intervals=iv)
    m = out.filter(pl.col("model") == "m").row(0, named=True)
    assert (m["hi_revision"], m["onset_lo_revision"], m["onset_hi_revision"]) == ("step2", "step1", "step2")
    r = out.filter(pl.col("model") == "r").row(0, named=True)
    assert r["onset_lo_revision"] is None and r["onset_hi_revision"] is None


def test_clean_baseline_resamples_and_legacy_files():
    """8 channels (the clean baseline last): the identity resample is screen's clean selectivity;
    7-channel masses (files captured before the clean baseline) still give sampled / uniform and
    refuse clean."""
    rng = np.random.default_rng(3)
    n, L, H = 30, 2, 2
    valid = rng.random(n) > 0.2
    m = rng.uniform(0.001, 0.2, (n, L, H, len(B.MASS_CHANNELS))).astype(np.float32)
    m[~valid, :, :, :2] = 0.0
    sel = B.selectivity_resamples(m, valid, np.ones((1, n)), seq_len=64, baseline="clean")[0]
    mean = m.astype(np.float64).mean(0)
    mean[..., :2] = m[valid][..., :2].astype(np.float64).mean(0)
    rows = {"attn_baseline_clean": mean[..., BASE + 1].ravel()}
    rows.update({f"attn_{c}": mean[..., i].ravel() for i, c in enumerate(CLASS_COLUMNS)})
    ref = screen.selectivity_table(pl.DataFrame(rows), baseline="clean")
    for i, c in enumerate(CLASS_COLUMNS):
        np.testing.assert_allclose(sel[..., i].ravel(), ref[f"sel_{c}"].to_numpy(), rtol=1e-12)
    legacy = m[..., :-1]
    np.testing.assert_allclose(B.selectivity_resamples(legacy, valid, np.ones((1, n)), seq_len=64)[0],
                               B.selectivity_resamples(m, valid, np.ones((1, n)), seq_len=64)[0])
    with pytest.raises(ValueError, match="clean"):
        B.selectivity_resamples(legacy, valid, np.ones((1, n)), seq_len=64, baseline="clean")
