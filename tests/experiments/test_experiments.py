"""Unit tests of headtrace.experiments on hand-built tables (fast, no model training)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from helpers import cross_seed

from headtrace import experiments as E
from headtrace.core import tables
from headtrace.core.tables import CLASS_COLUMNS
from headtrace.probe import synthetic
from headtrace.report import experiment_figures as EF
from headtrace.report import experiment_summary as ES


def test_jaccard():
    assert E.jaccard([(1, 0), (1, 2)], ["L1H0", "L1H2"]) == 1.0
    assert E.jaccard([(1, 0), (1, 2)], [(1, 0)]) == 0.5
    assert E.jaccard([(0, 1)], [(1, 1)]) == 0.0
    assert E.jaccard([(0, 1)], []) == 0.0
    assert math.isnan(E.jaccard([], []))


def _base_config():
    return {"models": {"toy": {"source": "toy", "family": "gpt_neox", "tokens_per_step": 4096,
                               "revisions": ["step0", "step1", "step10", "step100"]}}}


def test_expand_models_seeds_and_shift():
    cfg = _base_config()
    cfg["experiments"] = {"seeds": {"base": "toy", "seeds": [0, 1, 2]},
                          "data_shift": {"base": "toy", "max_steps": 20, "n_checkpoints": 4,
                                         "data": {"kind": "zipf"}}}
    E.expand_models(cfg)
    assert list(cfg["models"]) == ["toy", "toy-seed1", "toy-seed2", "toy-shift"]
    assert cfg["models"]["toy-seed1"]["train"]["seed"] == 1
    assert cfg["models"]["toy-seed1"]["revisions"] == ["step0", "step100"]
    assert cfg["models"]["toy-seed1"]["refine"] == {"enabled": False}  # ends only: nothing to refine
    sh = cfg["models"]["toy-shift"]
    assert sh["train"]["shift_from"] == "toy" and sh["revisions"][0] == "step0" and sh["revisions"][-1] == "step20"
    assert len(sh["revisions"]) == 4
    assert sh["tokens"]["step0"] == 100 * 4096 and sh["tokens"]["step20"] == 120 * 4096
    assert E.seed_models(cfg) == ["toy", "toy-seed1", "toy-seed2"]
    assert E.shift_models(cfg) == ["toy-shift"] and E.shift_pair(cfg) == ("toy", "toy-shift")
    assert [E.model_seed(cfg, m) for m in E.seed_models(cfg)] == [0, 1, 2]
    # the continuation keeps the base's batch (so its tokens a step) unless the shift sets its own
    cfg2 = _base_config()
    cfg2["models"]["toy"].update(tokens_per_step=512, train={"optim": {"batch_size": 4, "lr": 5e-4}})
    cfg2["experiments"] = {"data_shift": {"base": "toy", "max_steps": 20, "n_checkpoints": 2, "optim": {"warmup": 5}}}
    sh2 = E.expand_models(cfg2)["models"]["toy-shift"]
    assert sh2["train"]["optim"] == {"batch_size": 4, "lr": 5e-4, "warmup": 5}
    assert sh2["tokens"]["step20"] == 100 * 512 + 20 * 512
    # idempotent, explicit specs win
    before = repr(cfg["models"])
    E.expand_models(cfg)
    assert repr(cfg["models"]) == before


@pytest.mark.parametrize("chosen, expect", [
    (["step0", "step10", "step100"], ["step0", "step10", "step100"]),
    ("all", ["step0", "step1", "step10", "step100"]),
    (["step0", "step1"], "end with the final revision of 'toy', 'step100'"),
    (["step10", "step0", "step100"], "list them in the training order of 'toy'"),
    (["step0", "step5", "step100"], "['step5'] are not revisions of 'toy'"),
])
def test_seed_models_take_a_chosen_subset_of_the_base_s_revisions(chosen, expect):
    cfg = _base_config()
    cfg["experiments"] = {"seeds": {"base": "toy", "seeds": [1], "revisions": chosen}}
    if isinstance(expect, str):
        with pytest.raises(ValueError, match=expect.replace("[", r"\[").replace("]", r"\]")):
            E.expand_models(cfg)
        return
    spec = E.expand_models(cfg)["models"]["toy-seed1"]
    assert spec["revisions"] == expect
    assert spec.get("refine") == (None if chosen == "all" else {"enabled": False})


def test_derived_models_follow_a_phased_token_axis():
    """A base toy whose curriculum trains on fewer tokens a step: its seed models keep the derived
    tokens_schedule, and the continuation's tokens start from the base's final tokens."""
    from headtrace.panel import config as panel

    cfg = {"models": {"toy": {"source": "toy", "family": "gpt_neox", "revisions": ["step0", "step10", "step100"],
                              "train": {"optim": {"batch_size": 4, "seq_len": 128}, "curriculum": [
                                  {"until": 10, "seq_len": 32, "batch_size": 2,
                                   "data": {"kind": "repeat", "token_low": 32, "token_high": 127,
                                            "repeat_min": 4, "repeat_max": 15, "n_copies": "fill"}}]}}},
           "experiments": {"seeds": {"base": "toy", "seeds": [0, 1]},
                           "data_shift": {"base": "toy", "max_steps": 20, "n_checkpoints": 2}},
           "probe": {"token_range": [32, 127], "seq_len": 128, "ab_range": [64, 108]}}  # inside the toy vocabulary
    panel.derive_toy_tokens(cfg)
    E.expand_models(cfg)
    final = 10 * 64 + 90 * 512
    assert panel.cell_tokens(cfg, "toy", "step100") == final
    assert panel.cell_tokens(cfg, "toy-seed1", "step100") == final
    sh = cfg["models"]["toy-shift"]
    assert "tokens_schedule" not in sh and "tokens_per_step" not in sh
    assert [panel.cell_tokens(cfg, "toy-shift", r) for r in sh["revisions"]] == [final, final + 20 * 512]
    panel.check(cfg)


def test_expand_models_off_and_bad_base():
    cfg = _base_config()
    assert E.expand_models(cfg)["models"].keys() == {"toy"}
    assert E.seed_models(cfg) == [] and E.shift_pair(cfg) is None
    cfg["experiments"] = {"seeds": {"base": "nope", "seeds": [1]}}
    with pytest.raises(ValueError, match="nope"):
        E.expand_models(cfg)


def test_shift_train_kwargs_merges_defaults():
    defaults = {"arch": {"n_layers": 2}, "data": {"kind": "repeat", "token_low": 32, "token_high": 127},
                "optim": {"lr": 1e-3, "warmup": 100}, "max_steps": 1000}
    kw = E.shift_train_kwargs("gpt_neox", {"shift_from": "x", "data": {"kind": "zipf"}, "optim": {"warmup": 0},
                                           "max_steps": 20, "seed": 3},
                              ["step0", "step5", "step20"], "/ckpt/step1000", defaults=defaults)
    assert kw["data"] == {"kind": "zipf", "token_low": 32, "token_high": 127}
    assert kw["optim"] == {"lr": 1e-3, "warmup": 0}
    assert kw["checkpoint_steps"] == [0, 5, 20] and kw["max_steps"] == 20 and kw["seed"] == 3
    assert kw["init_from"] == "/ckpt/step1000"
    assert defaults["optim"]["warmup"] == 100  # not mutated


def test_cross_seed_conditions_and_table():
    circuits = {"a": [(1, 0), (1, 1)], "b": [(1, 2)]}
    conds = E.cross_seed_conditions(circuits, n_heads_per_layer=4, n_random=3, seed=0, exact_max=10)
    names = [c.name for c in conds]
    # the reference sets in a 4-head layer: a's 2 heads are one of C(4, 2) = 6 pairs, b's head one of 4
    assert names[0] == "baseline" and names.count("random:a") == 6 and names.count("random:b") == 4
    assert ((1, 0), (1, 1)) in {c.heads for c in conds if c.name == "random:a"}
    assert all(c.exact for c in conds if c.name.startswith("random:"))
    # without exact_max, 3 uniform draws of each
    sampled = E.cross_seed_conditions(circuits, n_heads_per_layer=4, n_random=3, seed=0)
    assert [c.name for c in sampled].count("random:a") == 3 and not any(c.exact for c in sampled if c.draw)
    # fake results: baseline 0.5; own circuit a kills (0.0); b does nothing (0.5); other sets 0.4 / 0.45, and
    # a set equal to a circuit does what the circuit does
    top1 = {"baseline": 0.5, "circuit:a": 0.0, "circuit:b": 0.5, "random:a": 0.4, "random:b": 0.45}
    own = {f"random:{k}": tuple(v) for k, v in circuits.items()}
    results = [{"name": c.name, "draw": c.draw, "heads": c.heads, "n_sets": c.n_sets, "exact": c.exact,
                "top1": top1["circuit:" + c.name.split(":")[1]] if own.get(c.name) == c.heads else top1[c.name]}
               for c in conds]
    df = E.cross_seed_table(results, circuits, "a", {"a": 0, "b": 1})
    tables.conform(df, "cross_seed_model")
    ra = df.filter(pl.col("circuit_model") == "a").row(0, named=True)
    rb = df.filter(pl.col("circuit_model") == "b").row(0, named=True)
    # a's six sets drop 0.5 (itself) and 0.1 (the five others): mean 1/6, excess 0.5 - 1/6
    assert ra["top1_drop"] == pytest.approx(0.5) and ra["top1_drop_vs_random"] == pytest.approx(0.5 - 1 / 6)
    # the circuit's exact rank among its 6 sets
    assert ra["jaccard"] == 1.0 and ra["same_seed"] and ra["p_value"] == pytest.approx(1 / 6) and ra["control_exact"]
    assert ra["n_candidates"] is None
    df4 = E.cross_seed_table(results, circuits, "a", {"a": 0, "b": 1}, n_heads_per_layer=4)
    assert df4["n_candidates"].to_list() == [4, 4]
    assert rb["top1_drop"] == 0 and rb["top1_drop_vs_random"] == pytest.approx(-0.0375) and rb["jaccard"] == 0
    rows, cols, m = E.cross_seed_matrix(df)
    assert rows == [0, 1] and cols == [0] and m[0, 0] == pytest.approx(0.5 - 1 / 6)


def test_cross_seed_empty_circuit():
    circuits = {"a": [], "b": [(0, 1)]}
    conds = E.cross_seed_conditions(circuits, 2, 2, 0)
    assert [c.name for c in conds].count("random:a") == 0
    results = [{"name": c.name, "top1": 0.3} for c in conds]
    df = E.cross_seed_table(results, circuits, "b", {"a": 0, "b": 1})
    r = df.filter(pl.col("circuit_model") == "a").row(0, named=True)
    assert r["top1_drop"] == 0 and r["top1_drop_vs_random"] == 0 and math.isnan(r["p_value"])


def _traj(model, revs, circuits, n_layers=2, n_heads=2, pr=1.0):
    rows = []
    for (rev, tok), circ in zip(revs, circuits):
        for l in range(n_layers):
            for h in range(n_heads):
                rows.append({"model": model, "revision": rev, "tokens": tok, "layer": l, "head": h,
                             "sel_induction": 80.0 if (l, h) in circ else 2.0, "pr": pr,
                             "in_induction_circuit": (l, h) in circ})
    return pl.DataFrame(rows)


def test_data_shift_table():
    base = _traj("b", [("step0", 0), ("step100", 1000)], [set(), {(1, 0), (1, 1)}])
    shifted = _traj("b-shift", [("step0", 0), ("step10", 100)], [{(1, 0), (1, 1)}, {(1, 0)}])
    df = E.data_shift_table(base, shifted)
    tables.conform(df, "data_shift")
    assert df["phase"].to_list() == ["before", "before", "after", "after"]
    assert df["tokens"].to_list() == [0, 1000, 1000, 1100]
    assert df["jaccard_to_pre_shift"].to_list()[1:] == [1.0, 1.0, 0.5]
    assert df["jaccard_to_pre_shift"][0] == 0.0
    # the pre-shift circuit fills layer 1 (2 heads): any circuit in that layer shares what it can, so every
    # Jaccard here is the one placement within the layers forces (chance = observed, P = 1)
    assert df["jaccard_chance"].to_list() == [0.0, 1.0, 1.0, 0.5] and df["jaccard_p_value"].to_list() == [1.0] * 4
    heads = E.data_shift_heads(base, shifted)
    assert heads.height == 16 and heads.filter(pl.col("in_pre_shift_circuit")).height == 8
    assert heads.filter(pl.col("phase") == "after")["tokens"].max() == 1100
    # cumulative tokens on the shift model are kept as they are
    cum = _traj("b-shift", [("step0", 1000), ("step10", 1100)], [{(1, 0), (1, 1)}, {(1, 0)}])
    df2 = E.data_shift_table(base, cum)
    assert df2["tokens"].to_list() == [0, 1000, 1000, 1100]
    assert df2["tokens_since_shift"].to_list()[2:] == [0, 100]



def _shift_verdicts(rows):
    """Verdict rows of the induction and previous-token circuits: (model, revision, baseline top-1,
    circuit top-1, previous-token top-1, previous-token effect interval), 100 sequences, one probe."""
    out = []
    for model, rev, base, circ, prev, (lo, hi) in rows:
        common = {"model": model, "revision": rev, "baseline_top1": base, "baseline_value": base, "metric": "top1",
                  "n_sequences": 100, "ablation_probe": "held_out", "ablation_probe_sha256": "abc"}
        out.append({**common, "circuit": "circuit", "n_heads": 2, "ablated_top1": circ, "effect": base - circ,
                    "effect_lo": base - circ - 0.05, "effect_hi": base - circ + 0.05, "verdict": "underpowered"})
        out.append({**common, "circuit": "previous_token_circuit", "n_heads": 1 if prev is not None else 0,
                    "ablated_top1": base if prev is None else prev, "effect": 0.0 if prev is None else base - prev,
                    "effect_lo": lo, "effect_hi": hi, "verdict": "not_causal"})
    return pl.DataFrame(out)


def _shift_pair():
    base = _traj("b", [("step0", 0), ("step100", 1000)], [set(), {(1, 0), (1, 1)}])
    shifted = _traj("b-shift", [("step0", 0), ("step10", 100)], [{(1, 0), (1, 1)}, {(1, 0), (1, 1)}])
    return base, shifted


def test_data_shift_behaviour_beside_the_heads():
    base, shifted = _shift_pair()
    v = _shift_verdicts([("b", "step0", 0.0, 0.0, None, (0.0, 0.0)), ("b", "step100", 0.5, 0.1, None, (0.0, 0.0)),
                         ("b-shift", "step0", 0.5, 0.1, None, (0.0, 0.0)),
                         ("b-shift", "step10", 0.2, 0.0, 0.3, (-0.15, -0.05))])
    df = tables.conform(E.data_shift_table(base, shifted, verdicts=v), "data_shift")
    last_before, end = df.row(1, named=True), df.row(3, named=True)
    # Wilson 95% of 50/100: 0.5 +- 1.96 sqrt(0.0025 + z^2/40000) / (1 + z^2/100) = [0.40383, 0.59617]
    assert last_before["baseline_top1_lo"] == pytest.approx(0.40383, abs=1e-5)
    assert last_before["baseline_top1_hi"] == pytest.approx(0.59617, abs=1e-5)
    # 20/100: centre (0.2 + z^2/200) / (1 + z^2/100) = 0.21110, half-width 0.07773
    assert (end["baseline_top1_lo"], end["baseline_top1_hi"]) == (pytest.approx(0.13337, abs=1e-5),
                                                                   pytest.approx(0.28883, abs=1e-5))
    assert end["circuit_ablated_top1"] == 0.0 and end["previous_token_ablated_top1"] == 0.3
    assert end["previous_token_n_heads"] == 1 and end["previous_token_effect_hi"] == -0.05
    assert last_before["previous_token_n_heads"] == 0
    assert E.behaviour_change(last_before, end) == "fell" and E.behaviour_change(end, last_before) == "rose"
    assert E.behaviour_change(last_before, last_before) == "overlap"
    assert E.behaviour_change(last_before, {"baseline_top1": None}) is None
    text = ES.data_shift_paragraph(df)
    # the shift run's step0 is the base's final weights: no post-shift observation
    assert "1 post-shift checkpoint;" in text and "minimum" not in text
    assert "50.00% [40.3%, 59.7%] at the last pre-shift checkpoint (step100)" in text  # outward to 0.1 pp
    assert "20.00% [13.3%, 28.9%] at the end (step10)" in text
    assert "on the same 100 held-out probe sequences before and after" in text
    assert "ablating the previous-token circuit (1 heads) takes top-1 to 30.00%" in text and "*raises* top-1" in text
    # the same heads, but placement within the layers gives that overlap by chance: survival not shown
    assert "What survives the shift: the pre-shift circuit heads' induction selectivity (80× → 80×" in text
    assert "Whether the heads survived is not shown: they are the same heads, but placement within the layers" in text
    # the decision is the table's (heads_overlap_by_chance): a smaller P comes with it decided otherwise
    beyond = ES.data_shift_paragraph(df.with_columns(jaccard_p_value=pl.lit(0.001), heads_overlap_by_chance=pl.lit(False)))
    assert "What survives the shift: the same heads and their induction selectivity (80× → 80×" in beyond
    assert ("What does not: the behaviour (top-1 on B from 50.00% to 20.00%, the intervals apart; and ablating the "
            "previous-token circuit now raises top-1)") in text
    assert "The circuit survives the shift" not in text


def test_data_shift_behaviour_overlap_lost_heads_and_unmeasured():
    base, _ = _shift_pair()
    shifted = _traj("b-shift", [("step0", 0), ("step10", 100)], [{(1, 0), (1, 1)}, {(1, 0)}])
    v = _shift_verdicts([("b", "step100", 0.5, 0.1, None, (0.0, 0.0)), ("b-shift", "step10", 0.45, 0.1, None, (0, 0))])
    df = E.data_shift_table(base, shifted, verdicts=v)
    assert df.filter(pl.col("revision") == "step0")["baseline_top1"].null_count() == 2  # no verdict rows: null
    text = ES.data_shift_paragraph(df)
    # 45/100 against 50/100: the intervals overlap, so no change is shown; the lost head and the heads' mean
    # selectivity, (80 + 2) / 2 = 41x, below the threshold, are said
    assert ("What survives the shift: the behaviour (top-1 on B from 50.00% to 45.00%, within overlapping "
            "intervals: no change shown)") in text
    assert ("What does not: the circuit's heads (Jaccard 0.50 at the end); their induction selectivity "
            "(80× → 41×, below the 50× threshold)") in text
    assert "raises" not in text
    plain = ES.data_shift_paragraph(E.data_shift_table(base, shifted))  # no ablation ran
    assert "The behaviour was not measured" in plain and "Whether the behaviour survives is not measured" in plain
    assert E.data_shift_table(base, shifted)["baseline_top1"].null_count() == 4

def _verdict(model, rows):
    out = []
    for rev, tok, base, abl, rnd, causal in rows:
        out.append({"model": model, "revision": rev, "tokens": tok, "circuit": "previous_token_circuit",
                    "n_heads": 2, "heads": ["L0H0", "L0H1"], "baseline_top1": base, "ablated_top1": abl,
                    "effect": base - abl, "random_effect_mean": base - rnd, "effect_vs_random": 0.0,
                    "p_value": 0.05, "upper_bound_top1": 0.0, "upper_bound_saturates": True,
                    "causal": causal, "random_top1_mean": rnd})
        out.append({**out[-1], "circuit": "circuit"})
    return pl.DataFrame(out)


def test_composition_onset():
    v = _verdict("m", [("step0", 0, 0.01, 0.0, 0.01, True),  # causal but no induction yet: ignored
                       ("step10", 10, 0.3, 0.0, 0.3, True),
                       ("step20", 20, 0.3, 0.25, 0.3, False),
                       ("step30", 30, 0.5, 0.0, 0.5, True),
                       ("step40", 40, 0.6, 0.0, 0.6, True)])
    df = E.composition_table(v, 1 / 95, min_baseline_ratio=10)  # induction present at >= 10.5 %
    tables.conform(df, "composition")
    assert df.height == 5
    assert df["destroys_induction"].to_list() == [False, True, False, True, True]
    r = df.row(0, named=True)
    assert r["onset_revision"] == "step10" and r["onset_tokens"] == 10
    assert r["sustained_onset_revision"] == "step30" and r["sustained_onset_tokens"] == 30
    never = E.composition_table(_verdict("n", [("step0", 0, 0.3, 0.3, 0.3, False)]), 1 / 95)
    assert never["onset_revision"][0] is None and never["sustained_onset_revision"][0] is None
    assert df["copy_null_top1"].is_null().all() and df["above_copy_null"].is_null().all()  # not recorded: not applied


def test_sign_test_known_answers():
    assert E.sign_test_p(0, 0) == 1.0
    assert E.sign_test_p(5, 0) == pytest.approx(1 / 32)
    assert E.sign_test_p(4, 0) == pytest.approx(1 / 16)  # 4 hits alone cannot reach 0.05
    assert E.sign_test_p(3, 3) == pytest.approx(42 / 64)
    assert E.sign_test_p(0, 7) == 1.0
    assert E.sign_test_p(20, 8) == pytest.approx(0.01785, abs=1e-4)  # sum C(28,k), k >= 20, / 2^28


def test_composition_against_the_measured_copying_null():
    """Issue 28: a model that copies context tokens blindly hits B about as often as any matched
    context token, ~1/253 on the paper probe, so 10x chance (0.1%) is no evidence of A -> B use.
    Induction is present only where B beats the measured shuffled-B control by the exact sign test
    (and the old 10x-chance rule still holds)."""
    lo, hi = E.wilson_interval(0.01, 2000)
    assert lo == pytest.approx(0.0065, abs=2e-4) and hi == pytest.approx(0.0154, abs=2e-4)
    v = _verdict("olmo", [("a", 1, 0.0100, 0.0005, 0.022, True),   # B 20 of 2000, control 8: p = 0.018
                          ("b", 2, 0.0050, 0.0, 0.005, True),     # B 10, control 8: a blind copier
                          ("c", 3, 0.0030, 0.0, 0.003, True),     # B 6, control 0: p = 1/64
                          ("d", 4, 0.0050, 0.0, 0.005, True)])    # not recorded: old rule only
    twice = lambda xs: pl.Series([x for x in xs for _ in range(2)], dtype=pl.Float64)  # noqa: E731 (both circuits)
    v = v.with_columns(n_sequences=pl.lit(2000, pl.Int32),
                       baseline_top1_control=twice([0.004, 0.004, 0.0, None]),
                       baseline_top1_context=twice([0.30, 0.31, 0.02, None]))
    df = E.composition_table(v, 1 / 9900, alpha=0.05)
    tables.conform(df, "composition")
    assert df["copy_null_p"][:3].to_list() == pytest.approx([E.sign_test_p(20, 8), E.sign_test_p(10, 8),
                                                            1 / 64])
    assert df["above_copy_null"].to_list() == [True, False, True, None]
    assert df["induction_present"].to_list() == [True, False, True, True]
    assert df["destroys_induction"].to_list() == [True, False, True, True]
    assert df["copy_other_top1"][:3].to_list() == [0.30, 0.31, 0.02]
    r = df.row(0, named=True)
    assert r["copy_null_lo"] < 0.004 < r["copy_null_hi"] and r["baseline_top1_lo"] < 0.01 < r["baseline_top1_hi"]
    strict = E.composition_table(v, 1 / 9900, alpha=0.01)  # the level is the run's alpha
    assert strict["above_copy_null"].to_list() == [False, False, False, None]


def test_shuffle_batch_keeps_query_and_labels():
    b = synthetic.make_batch(n_sequences=8, seq_len=64, token_range=(2, 50), ab_range=(10, 40), seed=1)
    s = E.shuffle_batch(b, seed=0)
    assert (s.tokens[:, -1] == b.tokens[:, -1]).all()
    assert (np.sort(s.tokens, axis=1) == np.sort(b.tokens, axis=1)).all()
    assert not (s.tokens == b.tokens).all()
    assert (s.ab == b.ab).all() and (s.target == b.target).all()
    assert (E.shuffle_batch(b, seed=0).tokens == s.tokens).all()
    kept = E.shuffle_batch(b, seed=0, keep_first=True)
    assert (kept.tokens[:, 0] == b.tokens[:, 0]).all()


def _screen(model, rev, tok, sels, classification=None):
    """sels: list over heads of dicts class->selectivity (missing = 1.0)."""
    rows = []
    for i, s in enumerate(sels):
        row = {"model": model, "revision": rev, "tokens": tok, "layer": i // 2, "head": i % 2,
               **{f"sel_{c}": float(s.get(c, 1.0)) for c in CLASS_COLUMNS},
               "classification": (classification or ["unclassified"] * len(sels))[i]}
        rows.append(row)
    return pl.DataFrame(rows)


def test_floors_and_noise_floor_table():
    init = _screen("m", "step0", 0, [{"induction": v, "self": v} for v in (1.0, 2.0, 3.0, 4.0, 5.0)])
    shuffled = _screen("m", "step9", 9, [{"induction": 10.0, "self": 1000.0}])
    null = E.null_samples(init, shuffled)
    # shuffled contributes only to the content classes
    assert null.filter(pl.col("null") == "shuffled")["class"].unique().sort().to_list() == ["duplicate_token", "induction"]
    fl = E.floors(null, quantile=0.5)
    tables.conform(fl, "noise_floor_null")
    get = {(r["class"], r["null"]): r["floor"] for r in fl.iter_rows(named=True)}
    assert get[("induction", "init")] == 3.0 and get[("induction", "shuffled")] == 10.0
    assert get[("induction", "combined")] == 10.0 and get[("self", "combined")] == 3.0
    final = _screen("m", "step9", 9, [{"induction": 50.0}, {"self": 4.0}, {"induction": 5.0}, {}],
                    classification=["induction", "unclassified", "unclassified", "unclassified"])
    nf = E.noise_floor_table(pl.concat([init, final], how="diagonal_relaxed"), fl)
    tables.conform(nf, "noise_floor")
    row = {(r["revision"], r["class"]): r for r in nf.iter_rows(named=True)}
    assert row[("step9", "induction")]["n_above"] == 1 and row[("step9", "induction")]["n_classified"] == 1
    assert row[("step9", "self")]["n_above"] == 1
    assert row[("step9", "any")]["n_above"] == 2 and row[("step9", "any")]["fraction_above"] == 0.5
    assert row[("step9", "any")]["n_classified"] == 1
    assert row[("step0", "self")]["n_above"] == 2  # 4 and 5 > median 3


def test_resolve_revisions():
    assert E.resolve_revisions(["first", "final", "step5", "x"], ["step0", "step5", "step9"]) == ["step0", "step9", "step5"]


def test_figures_and_summary(tmp_path):
    cs = E.seed_specificity(pl.concat(cross_seed.per_model().values()))  # as the cross_seed_table job writes it
    EF.plot_cross_seed(cs, tmp_path / "cs.png")
    base = _traj("b", [("step0", 0), ("step100", 1000)], [set(), {(1, 0)}])
    shifted = _traj("b-shift", [("step0", 0), ("step10", 100)], [{(1, 0)}, {(1, 0)}])
    ds, dh = E.data_shift_table(base, shifted), E.data_shift_heads(base, shifted)
    EF.plot_data_shift(dh, ds, tmp_path / "ds.png")
    measured = _verdict("m", [("step0", 0, 0.01, 0.0, 0.01, False), ("step10", 10, 0.3, 0.0, 0.3, True)])
    measured = measured.with_columns(n_sequences=pl.lit(200, pl.Int32), baseline_top1_control=pl.lit(0.02),
                                     baseline_top1_context=pl.lit(0.5))
    comp = E.composition_table(measured, {"m": 1 / 95})
    EF.plot_composition(comp, tmp_path / "comp.png")
    init = _screen("m", "step0", 0, [{"induction": 1.0}, {"induction": 2.0}])
    fl = E.floors(E.null_samples(init, None))
    nf = E.noise_floor_table(pl.concat([init, _screen("m", "step9", 9, [{"induction": 60.0}, {}],
                                                      ["induction", "unclassified"])]), fl)
    EF.plot_noise_floor(nf, tmp_path / "nf.png")
    for f in ("cs", "ds", "comp", "nf"):
        assert (tmp_path / f"{f}.png").stat().st_size > 1000
    text = ES.summary_markdown(cs, ds, comp, nf)
    for word in ("Seed specificity", "Data shift", "Composition", "noise floor"):
        assert word in text
    assert "seed 0: L1H0" in text and "from step10" in text
    assert ("at step10: top-1 B 30.00% vs its shuffled-B control 2.00%, sign test p = 3.7e-14; another context "
            "token 50.00%") in text
    assert ES.summary_markdown().startswith("## Method experiments")


# The workflow's experiment paths (common.smk's PATHS), as the workflow passes them.
PATHS = {f"exp_{k}": f"results/experiments/{k}.parquet" for k in E.EXPERIMENTS}
PATHS |= {"exp_summary": "results/experiments/summary.md", "exp_figure": "results/experiments/figures/exp_{name}.png"}


def test_targets_and_cells():
    cfg = _base_config()
    assert E.targets(cfg, True, ["toy"], PATHS) == []  # a minimal panel runs the recipe only
    cfg["experiments"] = {"composition": {"enabled": True}}
    assert E.targets(cfg, True, ["toy"], PATHS)[-1] == PATHS["exp_summary"]
    cfg["experiments"] = {"seeds": {"base": "toy", "seeds": [1]},
                          "data_shift": {"base": "toy", "max_steps": 10, "n_checkpoints": 3},
                          "composition": {"enabled": True}, "noise_floor": {"enabled": True}}
    E.expand_models(cfg)
    run = list(cfg["models"])
    t = E.targets(cfg, True, run, PATHS)
    assert set(PATHS[f"exp_{k}"] for k in ("cross_seed", "data_shift", "composition", "noise_floor", "summary")) <= set(t)
    assert {PATHS["exp_figure"].format(name=n) for n in E.EXPERIMENTS} <= set(t)
    assert E.noise_floor_models(cfg, run) == ["toy", "toy-seed1"]
    assert E.shuffled_cells(cfg, run) == [("toy", "step0"), ("toy", "step100"), ("toy-seed1", "step0"),
                                          ("toy-seed1", "step100")]
    assert PATHS["exp_composition"] not in E.targets(cfg, False, run, PATHS)
    cfg["experiments"]["enabled"] = False
    assert E.targets(cfg, True, run, PATHS) == []


# ---- end to end: the experiment rules on a tiny panel ----

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_experiment_rules_end_to_end(tmp_path, warm_jobs):
    import yaml

    cfg = {
        "models": {"tiny": {"source": "toy", "family": "gpt_neox", "tokens_per_step": 512,
                            "revisions": ["step0", "step3", "step8"],
                            "train": {"arch": {"n_layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64},
                                      "optim": {"batch_size": 4, "seq_len": 128, "warmup": 2}}}},
        "probe": {"n_sequences": 16, "seq_len": 64, "token_range": [32, 127], "ab_range": [20, 50]},
        "capture": {"device": "cpu", "batch_size": 16},
        "ablation": {"n_random": 2, "batch_size": 16},
        "experiments": {"n_random": 2, "seeds": {"base": "tiny", "seeds": [0, 1]},
                        "data_shift": {"base": "tiny", "max_steps": 4, "n_checkpoints": 3},
                        "composition": {"enabled": True}, "noise_floor": {"enabled": True}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    snakemake = str(Path(sys.executable).parent / "snakemake")
    proc = subprocess.run([snakemake, "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "--cores", "2"], capture_output=True, text=True,
                          env=warm_jobs)
    assert proc.returncode == 0, proc.stderr[-6000:]
    exp = tmp_path / "results" / "experiments"
    for name in ("cross_seed_ablation", "data_shift", "composition", "noise_floor"):
        df = pl.read_parquet(exp / f"{name}.parquet")
        tables.conform(df, name)
        assert df.height > 0
        assert (exp / "figures" / f"exp_{name.replace('_ablation', '')}.png").exists()
    cs = pl.read_parquet(exp / "cross_seed_ablation.parquet")
    assert sorted(zip(cs["circuit_seed"], cs["model_seed"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    ds = pl.read_parquet(exp / "data_shift.parquet")
    assert ds["phase"].to_list() == ["before"] * 3 + ["after"] * 3
    # the behaviour beside the heads, from both models' verdict tables: one probe draw, before and after
    assert ds["baseline_top1"].is_not_null().all() and ds["baseline_top1_lo"].is_not_null().all()
    assert ds["ablation_probe_sha256"].n_unique() == 1
    assert "Behaviour, on the same " in (exp / "summary.md").read_text()
    # prefix matching and copying beside every circuit (measures findings), on both pages
    res = tmp_path / "results" / "findings"
    tables.conform(pl.read_parquet(res / "measures" / "measures_circuit_copying.parquet"), "measures_circuit_copying")
    assert "## Prefix matching and copying of the induction circuit" in (res / "summary.md").read_text()
    assert '<section id="copying">' in (res / "summary.html").read_text()
    cell = pl.read_parquet(tmp_path / "results" / "cells" / "tiny" / "step8" / "measures.parquet")
    assert cell["copying_eigenvalue_ratio"].is_not_null().all()
    comp = pl.read_parquet(exp / "composition.parquet")  # the copying null, measured by the ablation jobs
    assert comp["copy_null_p"].is_not_null().all() and comp["copy_other_top1"].is_not_null().all()
    assert (comp["n_sequences"] == 16).all()
    assert (tmp_path / "resources" / "checkpoints" / "tiny-shift" / "step4").is_dir()
    assert "Method experiments" in (exp / "summary.md").read_text()
