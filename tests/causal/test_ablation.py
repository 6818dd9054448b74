"""Causal group ablation: batched engine == naive engine, controls, hand-built models, verdict."""
from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
import torch
import transformers
from helpers.ablation import boosted, engine_conditions, small_batch
from naive_ablation import run_naive

from headtrace.causal.conditions import size_profile
from headtrace.core.heads import as_heads
from tiny import FAMILY_NAMES, tiny_model

from headtrace.causal import ablation, conditions
from headtrace.causal import verdict as V
from headtrace.causal.ablation import Condition
from headtrace.core import metrics, tables
from headtrace.models import families
from headtrace.probe import synthetic

METRICS = ablation.METRICS


def assert_same(fast, naive, atol=1e-5):
    key = [(r["name"], r["draw"], r["heads"], r.get("method")) for r in fast]
    assert key == [(r["name"], r["draw"], r["heads"], r.get("method")) for r in naive]
    for a, b in zip(fast, naive):
        for m in METRICS:
            assert a[m] == pytest.approx(b[m], abs=atol), (a["name"], a["heads"], m)


# ------------------------------------------------------------------------------ engine


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_batched_equals_naive(family):
    model, fam, batch = boosted(family), families.get(family), small_batch()
    conds = engine_conditions()
    # batch_size 4 leaves a ragged last chunk; max_rows 8 stacks 2 conditions per branch call.
    # both ablation methods (mean: every head's mean output over the batch) and the copy-null batch
    fast = ablation.run(model, fam, batch, conds, batch_size=4, max_rows=8, progress=False, methods=("zero", "mean"))
    naive = run_naive(model, fam, batch, conds, batch_size=4, methods=("zero", "mean"))
    assert_same(fast, naive)
    zero, mean = fast[:len(conds) + 1], fast[len(conds) + 1:]
    base = zero[0]
    assert zero[-2]["ce"] == base["ce"] == mean[-2]["ce"]  # empty = baseline, by either method
    assert zero[-1]["name"] == ablation.COPY_NULL and abs(zero[-1]["ce"] - base["ce"]) > 1e-4  # B replaced
    assert any(abs(r["ce"] - base["ce"]) > 1e-3 for r in zero[1:-2])  # the ablations did something
    assert any(abs(a["ce"] - b["ce"]) > 1e-3 for a, b in zip(zero[1:-2], mean[1:-2]))  # mean is not zero
    # stacking all conditions in one call gives the same numbers
    one_call = ablation.run(model, fam, batch, conds, batch_size=6, max_rows=1000, progress=False,
                            methods=("zero", "mean"))
    assert_same(one_call, naive)


def test_batched_equals_naive_with_yarn_on_olmo3_full_layers():
    """Olmo 3 after its long-context stage (config/suites/olmo3.yaml's last revision): YaRN rotary with
    scaled scores on the full-attention layers, the plain one on the windowed layers."""
    model = tiny_model("olmo3", n_layers=3, yarn=True)
    assert model.model.rotary_emb.rope_type == {"full_attention": "yarn", "sliding_attention": "default"}
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(8.0)
    fam, batch, conds = families.get("olmo3"), small_batch(), engine_conditions()
    assert_same(ablation.run(model, fam, batch, conds, batch_size=4, max_rows=8, progress=False),
                run_naive(model, fam, batch, conds, batch_size=4))


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_head_with_zero_out_proj_slice_changes_nothing(family):
    model, fam, batch = boosted(family), families.get(family), small_batch()
    _, n_heads, d_head = families.dims(model)
    layer, head = 1, 2
    with torch.no_grad():
        w = fam.out_projs(model)[layer].weight  # nn.Linear (out, in); GPT-2's Conv1D (in, out)
        w = w.T if family == "gpt2" else w
        w[:, head * d_head:(head + 1) * d_head] = 0
    conds = [Condition("baseline"), Condition("dead", 0, ((layer, head),)), Condition("live", 0, ((layer, 0),))]
    res = ablation.run(model, fam, batch, conds, batch_size=6, progress=False)
    for m in METRICS:
        assert res[1][m] == pytest.approx(res[0][m], abs=1e-6)
    assert abs(res[2]["ce"] - res[0]["ce"]) > 1e-4


def copy_task_model(vocab=32, markers=16, d_model=64, n_heads=2):
    """2-layer GPT-NeoX where only L1H1 carries the task: attend to the one marker token
    (ids >= markers) in the sequence and copy it to the output. Every other weight is zero."""
    cfg = transformers.GPTNeoXConfig(vocab_size=vocab, hidden_size=d_model, num_hidden_layers=2,
                                     num_attention_heads=n_heads, intermediate_size=2 * d_model,
                                     max_position_embeddings=64, rotary_pct=0.25, use_parallel_residual=True,
                                     bos_token_id=0, eos_token_id=1, pad_token_id=1, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(cfg).eval()
    dh = d_model // n_heads
    n_markers = vocab - markers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layernorm" in name or "layer_norm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                p.zero_()
        model.gpt_neox.embed_in.weight[:, :vocab] = 10 * torch.eye(vocab)
        att = model.gpt_neox.layers[1].attention
        qkv, dense = att.query_key_value, att.dense
        base = 1 * 3 * dh  # head 1's rows: q, k, v blocks of dh each
        qk_dim = dh - 1  # outside the rotary dims
        qkv.bias[base + qk_dim] = 10.0  # constant query
        qkv.weight[base + dh + qk_dim, markers:vocab] = 10.0  # key: "is a marker"
        for j in range(n_markers):
            qkv.weight[base + 2 * dh + j, markers + j] = 1.0  # value: which marker
            dense.weight[vocab + j, 1 * dh + j] = 10.0  # output subspace
        model.get_output_embeddings().weight[markers:vocab, vocab:vocab + n_markers] = 10 * torch.eye(n_markers)
    return model, markers


def copy_task_batch(n=24, seq_len=20, vocab=32, markers=16, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(2, markers, size=(n, seq_len))
    pos = rng.integers(0, seq_len - 1, size=n)
    target = rng.integers(markers, vocab, size=n)
    tokens[np.arange(n), pos] = target
    return synthetic.ProbeBatch(tokens=tokens.astype(np.int64), ab=pos.astype(np.int64), target=target.astype(np.int64),
                                valid=np.ones(n, bool))


def test_single_head_carrying_the_task_loses_it():
    model, markers = copy_task_model()
    fam, batch = families.get("gpt_neox"), copy_task_batch()
    conds = [Condition("baseline"), Condition("carrier", 0, ((1, 1),)), Condition("other", 0, ((1, 0),)),
             Condition("layer0", 0, ((0, 0), (0, 1)))]
    res = {r["name"]: r for r in ablation.run(model, fam, batch, conds, batch_size=8, max_rows=16, progress=False)}
    assert res["baseline"]["top1"] == 1.0
    assert res["carrier"]["top1"] == 0.0
    assert res["carrier"]["ce"] > res["baseline"]["ce"] + 1.0
    assert res["carrier"]["logit_b"] < res["baseline"]["logit_b"]
    for other in ("other", "layer0"):
        assert res[other]["top1"] == 1.0
        assert res[other]["ce"] == pytest.approx(res["baseline"]["ce"], abs=1e-5)
    assert_same(list(res.values()), run_naive(model, fam, batch, conds, batch_size=8))


def test_copy_metrics_known_answers():
    """top1_control: the top-1 is the row's control token; top1_context: the top-1 is a token of
    the row's sequence other than B."""
    logits = torch.full((4, 10), -5.0)
    for row, top in enumerate((3, 7, 4, 9)):
        logits[row, top] = 5.0
    target = torch.tensor([3, 3, 3, 3])  # B
    control = torch.tensor([7, 7, -1, 2])
    context = torch.tensor([[1, 3, 7, 0], [1, 3, 7, 0], [4, 3, 8, 8], [3, 3, 3, 3]])
    m = ablation._metrics(logits, target, control, context)
    assert m["top1"].tolist() == [1, 0, 0, 0]
    assert m["top1_control"].tolist() == [0, 1, 0, 0]  # -1 (no control) never matches
    assert m["top1_context"].tolist() == [0, 1, 1, 0]  # row 0's top-1 is B itself; row 3's 9 is not in context


def test_copier_scores_on_the_copy_metrics_not_on_b():
    """The copy model predicts the one marker token of each sequence. With B set to another token,
    its top-1 is never B, always a context token other than B, and the control exactly where the
    control is the marker; the engine agrees with the naive oracle on every metric."""
    model, markers = copy_task_model()
    fam, batch = families.get("gpt_neox"), copy_task_batch()
    b = np.array([int(t[p + 1]) if p + 1 < t.size - 1 else int(t[0]) for t, p in zip(batch.tokens, batch.ab)])
    marker = batch.target
    batch = synthetic.ProbeBatch(tokens=batch.tokens, ab=batch.ab, target=b, valid=batch.valid)
    conds = [Condition("baseline"), Condition("carrier", 0, ((1, 1),))]
    res = ablation.run(model, fam, batch, conds, batch_size=8, progress=False)
    base = res[0]
    assert base["top1"] == 0.0 and base["top1_context"] == 1.0
    assert 0.0 < base["top1_control"] < 1.0  # the batch has sequences of both kinds
    assert base["per_sequence"]["top1_control"].tolist() == (synthetic.control_targets(batch) == marker).astype(float).tolist()
    assert res[1]["top1_context"] < 1.0  # without its carrier head the model stops copying
    assert_same(res, run_naive(model, fam, batch, conds, batch_size=8))


# ------------------------------------------------------------------------------ conditions


def screen_df(n_layers, n_heads, induction=(), prev=()):
    rows = []
    for l in range(n_layers):
        for h in range(n_heads):
            rows.append({"layer": l, "head": h, "sel_induction": 60.0 if (l, h) in induction else 3.0,
                         "best_class": "previous-token" if (l, h) in prev else "unclassified",
                         "best_selectivity": 150.0 if (l, h) in prev else 3.0})
    return pl.DataFrame(rows)


def by_name(conds):
    out = {}
    for c in conds:
        out.setdefault(c.name, []).append(c)
    return out


def test_matched_random_controls():
    circuit = [(1, 0), (1, 1), (3, 2), (3, 5), (3, 6), (3, 7)]  # layer 1: 2 of 8 heads, layer 3: 4 of 8
    prev = [(0, 3), (0, 4)]
    screen = screen_df(4, 8, induction=circuit, prev=prev)
    conds = ablation.build_conditions(screen, 8, final_circuit=[(1, 0), "L2H1"], n_random=20, seed=7)
    g = by_name(conds)
    assert [c.name for c in conds][:2] == ["baseline", "circuit"]
    assert g["circuit"][0].heads == tuple(sorted(circuit))
    assert g["final_circuit"][0].heads == ((1, 0), (2, 1))
    assert g["upper_bound"][0].heads == tuple((l, h) for l in (1, 3) for h in range(8))
    assert g["previous_token_circuit"][0].heads == tuple(prev)
    assert g["previous_token_upper_bound"][0].heads == tuple((0, h) for h in range(8))
    # Reference sets (every set of the circuit's shape in its layers): circuit C(8,2) x C(8,4) = 1,960 and
    # final circuit C(8,1) x C(8,1) = 64 (> 20: 20 uniform draws with replacement), previous-token C(8,2) = 28
    # (> 20: drawn too; with exact_max 30 every one of the 28, the circuit among them).
    assert len(conds) == 1 + 1 + 20 + 1 + 1 + 20 + 1 + 1 + 20 + 1
    for rname, cset, space in (("matched_random", circuit, 1960), ("final_matched_random", [(1, 0), (2, 1)], 64),
                               ("previous_token_matched_random", prev, 28)):
        draws = g[rname]
        assert [d.draw for d in draws] == list(range(1, 21))
        assert {d.n_sets for d in draws} == {space} and {d.exact for d in draws} == {False}
        for d in draws:  # the circuit's shape in its layers, from all of their heads
            assert size_profile(d.heads) == size_profile(cset)
        assert len({d.heads for d in draws}) > 1
    drawn = {h for d in g["matched_random"] for h in d.heads}
    assert drawn & set(circuit) and drawn - set(circuit)  # circuit heads are drawn too, and others
    exact = by_name(ablation.build_conditions(screen, 8, final_circuit=None, n_random=20, seed=7, exact_max=30))
    every = exact["previous_token_matched_random"]
    assert len(every) == 28 == len({d.heads for d in every}) and {d.exact for d in every} == {True}
    assert tuple(prev) in {d.heads for d in every}
    # reproducible by seed, different across seeds, independent of the other conditions
    again = ablation.build_conditions(screen, 8, final_circuit=None, n_random=20, seed=7)
    assert by_name(again)["matched_random"] == g["matched_random"]
    # an exact reference set (every set) does not depend on the seed; draws do
    other = ablation.build_conditions(screen, 8, final_circuit=[(1, 0), "L2H1"], n_random=20, seed=8, exact_max=30)
    assert by_name(other)["previous_token_matched_random"] == every
    assert by_name(other)["final_matched_random"] != g["final_matched_random"]
    assert "final_circuit" not in by_name(again)
    # n_heads_per_layer defaults to the screen's
    assert ablation.build_conditions(screen, final_circuit=None, n_random=20, seed=7) == again


def test_a_reference_set_too_small_for_alpha_is_underpowered():
    """11 heads of a 12-head layer: its reference set holds C(12, 11) = 12 sets, the circuit one of them, so
    its p is at least 1/12 > 0.05 whatever it does: underpowered, saying why (issue 48)."""
    circuit = [(0, h) for h in range(11)]
    conds = ablation.build_conditions(screen_df(2, 12, induction=circuit), 12, final_circuit=None, n_random=10,
                                      exact_max=conditions.EXACT_MAX, previous_token=False)
    ref = by_name(conds)["matched_random"]
    assert len(ref) == 12 and {d.n_sets for d in ref} == {12} and {d.exact for d in ref} == {True}
    assert tuple(circuit) in {d.heads for d in ref}
    res = [{"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads, "n_sets": c.n_sets,
            "exact": c.exact, "top1": 0.76 if c.name == "baseline" else 0.01 if c.heads == tuple(circuit) else 0.75,
            "top5": 0.0, "ce": 0.0, "logit_b": 0.0} for c in conds]
    row = ablation.verdict(ablation.ablation_table(res, "toy", "final", 1)).row(0, named=True)
    assert row["verdict"] == "underpowered" and row["effect"] == pytest.approx(0.75)
    assert row["p_value"] == pytest.approx(1 / 12) and row["min_p"] == pytest.approx(1 / 12) and row["control_exact"]
    assert row["underpowered_reason"] == ("its reference set allows p >= 1/12 > alpha = 0.05 "
                                          "(all 12 sets of its layers (exact))")
    # a whole layer: one set, the circuit itself
    full = [(0, h) for h in range(4)]
    conds = ablation.build_conditions(screen_df(2, 4, induction=full), 4, final_circuit=None, n_random=3)
    assert [(d.heads, d.n_sets) for d in by_name(conds)["matched_random"]] == [(tuple(full), 1)]


def test_verdict_refuses_controls_of_other_sizes():
    """A circuit judged against sets of other per-layer sizes (an ablation table from the old
    final_controls shortcut) is underpowered, not causal."""
    rows = [{"condition": "baseline", "top1": 0.40},
            {"condition": "circuit", "top1": 0.01, "heads": ["L1H0", "L1H1", "L1H2"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.40, "heads": [f"L1H{i % 5 + 3}"]}
              for i in range(20))]
    v = ablation.verdict(table_of(rows)).row(0, named=True)
    assert v["verdict"] == "underpowered" and not v["control_sizes_match"]
    assert "other per-layer sizes" in v["underpowered_reason"]


def test_empty_circuit_is_evaluated_not_crashing():
    screen = screen_df(2, 4)
    conds = ablation.build_conditions(screen, 4, final_circuit=[(1, 2)], n_random=20)
    g = by_name(conds)
    for name in ("circuit", "matched_random", "upper_bound", "previous_token_circuit",
                 "previous_token_matched_random", "previous_token_upper_bound"):
        assert len(g[name]) == 1 and g[name][0].heads == () and g[name][0].draw == 0
    model, fam = boosted("gpt_neox", n_layers=2), families.get("gpt_neox")
    res = ablation.run(model, fam, small_batch(), conds, batch_size=6, progress=False)
    table = ablation.ablation_table(res, "m", "r0", 0)
    base = table.filter(pl.col("condition") == "baseline").row(0, named=True)
    for row in table.filter((pl.col("n_heads") == 0) & (pl.col("condition") != ablation.COPY_NULL)).iter_rows(named=True):
        assert row["top1"] == base["top1"] and row["ce"] == base["ce"]
    v = ablation.verdict(table)
    assert v["circuit"].to_list() == ["circuit", "final_circuit", "previous_token_circuit"]
    c = v.filter(pl.col("circuit") == "circuit").row(0, named=True)
    assert c["n_heads"] == 0 and c["effect"] == 0 and not c["causal"] and math.isnan(c["p_value"])
    assert v.filter(pl.col("circuit") == "final_circuit")["heads"].to_list() == [["L1H2"]]


def test_ablation_table_schema():
    res = [{"name": "baseline", "draw": 0, "heads": (), "n_heads": 0, "top1": 0.5, "top5": 0.7, "ce": 2.0,
            "logit_b": 3.0, "n_sequences": 10},
           {"name": "circuit", "draw": 0, "heads": ((4, 4), (7, 0)), "n_heads": 2, "top1": 0.1, "top5": 0.2,
            "ce": 4.0, "logit_b": 1.0, "n_sequences": 10}]
    t = ablation.ablation_table(res, "pythia", "step1000", 2097152000)
    assert list(t.columns[:len(tables.SCHEMAS["ablation"])]) == list(tables.SCHEMAS["ablation"])
    assert t["heads"].to_list() == [[], ["L4H4", "L7H0"]]
    assert dict(t.schema) == tables.SCHEMAS["ablation"]
    assert all(t[c].is_null().all() for c in ablation.PROBE_RECORD)  # no record given: null, not guessed
    rec = {"ablation_probe": "held_out", "ablation_probe_seed": 43, "ablation_probe_sha256": "ab" * 32,
           "ablation_probe_redrawn": 0}
    t = ablation.ablation_table(res, "pythia", "step1000", 2097152000, probe_record=rec)
    assert t.select(list(rec)).unique().rows(named=True) == [rec]


# ------------------------------------------------------------------------------ verdict


def table_of(rows):
    ci = {c: None for c in tables.SCHEMAS["ablation"] if c.endswith(("_lo", "_hi"))}
    full = [{"model": "m", "revision": "r", "tokens": 1, "draw": 0, "top5": 0.0, "ce": 0.0, "logit_b": 0.0,
             "top1_control": 0.0, "top1_context": 0.0, "n_sequences": 2000, "n_matched_sets": None, "reference_exact": None, "method": None, **ci,
             **{c: None for c in ablation.PROBE_RECORD},
             **r, "n_heads": len(r.get("heads", [])), "heads": r.get("heads", [])} for r in rows]
    return tables.conform(pl.DataFrame(full, schema_overrides={c: pl.Float64 for c in ci}
                                       | {"n_matched_sets": pl.Int64, "reference_exact": pl.Boolean, "method": pl.String}), "ablation")


def test_verdict_known_answers():
    draws = [0.38, 0.40, 0.42, 0.36, 0.40] * 4  # 20 draws, mean 0.392 -> random effect 0.008
    rows = [{"condition": "baseline", "top1": 0.40},
            {"condition": "circuit", "top1": 0.02, "heads": ["L1H0", "L1H1"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": t, "heads": [f"L1H{i + 2}", f"L1H{i + 3}"]}
              for i, t in enumerate(draws)),
            {"condition": "upper_bound", "top1": 0.01, "heads": ["L1H0", "L1H1", "L1H2", "L1H3"]},
            {"condition": "final_circuit", "top1": 0.37, "heads": ["L1H0"]},
            {"condition": "previous_token_circuit", "top1": 0.10, "heads": ["L0H0"]},
            *({"condition": "previous_token_matched_random", "draw": i + 1, "top1": t, "heads": [f"L0H{i + 1}"]}
              for i, t in enumerate([0.05] + [0.40] * 19)),
            {"condition": "previous_token_upper_bound", "top1": 0.30, "heads": ["L0H0", "L0H1"]}]
    v = {r["circuit"]: r for r in tables.conform(ablation.verdict(table_of(rows)), "verdict").iter_rows(named=True)}
    c = v["circuit"]
    assert c["effect"] == pytest.approx(0.38)
    assert c["random_effect_mean"] == pytest.approx(0.008)
    assert c["effect_vs_random"] == pytest.approx(0.38 / 0.008)
    assert c["p_value"] == pytest.approx(1 / 21)
    assert c["upper_bound_saturates"] and c["causal"] and c["heads"] == ["L1H0", "L1H1"]
    f = v["final_circuit"]  # 0.37: 3 of 20 draws (top1 0.36) are at least as damaging
    assert f["control"] == "matched_random" and f["p_value"] == pytest.approx(5 / 21) and not f["causal"]
    assert c["not_causal_reason"] is None and c["underpowered_reason"] is None
    # the 1-head final circuit borrows the 2-head circuit's control: underpowered, not a missed criterion
    assert f["verdict"] == "underpowered" and f["not_causal_reason"] is None
    p = v["previous_token_circuit"]  # one draw more damaging; upper bound does not saturate
    assert p["p_value"] == pytest.approx(2 / 21) and not p["causal"]
    # 0.10 <= 0.5 x 0.40 holds; effect 0.30 >= 2 x mean(0.35, 0, ..., 0) = 0.035 holds; p = 2/21 fails
    assert p["not_causal_reason"] == "p = 0.096 > alpha = 0.05"
    assert p["upper_bound_top1"] == 0.30 and not p["upper_bound_saturates"]


def test_verdict_counts_a_control_set_tied_with_the_circuit():
    # top-1 = 14/2000 -> 1/2000: b - (b - a) rounds below a in floating point; a tied set must count
    b, a = 14 / 2000, 1 / 2000
    rows = [{"condition": "baseline", "top1": b}, {"condition": "circuit", "top1": a, "heads": ["L0H0"]},
            {"condition": "matched_random", "draw": 1, "top1": a, "heads": ["L0H1"]},
            *({"condition": "matched_random", "draw": i + 2, "top1": b, "heads": [f"L0H{i + 2}"]} for i in range(19))]
    # 14 of the paper's 2000 sequences hit: above the floor
    c = ablation.verdict(table_of(rows)).row(0, named=True)
    assert c["p_value"] == pytest.approx(2 / 21) and not c["causal"]


def test_verdict_edge_cases():
    # random draws do nothing: no ratio to a zero mean (null), the excess is the effect, still causal
    rows = [{"condition": "baseline", "top1": 0.5}, {"condition": "circuit", "top1": 0.0, "heads": ["L0H0"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.5, "heads": [f"L0H{i + 1}"]} for i in range(20)),
            {"condition": "upper_bound", "top1": 0.0, "heads": ["L0H0", "L0H1"]}]
    c = ablation.verdict(table_of(rows)).row(0, named=True)
    assert c["effect_vs_random"] is None and c["excess_effect"] == pytest.approx(0.5)
    assert c["p_value"] == pytest.approx(1 / 21) and c["causal"]
    # baseline 0 (early revision): nothing to lose, never causal, NaN ratio, no saturation
    rows = [{"condition": "baseline", "top1": 0.0}, {"condition": "circuit", "top1": 0.0, "heads": ["L0H0"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.0, "heads": [f"L0H{i + 1}"]} for i in range(20)),
            {"condition": "upper_bound", "top1": 0.0, "heads": ["L0H0", "L0H1"]}]
    c = ablation.verdict(table_of(rows), min_baseline_hits=0).row(0, named=True)  # the floor rule off
    assert c["effect_vs_random"] is None and c["p_value"] == 1.0 and not c["causal"]
    # a zero baseline has no share to halve: the effect, the halving rule and p fail
    assert c["not_causal_reason"] == ("no positive effect (top-1 effect 0.000) and top-1 after ablation is 0.0% "
                                      "against a baseline of 0.0% (0.0% of 0.0%; no interval: the point estimate "
                                      "decides), not at most 50% and p = 1 > alpha = 0.05")
    assert not c["upper_bound_saturates"]
    # with it (the default), top-1 at 0 of 100 cannot decide: untested without a fallback metric
    c = ablation.verdict(table_of(rows), fallback_metric=None).row(0, named=True)
    assert c["verdict"] == "untested" and c["metric"] == "top1" and not c["causal"]
    assert c["floor_reason"] == ("top-1 is near its floor: the unablated model predicts B first in 0 of 2000 "
                                 "sequences (0.0%), fewer than 10, so one or two sequences would decide the halving "
                                 "rule on top-1")
    # too few draws: p can never reach 0.05
    rows = [{"condition": "baseline", "top1": 0.5}, {"condition": "circuit", "top1": 0.0, "heads": ["L0H0"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.5, "heads": [f"L0H{i + 1}"]} for i in range(5))]
    c = ablation.verdict(table_of(rows)).row(0, named=True)
    assert c["p_value"] == pytest.approx(1 / 6) and not c["causal"]
    assert c["upper_bound_top1"] == 0.5  # no upper-bound row: ablating nothing


def test_end_to_end_verdict_on_copy_task():
    model, markers = copy_task_model()
    screen = screen_df(2, 2, induction=[(1, 1)])
    conds = ablation.build_conditions(screen, 2, final_circuit=[(1, 1)], n_random=20)
    res = ablation.run(model, families.get("gpt_neox"), copy_task_batch(), conds, batch_size=24, progress=False)
    v = ablation.verdict(ablation.ablation_table(res, "toy", "final", 10))
    c = v.filter(pl.col("circuit") == "circuit").row(0, named=True)
    # the reference set: {L1H0} (no effect) and {L1H1}, the circuit itself: a mean effect of 0.5
    assert c["baseline_top1"] == 1.0 and c["ablated_top1"] == 0.0 and c["random_effect_mean"] == 0.5
    assert c["upper_bound_saturates"]
    # Two heads a layer: the reference set is the two one-head sets, the circuit one of them (evaluated
    # once each, not drawn twenty times), so p is at least 1/2: the test cannot decide.
    assert c["n_random"] == 2 and c["n_distinct_draws"] == 2 and c["n_matched_sets"] == 2 and c["control_exact"]
    assert c["p_value"] == 0.5 and c["min_p"] == 0.5 and not c["causal"] and c["verdict"] == "underpowered"
    assert c["shows_behaviour"] and c["boost"] > 0.2  # the copy-null replaces B at ab + 1: B is copied less


def test_repeated_draws_count_each_time_in_the_p_value():
    # uniform draws with replacement (Phipson & Smyth): a set drawn twice is two draws; the circuit may be drawn
    rows = [{"condition": "baseline", "top1": 0.5}, {"condition": "circuit", "top1": 0.0, "heads": ["L0H0"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.5, "heads": [f"L0H{1 + i % 3}"]}
              for i in range(19)),
            {"condition": "matched_random", "draw": 20, "top1": 0.0, "heads": ["L0H0"]},
            {"condition": "upper_bound", "top1": 0.0, "heads": ["L0H0", "L0H1", "L0H2", "L0H3"]}]
    v = ablation.verdict(table_of(rows)).row(0, named=True)
    assert v["n_distinct_draws"] == 4 and v["n_random"] == 20 and v["p_value"] == pytest.approx(2 / 21)
    assert not v["causal"] and v["min_p"] == pytest.approx(1 / 21)


# ------------------------------------------------------------------------------ exact controls (issue 9)

PYTHIA_INDUCTION = ["L4H4", "L7H0", "L7H1"]  # published final induction circuit of Pythia-1B
# published previous-token circuit of Pythia-1B (prev_token_circuit/pythia1b_ablation.json)
PYTHIA_PREV = ["L1H3", "L2H1", "L2H3", "L2H5", "L3H2", "L3H5", "L3H6", "L6H3"]
PYTHIA_SINKS = [(5, 0), (7, 7), (2, 7)]


def pythia_screen():
    from headtrace.core.heads import as_heads
    ind, prev = set(as_heads(PYTHIA_INDUCTION)), set(as_heads(PYTHIA_PREV))
    rows = []
    for l in range(16):
        for h in range(8):
            best = ("previous-token", 150.0) if (l, h) in prev else (
                ("first-token", 40.0) if (l, h) in PYTHIA_SINKS else ("unclassified", 3.0))
            rows.append({"layer": l, "head": h, "sel_induction": 60.0 if (l, h) in ind else 3.0,
                         "best_class": best[0], "best_selectivity": best[1]})
    return pl.DataFrame(rows)


def test_pythia_geometry_reference_sets_and_alpha():
    screen = pythia_screen()
    circuit = tuple(sorted(as_heads(PYTHIA_INDUCTION)))
    for seed in range(5):
        conds = ablation.build_conditions(screen, 8, final_circuit=["L4H4", "L7H1", "L9H2"], n_random=20,
                                          seed=seed, class_matched=True, exact_max=conditions.EXACT_MAX)
        g = by_name(conds)
        # exact: C(8,1) x C(8,2) = 224 sets, the circuit one of them; the final circuit 8^3 = 512
        for name, n in (("matched_random", 224), ("final_matched_random", 512)):
            sets = [c.heads for c in g[name]]
            assert len(sets) == n == len(set(sets)) and {c.n_sets for c in g[name]} == {n}
        assert circuit in {c.heads for c in g["matched_random"]}
        # sampled: the previous-token circuit's 8 x C(8,3) x C(8,3) x 8 sets, 20 draws
        assert {c.n_sets for c in g["previous_token_matched_random"]} == {8 * 56 * 56 * 8}
        assert len(g["previous_token_matched_random"]) == 20
        for c in g["class_matched_random"]:  # sinks never in the class-matched reference set
            assert not set(c.heads) & set(PYTHIA_SINKS)
        assert {c.n_sets for c in g["class_matched_random"]} == {8 * 21}  # L7H7 is a sink: C(7,2)
    # a circuit that hurts more than every other set of its layers: p = 1/224 (exact), 1/21 over 20 draws
    conds = ablation.build_conditions(screen, 8, final_circuit=None, n_random=20, seed=0, exact_max=conditions.EXACT_MAX)
    top1 = {"baseline": 0.0405, "circuit": 0.0025, "upper_bound": 0.0, "previous_token_circuit": 0.0,
            "previous_token_upper_bound": 0.0}
    rng = np.random.default_rng(0)
    res = [{"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads, "n_sets": c.n_sets,
            "exact": c.exact, "top1": 0.0025 if c.heads == circuit else top1.get(c.name, float(rng.uniform(0.038, 0.046))),
            "top5": 0.0, "ce": 0.0, "logit_b": 0.0} for c in conds]
    v = {r["circuit"]: r for r in ablation.verdict(ablation.ablation_table(res, "pythia", "main", 1))
         .iter_rows(named=True)}
    c, p = v["circuit"], v["previous_token_circuit"]
    assert c["p_value"] == pytest.approx(1 / 224) and c["verdict"] == "causal" and c["control_exact"]
    assert c["n_matched_sets"] == 224 == c["n_distinct_draws"]
    assert p["p_value"] == pytest.approx(1 / 21) and p["verdict"] == "causal" and not p["control_exact"]
    assert p["n_matched_sets"] == 200704 and p["n_random"] == 20


def test_small_space_is_exact_and_underpowered_never_not_causal():
    # 4 heads a layer, a 2-head circuit: its reference set is the C(4, 2) = 6 pairs, the circuit one of them
    screen = screen_df(2, 4, induction=[(1, 0), (1, 1)])
    conds = ablation.build_conditions(screen, 4, final_circuit=None, n_random=20)
    draws = by_name(conds)["matched_random"]
    assert [d.heads for d in draws] == [tuple((1, h) for h in pair) for pair in itertools.combinations(range(4), 2)]
    assert {d.n_sets for d in draws} == {6} and {d.exact for d in draws} == {True}
    for circuit_top1, draw_top1 in ((0.01, 0.76), (0.76, 0.76), (0.80, 0.70)):  # huge / no / negative effect
        res = [{"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads, "n_sets": c.n_sets,
                "exact": c.exact, "top1": {"baseline": 0.76, "circuit": circuit_top1}.get(
                    c.name, (circuit_top1 if c.heads == ((1, 0), (1, 1)) else draw_top1) if c.draw else 0.0),
                "top5": 0.0, "ce": 0.0, "logit_b": 0.0} for c in conds]
        row = ablation.verdict(ablation.ablation_table(res, "toy", "final", 1)).row(0, named=True)
        assert row["verdict"] == "underpowered" and not row["causal"]
        assert row["min_p"] == pytest.approx(1 / 6) and row["n_matched_sets"] == 6 and row["control_exact"]
        assert row["underpowered_reason"] == ("its reference set allows p >= 1/6 > alpha = 0.05 "
                                              "(all 6 sets of its layers (exact))")
    # exact_max: evaluate every set when there are few enough, however small M is
    sets, n, exact = conditions.reference_sets([(4, 4), (7, 0), (7, 1)], 8, 5, 0, "x", exact_max=300)
    assert exact and n == 224 and len(sets) == len(set(sets)) == 224 and sets == sorted(sets)
    sets, n, exact = conditions.reference_sets([(4, 4), (7, 0), (7, 1)], 8, 5, 0, "x")
    assert not exact and len(sets) == 5


def test_decision_metric_and_rule():
    # logit_b decides: the circuit drops logit B far more than any matched set, top-1 barely moves
    rows = [{"condition": "baseline", "top1": 0.04, "logit_b": 3.5, "ce": 8.4},
            {"condition": "circuit", "top1": 0.039, "logit_b": 1.7, "ce": 10.4, "heads": ["L4H4"]},
            *({"condition": "matched_random", "draw": i + 1, "top1": 0.04, "logit_b": 3.4 + 0.01 * i, "ce": 8.5,
               "heads": [f"L4H{i}"]} for i in range(20))]
    # the copy-null (B replaced in the context): logit B 1.5 (a boost of 2.0), ce 10.0 (a boost of 1.6 nats)
    null = {"condition": "copy_null", "top1": 0.0, "logit_b": 1.5, "ce": 10.0}
    t = table_of(rows + [null])
    by_metric = {m: ablation.verdict(t, metric=m, min_baseline_hits=1).row(0, named=True) for m in ("top1", "logit_b", "ce")}
    # on top-1 it beats its reference set (the others do nothing) but 0.039 is not <= 0.5 x 0.04: necessary in part
    assert by_metric["top1"]["verdict"] == "partial" and by_metric["top1"]["half_baseline"] == "above_half"
    # logit B: the ablation removes 1.8 of the 2.0 the earlier B adds, leaving 10 % of the boost: halved
    lb = by_metric["logit_b"]
    assert lb["verdict"] == "causal" and lb["effect"] == pytest.approx(1.8) and lb["boost"] == pytest.approx(2.0)
    assert lb["ablated_fraction"] == pytest.approx(0.1) and lb["half_baseline"] == "at_most_half"
    ce = by_metric["ce"]  # ce rises by 2.0 nats, more than the 1.6 the earlier B takes off: no boost left
    assert ce["verdict"] == "causal" and ce["effect"] == pytest.approx(2.0) and ce["ablated_fraction"] == pytest.approx(-0.25)
    assert ce["null_value"] == 10.0 and ce["shows_behaviour"]
    assert lb["baseline_value"] == 3.5 and lb["baseline_top1"] == 0.04
    # without a copy-null the halving rule cannot apply to a continuous metric: necessary in part, said so
    no_null = ablation.verdict(table_of(rows), metric="ce").row(0, named=True)
    assert no_null["verdict"] == "partial" and no_null["half_baseline"] is None and no_null["shows_behaviour"] is None
    assert no_null["partial_reason"] == ("it beats its reference set, but the halving rule cannot apply: the "
                                         "cross-entropy of B has no in-context boost to halve (no copy-null was run)")
    # a copy-null the model does as well on: no behaviour, so no test (issue 48)
    flat = ablation.verdict(table_of(rows + [{**null, "ce": 8.3}]), metric="ce").row(0, named=True)
    assert flat["verdict"] == "untested" and not flat["shows_behaviour"] and flat["boost"] == pytest.approx(-0.1)
    assert flat["untested_reason"].startswith("the model shows no induction on this probe: the earlier B adds -0.1 ")
    with pytest.raises(ValueError, match="metric"):
        ablation.verdict(t, metric="top5x")


# ------------------------------------------------------------------------------ intervals


def test_bootstrap_interval_known_answers():
    n = 400
    base = {"top1": (np.arange(n) % 4 == 0).astype(float), "logit_b": np.linspace(0, 4, n), "ce": np.full(n, 8.0)}
    # the ablation lowers every sequence's logit B by exactly 1 and raises CE by 0.5: the paired effect
    # interval is exactly that, however wide the per-condition intervals are
    abl = {"top1": np.zeros(n), "logit_b": base["logit_b"] - 1.0, "ce": base["ce"] + 0.5}
    ci = V.bootstrap_intervals([base, abl], 0, n_boot=1000, seed=3)
    assert ci == V.bootstrap_intervals([base, abl], 0, n_boot=1000, seed=3)  # deterministic by seed
    assert ci != V.bootstrap_intervals([base, abl], 0, n_boot=1000, seed=4)
    b, a = ci
    se = math.sqrt(0.25 * 0.75 / n)  # top-1 = 25 %: normal approximation of the interval
    assert b["top1_lo"] == pytest.approx(0.25 - 1.96 * se, abs=0.01)
    assert b["top1_hi"] == pytest.approx(0.25 + 1.96 * se, abs=0.01)
    assert b["ce_lo"] == b["ce_hi"] == 8.0  # constant: a zero-width interval
    assert a["logit_b_effect_lo"] == pytest.approx(1.0) and a["logit_b_effect_hi"] == pytest.approx(1.0)
    assert a["ce_effect_lo"] == pytest.approx(0.5) and a["ce_effect_hi"] == pytest.approx(0.5)
    assert a["logit_b_hi"] - a["logit_b_lo"] > 0.2  # the unpaired mean is uncertain
    assert b["top1_effect_lo"] == b["top1_effect_hi"] == 0.0  # baseline vs itself
    for row, ps in ((b, base), (a, abl)):
        for m in metrics.interval_metrics():
            assert row[f"{m}_lo"] <= ps[m].mean() <= row[f"{m}_hi"]


def test_engine_keeps_per_sequence_metrics_and_intervals():
    model, fam, batch = boosted("olmo"), families.get("olmo"), small_batch(n=12)
    conds = [Condition("baseline"), Condition("a", 0, ((1, 0),)), Condition("b", 1, ((1, 0),)),
             Condition("c", 0, ((0, 1), (2, 3)))]
    res = ablation.run(model, fam, batch, conds, batch_size=5, max_rows=10, progress=False)
    assert res[1]["per_sequence"]["ce"].tolist() == res[2]["per_sequence"]["ce"].tolist()  # one set, one pass
    for r in res:
        for m in METRICS:
            assert r["per_sequence"][m].shape == (12,) and r[m] == pytest.approx(r["per_sequence"][m].mean())
    t = ablation.ablation_table(res, "m", "r", 0, n_boot=200, seed=1)
    assert t.equals(ablation.ablation_table(res, "m", "r", 0, n_boot=200, seed=1))
    for row in t.iter_rows(named=True):
        for m in metrics.interval_metrics():
            assert row[f"{m}_lo"] <= row[m] <= row[f"{m}_hi"]
            eff = float(V.damage(m, t[m][0], row[m]))
            assert row[f"{m}_effect_lo"] <= eff + 1e-12 and eff <= row[f"{m}_effect_hi"] + 1e-12
    assert_same(res, run_naive(model, fam, batch, conds, batch_size=5))


def test_final_circuit_shares_the_cell_circuits_controls():
    circuit = [(1, 0), (2, 1)]
    screen = screen_df(3, 8, induction=circuit)
    g = by_name(ablation.build_conditions(screen, 8, final_circuit=circuit, n_random=20, seed=0))
    assert [c.heads for c in g["final_matched_random"]] == [c.heads for c in g["matched_random"]]
    assert g["final_upper_bound"][0].heads == g["upper_bound"][0].heads
    own = by_name(ablation.build_conditions(screen, 8, final_circuit=[(1, 0)], n_random=20, seed=0))
    assert {c.heads for c in own["final_matched_random"]} == {((1, h),) for h in range(8)}  # exact, 8 sets
    # final_controls=False no longer judges a final circuit of other heads against the cell circuit's
    # controls (issue 28): its own sets are built; only the identical circuit shares them
    off = by_name(ablation.build_conditions(screen, 8, final_circuit=[(1, 0)], n_random=20, final_controls=False))
    assert {c.heads for c in off["final_matched_random"]} == {((1, h),) for h in range(8)}
    same = by_name(ablation.build_conditions(screen, 8, final_circuit=circuit, n_random=20, final_controls=False))
    assert "final_matched_random" not in same  # judged on matched_random: the same reference set
    assert not conditions.can_share_controls([(1, 0), (2, 2)], circuit)  # same sizes, other heads


# ------------------------------------------------------------------------------ layer arguments (issue 13)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_layer_kwargs_are_the_ones_the_engine_knows(family):
    model, fam = tiny_model(family), families.get(family)
    got = {}

    def pre(mod, args, kwargs):
        got.update(ablation._layer_kwargs(mod, args, kwargs))
    hd = fam.layers(model)[1].register_forward_pre_hook(pre, with_kwargs=True)
    with torch.inference_mode():
        fam.backbone(model)(input_ids=torch.randint(2, 100, (3, 10)), use_cache=False)
    hd.remove()
    got.pop("hidden_states", None)
    # Fails when transformers changes what it passes: then classify the new argument in LAYER_KWARGS.
    assert set(got) == ablation.EXPECTED_LAYER_KWARGS[family]
    assert set(got) <= set(ablation.LAYER_KWARGS)
    tiled = ablation._repeat_kwargs(got, 3, 2)
    for name, kind in ablation.LAYER_KWARGS.items():
        if name in got and kind == "batch":
            for before, after in zip(*(v if isinstance(v, tuple) else (v,) for v in (got[name], tiled[name]))):
                if isinstance(before, torch.Tensor) and before.shape[0] == 3:
                    assert after.shape[0] == 6
    with pytest.raises(RuntimeError, match="new_arg"):
        ablation._repeat_kwargs({**got, "new_arg": torch.zeros(3, 4)}, 3, 2)


# ------------------------------------------------------------------------------ composition rule


def test_composition_relative_to_chance_with_published_numbers():
    chance = V.chance_top1([100, 10000])  # the paper's probe tokens
    assert chance == pytest.approx(1 / 9900)
    # Pythia-1B, previous-token circuit: 4.05 % -> 0.00 %, matched random 4.40 % (here 20 draws at it)
    rows = [{"condition": "baseline", "top1": 0.0405},
            {"condition": "previous_token_circuit", "top1": 0.0, "heads": PYTHIA_PREV},
            *({"condition": "previous_token_matched_random", "draw": i + 1, "top1": 0.044,
               "heads": [f"L1H{(0, 1, 2, 4, 5, 6, 7)[i % 7]}", "L2H0", "L2H2", "L2H6", "L3H0", "L3H1", "L3H3",
                         f"L6H{i // 7}"]}
              for i in range(20))]
    v = ablation.verdict(table_of(rows)).row(0, named=True)
    assert v["verdict"] == "causal"
    assert V.destroys_induction(v["verdict"], v["baseline_top1"], chance)
    assert not V.destroys_induction(v["verdict"], chance, chance)  # baseline at chance: no induction to destroy
    assert V.induction_present(0.0100, chance) and V.induction_present(0.60, V.chance_top1([32, 127]))
    # the published file has one matched draw: the effect is there, the test cannot decide
    one = ablation.verdict(table_of(rows[:3])).row(0, named=True)
    assert one["verdict"] == "underpowered" and not V.destroys_induction(one["verdict"], 0.0405, chance)


def test_summary_line_says_underpowered_and_why():
    from headtrace.report.console import verdict_line

    screen = screen_df(2, 4, induction=[(1, 0), (1, 1)])
    conds = ablation.build_conditions(screen, 4, final_circuit=None, n_random=20)
    res = [{"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads, "n_sets": c.n_sets,
            "exact": c.exact, "top1": {"baseline": 0.76, "circuit": 0.01}.get(c.name, 0.75), "top5": 0.0, "ce": 0.0,
            "logit_b": 0.0} for c in conds]
    row = ablation.verdict(ablation.ablation_table(res, "toy", "final", 1)).row(0, named=True)
    line = verdict_line(row)
    assert "verdict: underpowered" in line and "all 6 sets of its layers (exact)" in line and "1/6 > alpha" in line


def _floor_rows(hits: int, n: int = 32, ce_circuit: float = 11.0, ce_random=(8.9,) * 20):
    """A cell whose unablated top-1 hits ``hits`` of ``n`` sequences, with hand-set cross-entropies of B."""
    b = hits / n
    return [{"condition": "baseline", "top1": b, "ce": 9.0, "n_sequences": n},
            {"condition": "circuit", "top1": b, "ce": ce_circuit, "heads": ["L1H0", "L1H1"], "n_sequences": n},
            *({"condition": "matched_random", "draw": i + 1, "top1": b, "ce": c, "n_sequences": n,
               "heads": [f"L1H{i + 2}", f"L1H{i + 3}"]} for i, c in enumerate(ce_random)),
            {"condition": "copy_null", "top1": 0.0, "ce": 10.0, "n_sequences": n}]  # the earlier B: 1 nat


def test_floor_rule_decides_on_the_cross_entropy_when_top1_has_nothing_to_lose():
    """0 of 32 sequences predict B first: top-1 cannot fall, so the cross-entropy of B decides (the
    rule of docs/statistics.md#the-floor-rule), by the same criteria, and the reason is recorded."""
    c = ablation.verdict(table_of(_floor_rows(0))).row(0, named=True)
    assert c["metric"] == "ce" and c["verdict"] == "causal"
    assert c["effect"] == pytest.approx(2.0) and c["random_effect_mean"] == pytest.approx(-0.1)
    assert c["p_value"] == pytest.approx(1 / 21)
    assert c["baseline_top1"] == 0.0 and c["ablated_top1"] == 0.0  # the top-1 figures stay beside it
    assert c["floor_reason"] == ("top-1 is near its floor: the unablated model predicts B first in 0 of 32 sequences "
                                 "(0.0%), fewer than 10, so one or two sequences would decide the halving rule on "
                                 "top-1; decided on the cross-entropy of B instead")
    assert c["boost"] == pytest.approx(1.0) and c["ablated_fraction"] == pytest.approx(-1.0)  # more than the boost gone
    # a circuit that does no more than its controls on the cross-entropy is not causal on it
    c = ablation.verdict(table_of(_floor_rows(0, ce_circuit=8.95))).row(0, named=True)
    assert c["metric"] == "ce" and c["verdict"] == "not_causal" and "the cross-entropy of B effect" in c["not_causal_reason"]
    # 9 hits: still at the floor; 10: top-1 decides, as for every cell with behaviour to remove
    assert ablation.verdict(table_of(_floor_rows(9))).row(0, named=True)["metric"] == "ce"
    c = ablation.verdict(table_of(_floor_rows(10))).row(0, named=True)
    assert c["metric"] == "top1" and c["floor_reason"] is None and c["verdict"] == "not_causal"
    # the published ablations record no sequence count: never at the floor
    rows = [{**r, "n_sequences": None} for r in _floor_rows(0)]
    assert ablation.verdict(table_of(rows)).row(0, named=True)["metric"] == "top1"
    # a requested ce is never at a floor
    assert ablation.verdict(table_of(_floor_rows(0)), metric="ce").row(0, named=True)["floor_reason"] is None


def test_at_floor_counts_sequences():
    assert V.at_floor("top1", 9 / 32, 32) and not V.at_floor("top1", 10 / 32, 32)
    assert not V.at_floor("ce", 0.0, 32) and not V.at_floor("top1", 0.0, None)
    assert V.at_floor("top1", 0.004, 2000)  # 8 of 2000
    assert not V.at_floor("top1", 0.01, 2000)  # OLMo-1B's published 1.00 %: 20 of 2000
