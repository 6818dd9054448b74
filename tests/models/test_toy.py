"""The toy-panel trainer: checkpoint schedule, data generator, and short training runs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file

from headtrace.models.toy import data as toy_data
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy

FAMILIES = ("gpt_neox", "olmo", "olmoe")
TINY_ARCH = {"n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": toy_recipe.VOCAB_SIZE,
             "max_position_embeddings": 64, "num_experts": 2, "num_experts_per_tok": 1, "rotary_pct": 1.0}
TINY_OPTIM = {"lr": 1e-3, "warmup": 2, "batch_size": 4, "seq_len": 32, "weight_decay": 0.01, "log_every": 0}
TINY_DATA = {"kind": "repeat", "token_low": 0, "token_high": 256, "repeat_min": 4, "repeat_max": 10}


@pytest.mark.parametrize("max_steps,n", [(9, 10), (10, 10), (100, 10), (1000, 10), (1500, 10), (50, 5), (1, 2)])
def test_checkpoint_steps(max_steps, n):
    steps = toy_recipe.checkpoint_steps(max_steps, n)
    assert len(steps) == n
    assert steps[0] == 0 and steps[-1] == max_steps
    assert all(isinstance(s, int) for s in steps)
    assert all(a < b for a, b in zip(steps, steps[1:]))


def test_checkpoint_steps_log_spaced():
    steps = toy_recipe.checkpoint_steps(1000)
    ideal = np.geomspace(1, 1000, 9)  # after step 0, evenly spaced in log(step)
    assert all(abs(s - i) <= max(1.0, 0.05 * i) for s, i in zip(steps[1:], ideal))


def test_checkpoint_steps_rejects_too_few():
    with pytest.raises(ValueError):
        toy_recipe.checkpoint_steps(5, 10)


def test_make_data_repeat_invariants_and_determinism():
    data = dict(toy_recipe.DEFAULTS["gpt_neox"]["data"])
    a = toy_data.make_data(data, 16, 128, np.random.default_rng(3))
    b = toy_data.make_data(data, 16, 128, np.random.default_rng(3))
    c = toy_data.make_data(data, 16, 128, np.random.default_rng(4))
    assert a.shape == (16, 128) and a.dtype == np.int64
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= data["token_low"] and a.max() < data["token_high"]
    for row in a:  # every sequence starts R R with |R| in [repeat_min, repeat_max]
        ok = [n for n in range(data["repeat_min"], data["repeat_max"] + 1) if np.array_equal(row[:n], row[n:2 * n])]
        assert ok


def test_make_data_bos_and_zipf():
    d = {"kind": "repeat", "repeat_min": 5, "repeat_max": 9, "bos": True}
    x = toy_data.make_data(d, 4, 40, np.random.default_rng(0))
    assert x.shape == (4, 40) and (x[:, 0] == toy_recipe.BOS_TOKEN_ID).all()
    z = {"kind": "zipf", "token_low": 0, "token_high": 256, "zipf_a": 1.1, "n_spans": 2, "span_min": 8,
         "span_max": 16, "min_distance": 20}
    y1 = toy_data.make_data(z, 8, 128, np.random.default_rng(1))
    y2 = toy_data.make_data(z, 8, 128, np.random.default_rng(1))
    assert np.array_equal(y1, y2) and y1.shape == (8, 128)
    assert y1.min() >= 0 and y1.max() < 256
    counts = np.bincount(y1.ravel(), minlength=256)
    assert counts.max() > 20 * np.median(counts[counts > 0]) / 4  # skewed, text-like
    with pytest.raises(ValueError):
        toy_data.make_data({"kind": "nope"}, 2, 16, np.random.default_rng(0))


def test_make_data_backcopy_copies_at_each_triggers_offset():
    d = {"kind": "backcopy", "token_low": 32, "token_high": 127, "offsets": [1, 3, 7], "trigger_low": 128,
         "n_triggers": 10}
    x = toy_data.make_data(d, 50, 128, np.random.default_rng(5))
    trig = (x >= 128) & (x < 131)
    assert (trig.sum(1) == 10).all() and not (trig[:, :-1] & trig[:, 1:]).any()
    rows, cols = np.nonzero(trig)
    offs = np.array([1, 3, 7])[x[rows, cols] - 128]
    assert (cols >= 7).all() and np.array_equal(x[rows, cols + 1], x[rows, cols - offs])
    content = x[~trig]
    assert content.min() >= 32 and content.max() < 127
    assert np.array_equal(x, toy_data.make_data(d, 50, 128, np.random.default_rng(5)))
    with pytest.raises(ValueError, match="outside the content range"):
        toy_data.make_data({**d, "trigger_low": 100}, 2, 128, np.random.default_rng(0))
    with pytest.raises(ValueError, match="do not fit"):
        toy_data.make_data({**d, "n_triggers": 70}, 2, 128, np.random.default_rng(0))


@pytest.mark.parametrize("family", FAMILIES)
def test_build_model_family(family):
    m = toy.build_model(family, TINY_ARCH, seed=0)
    assert type(m).__name__ == toy_recipe.FAMILY_CLASSES[family][1]
    assert m.config.vocab_size == toy_recipe.VOCAB_SIZE and m.config.bos_token_id == toy_recipe.BOS_TOKEN_ID
    m2 = toy.build_model(family, TINY_ARCH, seed=0)
    for (k, v), (_, w) in zip(m.state_dict().items(), m2.state_dict().items()):
        assert torch.equal(v, w), k


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_train_saves_loadable_deterministic_checkpoints(family, tmp_path):
    steps = toy_recipe.checkpoint_steps(6, 4)
    kw = dict(arch=TINY_ARCH, data=TINY_DATA, optim=TINY_OPTIM, max_steps=6, checkpoint_steps=steps, seed=1,
              progress=False)
    dirs = toy.train(family, tmp_path / "a", **kw)
    assert [d.name for d in dirs] == [f"step{s}" for s in steps]
    for d in dirs:
        assert (d / "config.json").is_file() and (d / "model.safetensors").is_file()
        assert not list(d.glob("*.bin"))
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]  # no tmp dirs left
    m = transformers.AutoModelForCausalLM.from_pretrained(dirs[-1])
    assert type(m).__name__ == toy_recipe.FAMILY_CLASSES[family][1]
    w0, w_last = load_file(dirs[0] / "model.safetensors"), load_file(dirs[-1] / "model.safetensors")
    assert any(not torch.equal(w0[k], w_last[k]) for k in w0)  # it trained
    dirs_b = toy.train(family, tmp_path / "b", **kw)
    w_b = load_file(dirs_b[-1] / "model.safetensors")
    assert w_last.keys() == w_b.keys()
    for k in w_last:
        assert torch.equal(w_last[k], w_b[k]), k


def test_train_init_from_continues(tmp_path):
    kw = dict(arch=TINY_ARCH, optim=TINY_OPTIM, max_steps=3, checkpoint_steps=[0, 3], seed=0, progress=False)
    first = toy.train("olmo", tmp_path / "a", data=TINY_DATA, **kw)
    zipf = {"kind": "zipf", "token_low": 0, "token_high": 256, "span_min": 4, "span_max": 8, "min_distance": 8}
    cont = toy.train("olmo", tmp_path / "b", data=zipf, init_from=str(first[-1]), **kw)
    a, b = load_file(first[-1] / "model.safetensors"), load_file(cont[0] / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError):
        toy.train("gpt_neox", tmp_path / "c", data=TINY_DATA, init_from=str(first[-1]), **kw)


def test_pool_steps_contains_revisions_and_is_denser():
    revs = ["step0", "step100", "step250", "step333", "step1000"]
    pool = toy_recipe.pool_steps(1000, revs, 30)
    assert pool == sorted(set(pool)) and pool[0] == 0 and pool[-1] == 1000
    assert {0, 100, 250, 333, 1000} <= set(pool)
    assert set(toy_recipe.checkpoint_steps(1000, 30)) <= set(pool)
    assert len(pool) >= 30 and len(pool) <= 30 + len(revs)
    assert toy_recipe.pool_steps(1000, revs, 30) == pool  # pure
    # between two revisions the pool offers intermediate steps (for refinement)
    assert [s for s in pool if 100 < s < 250]
    assert toy_recipe.pool_steps(1000, revs, 0) == [0, 100, 250, 333, 1000]
    assert toy_recipe.pool_steps(1000, [0, 1000], [5, 7, 500]) == [0, 5, 7, 500, 1000]
    assert toy_recipe.pool_steps(5, ["step5"], 30) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("revs,pool", [(["final"], 10), (["step2000"], 10), (["step10"], 1), (["step10"], [11])])
def test_pool_steps_rejects_bad_input(revs, pool):
    with pytest.raises(ValueError):
        toy_recipe.pool_steps(1000 if revs != ["step10"] else 10, revs, pool)


@pytest.mark.slow
def test_train_revisions_saves_the_pool(tmp_path):
    over = {"arch": TINY_ARCH, "data": TINY_DATA, "optim": TINY_OPTIM}
    dirs = toy.train_revisions("gpt_neox", tmp_path, revisions=["step0", "step5", "step8"], overrides=over,
                               pool=[2, 3], progress=False)
    assert [d.name for d in dirs] == ["step0", "step2", "step3", "step5", "step8"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(d.name for d in dirs)


def test_curriculum_phases_draw_their_own_batches(tmp_path, monkeypatch):
    """Each curriculum phase draws batch_size x seq_len batches of its data for steps
    [previous until, until); the main stream follows; bad phases fail naming the phase."""
    short = {"kind": "repeat", "token_low": 0, "token_high": 256, "repeat_min": 2, "repeat_max": 4,
             "n_copies": "fill", "placement": "start"}
    cur = [{"until": 2, "data": short, "seq_len": 8, "batch_size": 4}]
    seen = []
    real = toy_data.make_data
    monkeypatch.setattr(toy, "make_data", lambda d, b, s, rng: seen.append((d["repeat_max"], b, s)) or real(d, b, s, rng))
    toy.train("gpt_neox", tmp_path, arch=TINY_ARCH, data=TINY_DATA, optim=TINY_OPTIM, max_steps=4,
              checkpoint_steps=[0, 4], curriculum=cur, progress=False)
    main = (TINY_DATA["repeat_max"], TINY_OPTIM["batch_size"], TINY_OPTIM["seq_len"])
    assert seen[-4:] == [(4, 4, 8), (4, 4, 8), main, main]
    main_tps = TINY_OPTIM["batch_size"] * TINY_OPTIM["seq_len"]
    assert main_tps != 32
    assert toy_recipe.token_schedule(TINY_DATA, TINY_OPTIM, cur, 4) == [{"until": 2, "tokens_per_step": 32},
                                                                  {"tokens_per_step": main_tps}]
    # phases with the same tokens a step merge into one
    same = [dict(cur[0], seq_len=TINY_OPTIM["seq_len"], batch_size=TINY_OPTIM["batch_size"])]
    assert toy_recipe.token_schedule(TINY_DATA, TINY_OPTIM, same, 4) == [{"tokens_per_step": main_tps}]
    with pytest.raises(ValueError, match=r"curriculum\[0\].until = 9"):
        toy_recipe.phases(TINY_DATA, TINY_OPTIM, [dict(cur[0], until=9)], 4)
    with pytest.raises(ValueError, match=r"curriculum\[0\]"):
        toy_recipe.phases(TINY_DATA, TINY_OPTIM, [{"until": 2, "data": short}], 4)
    with pytest.raises(ValueError, match="does not fit"):
        toy_recipe.phases(TINY_DATA, TINY_OPTIM, [dict(cur[0], seq_len=4)], 4)


def test_make_data_topic_streams_use_their_topic_only():
    x = toy_data.make_data({"kind": "topic", "token_low": 32, "token_high": 127, "n_topic": 5}, 16, 64,
                      np.random.default_rng(3))
    assert x.shape == (16, 64) and x.min() >= 32 and x.max() < 127
    assert all(len(set(r.tolist())) <= 5 for r in x)
    assert len({tuple(sorted(set(r.tolist()))) for r in x}) > 1  # each sequence its own topic
    with pytest.raises(ValueError, match="topic size"):
        toy_data.make_data({"kind": "topic", "token_low": 32, "token_high": 40, "n_topic": 9}, 1, 8, np.random.default_rng(0))


def test_recipe_merges_data_of_the_same_kind_and_replaces_another_kind():
    """The train block's data updates the default's key by key; data of another kind replaces it,
    so no key of the default's kind lingers in the recipe."""
    same = toy_recipe.recipe("olmo", {"data": {"repeat_max": 40}})["data"]
    assert same == {**toy_recipe.DEFAULTS["olmo"]["data"], "repeat_max": 40}
    other = {"kind": "repeat", "token_low": 32, "token_high": 127, "repeat_min": 20, "repeat_max": 63}
    assert toy_recipe.DEFAULTS["olmoe"]["data"]["kind"] == "mixture"
    assert toy_recipe.recipe("olmoe", {"data": other})["data"] == other
    assert toy_recipe.recipe("olmoe", {"optim": {"lr": 1e-3}})["data"] == toy_recipe.DEFAULTS["olmoe"]["data"]


def test_lr_schedule_warmup_then_constant():
    base = {"lr": 1.0, "warmup": 10}
    assert toy._lr_at(0, base, 100) == pytest.approx(0.1)  # warmup: (step + 1) / warmup
    assert toy._lr_at(9, base, 100) == pytest.approx(1.0)
    assert toy._lr_at(50, base, 100) == 1.0
    assert toy._lr_at(100, {"lr": 1.0}, 100) == 1.0  # no warmup


@pytest.mark.parametrize("schedule", ["cosin", "cosine"])
def test_check_schedule_refuses_an_unknown_schedule_by_name(schedule):
    with pytest.raises(ValueError, match=f"'{schedule}'"):
        toy_recipe.check_schedule({"lr": 1e-3, "schedule": schedule}, 100)
    toy_recipe.check_schedule({"lr": 1e-3, "schedule": "constant"}, 100)
