"""F2b (headtrace.findings.layer_onset): per-layer sink onsets and the spread label, on hand-built
trajectories with known answers and on the published panel's real numbers."""
from __future__ import annotations

import polars as pl
import pytest

from headtrace.cell.screen import classify_table
from headtrace.core.tables import CLASS_COLUMNS, conform
from headtrace.findings import layer_onset as LO
from headtrace.findings import trajectory as T
from headtrace.findings.compute import all_findings
from headtrace.panel import reference as R

N_REV, N_LAYERS, N_HEADS = 6, 12, 2


def traj_from_onsets(onsets: dict[int, int | None], half: dict[int, int | None] | None = None,
                     model: str = "m", n_layers: int = N_LAYERS) -> pl.DataFrame:
    """A trajectory where layer L gets one first-token head (sel 40x) from revision onsets[L] on and
    both its heads from half[L] on (default: never); other heads stay at 1x."""
    half = half or {}
    rows = []
    for r in range(N_REV):
        for layer in range(n_layers):
            for h in range(N_HEADS):
                start = onsets.get(layer) if h == 0 else half.get(layer)
                sel = 40.0 if start is not None and r >= start else 1.0
                row = dict(model=model, revision=f"step{10 ** r}", tokens=10 ** r * 1000, layer=layer, head=h, pr=1.0)
                row.update({f"sel_{c}": 1.0 for c in CLASS_COLUMNS})
                row["sel_first_token"] = sel
                rows.append(row)
    df = classify_table(pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64}))
    return conform(df, "trajectory")


def _spread(onsets, **kw):
    t = traj_from_onsets(onsets, **kw)
    return LO.f2_layer_spread(LO.f2_layer_onset(t)).filter(pl.col("onset") == "first").row(0, named=True)


# the panel's geometry: 16 layers, 2..15 ranked (0, 1 = floor), middle = the network's, (0 + 15) / 2 = 7.5
MIDDLE_OUT = {l: min(5, int(abs(l - 7.5))) for l in range(2, 16)}
BOTTOM_UP = {l: min(5, (l - 2) * 6 // 14) for l in range(2, 16)}
TOP_DOWN = {l: min(5, (15 - l) * 6 // 14) for l in range(2, 16)}
SHUFFLED = {2: 1, 3: 4, 4: 2, 5: 5, 6: 3, 7: 1, 8: 4, 9: 2, 10: 5, 11: 3, 12: 2, 13: 4, 14: 1, 15: 3}  # no pattern


@pytest.mark.parametrize("onsets,label", [(MIDDLE_OUT, "middle-out"), (BOTTOM_UP, "bottom-up"),
                                          (TOP_DOWN, "top-down"), (SHUFFLED, "no clear order")])
def test_each_label(onsets, label):
    s = _spread(onsets, n_layers=16)
    assert s["label"] == label
    assert s["middle_layer"] == 7.5 and s["n_layers_ranked"] == 14 and s["floor_layers"] == "L0,L1"
    if label == "middle-out":
        assert s["rho_middle"] > 0.95 and s["leading_layers"] == "L7,L8"
        assert s["lead_tokens"] == 1_000 and s["next_tokens"] == 10_000 and s["lead_ratio"] == pytest.approx(10)
        assert s["last_layers"] == "L2,L13,L14,L15"
    if label in ("middle-out", "bottom-up", "top-down"):
        assert s["p_value"] < 0.01
        # a named order beat each alternative, paired on the same permutations, and survived Holm
        assert s["best_order"] == label and s["p_vs_runner_up"] <= 0.05 and s["p_holm"] <= 0.05
        assert s["pairwise"].count("vs ") == 2
    else:
        assert s["p_value"] > 0.2


def test_middle_is_the_network_middle_and_orders_must_beat_each_alternative():
    """12 layers (2..11 ranked): the middle is 5.5, not the ranked layers' 6.5. A perfectly
    bottom-up onset order rejects exchangeability, but middle-out (the upper layers are also the
    far ones) fits nearly as well: paired on the same permutations it is not beaten (p > 0.05), so
    no order is named."""
    s = _spread({l: min(5, (l - 2) // 2) for l in range(2, 12)})
    assert s["middle_layer"] == 5.5
    assert s["p_holm"] <= 0.05 and s["best_order"] == "bottom-up" and s["runner_up"] == "middle-out"
    assert s["p_vs_runner_up"] > 0.05
    assert s["label"].startswith(LO.NOT_EXCHANGEABLE) and "p = " in s["label"]


def test_holm_over_a_stated_family():
    h = LO.holm([0.01, 0.04, None, 0.03])
    assert h[0] == pytest.approx(0.03) and h[3] == pytest.approx(0.06) and h[1] == pytest.approx(0.06) and h[2] is None
    # a family stated at 5 tests, 3 of them with a p: the other two count as p = 1
    h5 = LO.holm([0.01, 0.04, None, 0.03], m=5)
    assert h5[0] == pytest.approx(0.05) and h5[3] == pytest.approx(0.12) and h5[1] == pytest.approx(0.12)
    with pytest.raises(ValueError):
        LO.holm([0.01, 0.02, 0.03], m=2)


def _panel(*specs):
    """A run of models, each (name, onsets, n_revisions): the onsets of traj_from_onsets on 16 layers, the
    model screened at its last n revisions."""
    runs = []
    for name, onsets, n in specs:
        t = traj_from_onsets(onsets, half={l: v + 1 for l, v in onsets.items() if v < N_REV - 1}, model=name,
                             n_layers=16)
        keep = [f"step{10 ** r}" for r in range(N_REV - n, N_REV)]
        runs.append(t.filter(pl.col("revision").is_in(keep)))
    return pl.concat(runs)


def _p_holm(F):
    return {(r["model"], r["onset"]): r["p_holm"] for r in F["f2_layer_spread"].iter_rows(named=True)}


def test_adding_a_model_never_moves_another_model_s_p():
    """Issue 49: a one-checkpoint model joined the run's Holm family and moved OLMoE's p from 0.0498 to
    0.058. The family is now stated before the run: adding a one-checkpoint model, or another model, leaves
    every other model's p_holm as it was, to the last digit."""
    families = {"panel": ["a", "b", "c"]}
    base = all_findings(_panel(("a", MIDDLE_OUT, N_REV), ("b", TOP_DOWN, N_REV), ("c", SHUFFLED, N_REV),
                               ("own", BOTTOM_UP, N_REV)), spread_families=families)
    more = all_findings(_panel(("a", MIDDLE_OUT, N_REV), ("b", TOP_DOWN, N_REV), ("c", SHUFFLED, N_REV),
                               ("own", BOTTOM_UP, N_REV), ("one", MIDDLE_OUT, 1), ("new", TOP_DOWN, N_REV)),
                        spread_families=families)
    before, after = _p_holm(base), _p_holm(more)
    assert all(p is not None for p in before.values())
    assert {k: after[k] for k in before} == before
    sp = more["f2_layer_spread"]
    fam = {r["model"]: (r["holm_family"], r["holm_m"]) for r in sp.iter_rows(named=True)}
    assert fam["a"] == fam["b"] == fam["c"] == ("panel", 6) and fam["own"] == ("own", 2) and fam["new"] == ("new", 2)
    # the one-checkpoint model has no p and takes no part in a test
    one = sp.filter(pl.col("model") == "one")
    assert one["label"].to_list() == [LO.ONE_CHECKPOINT] * 2 and one["p_value"].is_null().all()
    assert one["p_holm"].is_null().all()
    # a stated member missing from the run counts as untested (p = 1): the family keeps its size
    two = all_findings(_panel(("a", MIDDLE_OUT, N_REV), ("b", TOP_DOWN, N_REV)), spread_families=families)
    ps = [r["p_value"] for r in two["f2_layer_spread"].iter_rows(named=True)]
    assert list(_p_holm(two).values()) == LO.holm(ps, m=6)


def test_one_checkpoint_has_no_shape_no_onset_and_no_test():
    """A model screened at one revision: F1's counts and a fraction, but F2's shape is "one checkpoint"
    (not "no rise"), it has no f2_layer_onset rows, and its spread rows carry no statistic."""
    t = _panel(("one", MIDDLE_OUT, 1), ("full", MIDDLE_OUT, N_REV))
    t = t.with_columns(sel_induction=pl.when((pl.col("layer") == 5) & (pl.col("head") == 0)).then(80.0)
                       .otherwise(pl.col("sel_induction")))  # a one-head induction circuit at every revision
    F = all_findings(t)
    shape = {r["model"]: r for r in F["f2_shape"].iter_rows(named=True)}
    one = shape["one"]
    assert one["shape"] == "one checkpoint" and one["n_revisions"] == 1
    assert one["rise_pp"] is None and one["largest_jump_pp"] is None and one["monotone"] is None
    assert one["jump_from_revision"] is None and one["first_fraction"] == one["final_fraction"] > 0
    assert shape["full"]["shape"] != "one checkpoint"
    assert "one" not in F["f2_layer_onset"]["model"].to_list()
    sp = F["f2_layer_spread"].filter(pl.col("model") == "one")
    assert sp.height == 2 and sp["label"].to_list() == ["one checkpoint"] * 2
    for col in ("p_value", "p_holm", "rho_middle", "rho_depth", "best_order", "middle_layer"):
        assert sp[col].is_null().all(), col
    # F1 still counts it; F4 has no convergence milestone to give (recall at its own revision is 100% by
    # construction)
    assert F["f1_floor"].filter(pl.col("model") == "one")["n_revisions"][0] == 1
    rm = F["f4_recall_milestones"].filter(pl.col("model") == "one")
    assert rm.height == 3 and rm["revision"].is_null().all() and rm["token_share"].is_null().all()
    assert F["f4_recall"].filter(pl.col("model") == "one")["recall"].to_list() == [1.0]
    assert F["f4_recall_milestones"].filter(pl.col("model") == "full")["revision"].is_not_null().all()


def test_onset_table_first_and_half():
    t = traj_from_onsets({4: 1, 5: 3}, half={4: 2})
    on = LO.f2_layer_onset(t)
    assert on.height == N_LAYERS and on["n_heads"].unique().to_list() == [N_HEADS]
    r4 = on.filter(pl.col("layer") == 4).row(0, named=True)
    assert (r4["first_revision"], r4["first_tokens"], r4["half_revision"], r4["half_tokens"]) == (
        "step10", 10_000, "step10", 10_000)  # 1 of 2 heads is already 50%
    r5 = on.filter(pl.col("layer") == 5).row(0, named=True)
    assert r5["first_revision"] == "step1000" and r5["half_revision"] == "step1000"
    r6 = on.filter(pl.col("layer") == 6).row(0, named=True)
    assert r6["first_revision"] is None and r6["first_tokens"] is None and r6["half_tokens"] is None


def test_never_reached_layers_rank_last_and_tied():
    # the middle leads, the outer layers never get a sink: still middle-out, never layers last
    onsets = {4: 1, 5: 1, 6: 1, 7: 1, 3: 3, 8: 3, 9: 4}
    s = _spread(onsets)
    assert s["n_never"] == 3 and s["never_layers"] == "L2,L10,L11" and s["last_layers"] == "L2,L10,L11"
    assert s["label"] == "middle-out" and s["rho_middle"] > 0.8
    # never reached is later than the latest reached onset: same ranks as an explicit late onset
    explicit = _spread({**onsets, 2: 5, 10: 5, 11: 5})
    assert explicit["rho_middle"] == pytest.approx(s["rho_middle"]) and explicit["n_never"] == 0


def test_no_sink_and_all_tied():
    s = _spread({})
    assert s["label"] == "no sink" and s["rho_middle"] is None and s["leading_layers"] == ""
    tied = _spread({l: 2 for l in range(2, 12)})
    assert tied["label"] == "no clear order" and tied["p_value"] is None
    # floor layers are not ranked: a sink only in L0/L1 is no sink above the floor
    assert _spread({0: 1, 1: 1})["label"] == "no sink"


def test_spread_is_deterministic_by_seed_and_alpha_is_an_argument():
    on = LO.f2_layer_onset(traj_from_onsets(MIDDLE_OUT))
    a = LO.f2_layer_spread(on, n_permutations=2000, seed=3)
    assert a.equals(LO.f2_layer_spread(on, n_permutations=2000, seed=3))
    p = a.filter(pl.col("onset") == "first")["p_value"][0]
    strict = LO.f2_layer_spread(on, n_permutations=2000, seed=3, alpha=p / 2)
    assert strict.filter(pl.col("onset") == "first")["label"][0] == "no clear order"


# ----------------------------------------------------------------------------------------------
# the published panel


@pytest.fixture(scope="module")
def published() -> dict:
    screens, prs = zip(*(R.import_model(None, m) for m in R.PUBLISHED))
    # the published panel's Holm family, as config/reference-panel.yaml states it: 3 models x 2 onsets
    return all_findings(T.assemble(list(screens), list(prs)), spread_families={"published": list(R.PUBLISHED)})


def _layer(F, model, layer):
    return F["f2_layer_onset"].filter((pl.col("model") == model) & (pl.col("layer") == layer)).row(0, named=True)


def test_published_layer_onsets(published):
    F = published
    assert F["f2_layer_onset"].height == 48
    # OLMoE: L7-L10, L12, L13 at 20B; L2 last (2516B)
    for layer in (7, 8, 9, 10, 12, 13):
        assert _layer(F, "olmoe", layer)["first_tokens"] == 20_000_000_000
    assert _layer(F, "olmoe", 2)["first_revision"] == "step600000-tokens2516B"
    assert _layer(F, "olmoe", 2)["half_revision"] == "step800000-tokens3355B"
    # Pythia: L2, L3 never get a first-token head; the middle/upper layers at step3000 (6.29B)
    for layer in (0, 1, 2, 3):
        assert _layer(F, "pythia1b", layer)["first_revision"] is None
    assert _layer(F, "pythia1b", 7)["first_revision"] == "step3000"
    assert _layer(F, "pythia1b", 10)["half_revision"] == "step3000"
    # OLMo: one isolated L4 head at 10B, then L3/L5 at 117B, everything else at 264B
    assert _layer(F, "olmo", 4)["first_tokens"] == 10_000_000_000
    assert _layer(F, "olmo", 15)["half_revision"] == "step644000-tokens1350B"


def test_published_spread(published):
    """The published panel, under the corrected rule (network middle 7.5, pairwise comparisons,
    Holm over the six spread tests): no model gets a named order. OLMoE's earlier "middle-out"
    (middle 8.5) is top-down at the network middle, and neither beats middle-out paired; only
    OLMoE's 50% onset rejects exchangeability after Holm (p_holm = 0.0498)."""
    sp = published["f2_layer_spread"]
    got = {r["model"]: r for r in sp.filter(pl.col("onset") == "first").iter_rows(named=True)}
    half = {r["model"]: r for r in sp.filter(pl.col("onset") == "half").iter_rows(named=True)}
    assert set(sp["middle_layer"].to_list()) == {7.5}
    assert got["olmoe"]["last_layers"] == "L2"
    assert got["olmoe"]["leading_layers"] == "L7,L8,L9,L10,L12,L13"
    assert got["olmoe"]["rho_middle"] == pytest.approx(0.379, abs=1e-3)
    assert got["olmoe"]["best_order"] == "top-down" and got["olmoe"]["runner_up"] == "middle-out"
    assert got["olmoe"]["p_vs_runner_up"] > 0.05
    assert got["olmoe"]["p_value"] == pytest.approx(0.045, abs=0.005)
    assert got["pythia1b"]["never_layers"] == "L2,L3"
    assert got["pythia1b"]["rho_middle"] == pytest.approx(0.284, abs=1e-3)
    assert got["olmo"]["leading_layers"] == "L4" and got["olmo"]["lead_ratio"] == pytest.approx(11.7)
    assert got["olmo"]["rho_depth"] == pytest.approx(0.579, abs=1e-3)
    assert got["olmo"]["best_order"] == "bottom-up" and got["olmo"]["p_value"] == pytest.approx(0.049, abs=0.003)
    for m in ("olmoe", "olmo", "pythia1b"):
        assert got[m]["label"] == "no clear order" and got[m]["p_holm"] > 0.2
    assert half["olmoe"]["p_holm"] <= 0.05 and half["olmoe"]["p_vs_runner_up"] > 0.05
    assert half["olmoe"]["label"].startswith("onsets are not exchangeable across layers")
    assert half["olmo"]["label"] == half["pythia1b"]["label"] == "no clear order"


def test_a_model_in_two_families_is_an_error():
    """A model belongs to one Holm family at most: in the findings and, earlier, in the config check."""
    import copy
    from pathlib import Path

    import yaml

    from headtrace import experiments
    from headtrace.panel import config as panel
    on = LO.f2_layer_onset(traj_from_onsets(MIDDLE_OUT))
    with pytest.raises(ValueError, match="one family at most"):
        LO.f2_layer_spread(on, families={"x": ["m"], "y": ["m"]})
    root = Path(__file__).resolve().parents[2]
    cfg = experiments.expand_models(copy.deepcopy(yaml.safe_load((root / "config" / "config.yaml").read_text())))
    panel.check(cfg)  # the shipped family passes
    cfg["findings"]["spread_families"]["again"] = ["olmo-1b-0724-published"]
    with pytest.raises(panel.ConfigError, match="one family at most"):
        panel.check(cfg)
