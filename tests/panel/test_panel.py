import copy
from pathlib import Path

import pytest
import yaml

from headtrace import experiments
from headtrace.panel import config as panel

ROOT = Path(__file__).resolve().parents[2]


def load(name):
    """A shipped config as the workflow reads it: the experiments' models added (a group may name them)."""
    return experiments.expand_models(yaml.safe_load((ROOT / "config" / name).read_text()))


def test_shipped_configs_pass_the_checks():
    for name in ("config.yaml", "reference-panel.yaml"):
        cfg = load(name)
        panel.check(cfg)
        assert panel.cells(cfg)


def test_tokens_per_cell():
    cfg = load("reference-panel.yaml")
    assert panel.cell_tokens(cfg, "pythia-1b-published", "step3000") == 3000 * 2097152
    assert panel.cell_tokens(cfg, "olmo-1b-0724-published", "step126000-tokens264B") == 264 * 10**9
    assert panel.final_revision(cfg, "olmoe-1b-7b-0924-published") == "step1220000-tokens5117B"


def test_toy_tokens_follow_the_recipe_phase_by_phase():
    """A toy's token axis is derived from its recipe: a 16 x 32 phase counts 512 tokens a step, the
    16 x 128 main stream 2,048, so step 1000 after 400 short steps is 400 x 512 + 600 x 2048."""
    cfg = copy.deepcopy(load("config.yaml"))
    spec = cfg["models"]["toy-olmoe"]
    spec["revisions"] = ["step0", "step400", "step1000"]
    spec["train"] = {"optim": {"batch_size": 16, "seq_len": 128}, "curriculum": [
        {"until": 400, "seq_len": 32, "batch_size": 16,
         "data": {"kind": "repeat", "token_low": 32, "token_high": 127, "repeat_min": 4, "repeat_max": 15,
                  "n_copies": "fill", "placement": "start"}}]}
    panel.derive_toy_tokens(cfg)
    assert spec["tokens_schedule"] == [{"until": 400, "tokens_per_step": 512}, {"tokens_per_step": 2048}]
    assert [c.tokens for c in panel.cells(cfg, "toy-olmoe")] == [0, 400 * 512, 400 * 512 + 600 * 2048]
    # the demo's toy-neox: its 16 x 32 phase and its 4 x 128 stream both train on 512 a step
    assert cfg["models"]["toy-neox"]["tokens_schedule"] == [{"tokens_per_step": 512}]
    panel.check(cfg)
    panel.derive_toy_tokens(cfg)  # idempotent
    assert spec["tokens_schedule"] == [{"until": 400, "tokens_per_step": 512}, {"tokens_per_step": 2048}]
    # a token key that disagrees with the recipe names the key and what the recipe trains on
    for key, value, message in [
            ("tokens_schedule", [{"tokens_per_step": 2048}], "models.toy-olmoe.tokens_schedule: .* 512 a step in \\[0, 400\\), 2048 a step from 400"),
            ("tokens_per_step", 2048, "models.toy-olmoe.tokens_per_step: 2048, but the toy recipe trains on tokens 512"),
            ("tokens", {"step0": 0}, "models.toy-olmoe.tokens: a toy model's tokens follow from its recipe")]:
        bad = copy.deepcopy(cfg)
        bad["models"]["toy-olmoe"].pop("tokens_schedule")
        bad["models"]["toy-olmoe"][key] = value
        with pytest.raises(panel.ConfigError, match=message):
            panel.check(bad)


def test_load_spec_never_carries_the_revision_list():
    cfg = load("config.yaml")
    for m in panel.model_names(cfg):
        assert "revisions" not in panel.load_spec(cfg, m)


def test_probe_settings_merge_model_over_global():
    cfg = load("config.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["models"]["toy-neox"]["probe"] = {"n_sequences": 7}
    p = panel.probe_settings(cfg, "toy-neox")
    assert p["n_sequences"] == 7 and p["seq_len"] == cfg["probe"]["seq_len"]
    assert panel.probe_settings(cfg, "toy-olmo")["n_sequences"] == cfg["probe"]["n_sequences"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["models"]["toy-neox"].update(revisions=["step0", "final"]), "models.toy-neox.revisions"),
        (lambda c: c["models"]["toy-neox"].update(family="auto"), "models.toy-neox.family"),
        (lambda c: c["models"].update(x={"source": "hub", "revisions": ["main"]}), "models.x: source 'hub' needs the key 'hf_id'"),
        (lambda c: c["probe"].update(ab_range=[20, 200]), "probe.ab_range"),
        (lambda c: c["models"]["olmo-1b-0724-published"].update(revisions=["main"]), "olmo-1b-0724-published.revisions"),
        (lambda c: c["probe"].update(prepend_bos=True), "bos_token_id"),
        (lambda c: c["models"]["toy-olmo"].update(revisions=["step0", "step1000", "step422"]), "models.toy-olmo.revisions: not in training order"),
        (lambda c: c["models"]["toy-neox"].update(tokens_per_step=4096), "models.toy-neox.tokens_per_step: 4096, but the toy recipe"),
        (lambda c: c["models"]["toy-neox"]["train"]["curriculum"][0].update(until=10**6), "models.toy-neox.train: train.curriculum"),
        (lambda c: c["models"]["toy-neox"]["train"]["optim"].update(schedule="cosin"), "models.toy-neox.train: optim.schedule 'cosin'"),
        (lambda c: c["models"]["pythia-1b-published"].update(tokens_schedule=[{"tokens_per_step": 1}]), "models.pythia-1b-published: set tokens_per_step or tokens_schedule, not both"),
        (lambda c: c["models"]["pythia-1b-published"].update(tokens_per_step=None, tokens_schedule=[{"tokens_per_step": 1}, {"until": 5, "tokens_per_step": 2}]), "only the last phase may omit"),
        (lambda c: c["ablation"].update(probe_seed=42), "ablation.probe_seed 42 is the probe.seed of models."),
    ],
)
def test_bad_config_names_the_culprit(mutate, message):
    cfg = copy.deepcopy(load("config.yaml"))
    cfg["probe"].setdefault("bos_token_id", None)
    mutate(cfg)
    with pytest.raises(panel.ConfigError, match=message.replace(".", r"\.").replace("'", ".")):
        panel.check(cfg)


def test_held_out_seed_may_equal_the_probe_seed_only_with_same():
    cfg = copy.deepcopy(load("config.yaml"))
    cfg["probe"].setdefault("bos_token_id", None)
    cfg["ablation"].update(probe_seed=cfg["probe"]["seed"], probe="same")
    panel.check(cfg)
    cfg["ablation"].update(probe_seed=cfg["probe"]["seed"] + 7, probe="held_out")
    panel.check(cfg)


# ---- seed groups (config key groups) -------------------------------------------------------

def _seeded(cfg, name, seed, **arch):
    spec = copy.deepcopy(cfg["models"]["toy-neox"])
    spec["train"] = {**spec["train"], "seed": seed, "arch": {**spec["train"]["arch"], **arch}}
    cfg["models"][name] = spec


def test_a_seed_group_of_toy_members_with_other_revisions_passes():
    cfg = copy.deepcopy(load("config.yaml"))
    _seeded(cfg, "neox-s1", 1)
    cfg["models"]["neox-s1"]["revisions"] = ["step0", "step1500"]  # a member may have fewer revisions
    cfg["groups"] = {"neox": {"members": {"toy-neox": 0, "neox-s1": 1}}}
    panel.check(cfg)
    assert panel.groups(cfg) == {"neox": {"toy-neox": 0, "neox-s1": 1}}
    assert panel.group_of(cfg) == {"toy-neox": "neox", "neox-s1": "neox"}
    assert panel.geometry(cfg, "neox-s1")[0] == {"layers": 4, "heads": 12, "d_head": 16, "vocab": 258, "context": 256}


@pytest.mark.parametrize("mutate, message", [
    (lambda c: _seeded(c, "neox-s1", 1, n_layers=3), "groups.neox.members.neox-s1: geometry differs from toy-neox (layers 3 vs 4"),
    (lambda c: _seeded(c, "neox-s1", 1, n_heads=8), "groups.neox.members.neox-s1: geometry differs from toy-neox (heads 8 vs 12, d_head 24 vs 16"),
    (lambda c: (_seeded(c, "neox-s1", 1), c["models"]["neox-s1"].update(family="olmo")),
     "groups.neox.members.neox-s1: family 'olmo' differs from 'gpt_neox' of toy-neox"),
    (lambda c: _seeded(c, "neox-s1", 7), "groups.neox.members.neox-s1: seed 1, but the toy trains with train.seed 7"),
    (lambda c: (_seeded(c, "neox-s1", 1), c["models"].pop("neox-s1")), "groups.neox.members.neox-s1: no such model"),
    (lambda c: (_seeded(c, "neox-s1", 1), c["models"].update(**{"neox-s1": {"source": "hub", "hf_id": "a/b",
                "tokens_per_step": 1, "revisions": ["step1"]}})), "groups.neox.members.neox-s1: its family is not known"),
    (lambda c: (_seeded(c, "neox-s1", 1), c["groups"].update(other={"members": {"neox-s1": 1, "toy-olmo": 0}})),
     "groups.other.members.neox-s1: already a member of group 'neox'"),
])
def test_a_group_whose_members_differ_is_refused_naming_the_member(mutate, message):
    cfg = copy.deepcopy(load("config.yaml"))
    cfg["groups"] = {"neox": {"members": {"toy-neox": 0, "neox-s1": 1}}}
    mutate(cfg)
    with pytest.raises(panel.ConfigError, match=message.replace(".", r"\.").replace("'", ".").replace("(", r"\(")):
        panel.check(cfg)


def test_a_local_member_s_geometry_is_read_from_its_checkpoint(tmp_path):
    import json
    cfg = copy.deepcopy(load("config.yaml"))
    cfg.pop("text_probe", None)  # these checkpoints ship no tokenizer; the demo's text probe is for its toys
    for name, heads in (("a", 12), ("b", 8)):
        (tmp_path / name / "step1").mkdir(parents=True)
        (tmp_path / name / "step1" / "config.json").write_text(json.dumps(
            {"model_type": "gpt_neox", "num_hidden_layers": 4, "num_attention_heads": heads, "hidden_size": 192,
             "vocab_size": 258, "max_position_embeddings": 256}))
        cfg["models"][f"local-{name}"] = {"source": "local", "path": str(tmp_path / name), "family": "gpt_neox",
                                           "tokens_per_step": 10, "revisions": ["step1"]}
    cfg["groups"] = {"g": {"members": {"toy-neox": 0, "local-a": 1}}}
    panel.check(cfg)  # a toy and a local member of one geometry
    cfg["groups"] = {"g": {"members": {"toy-neox": 0, "local-a": 1, "local-b": 2}}}
    with pytest.raises(panel.ConfigError, match=r"groups\.g\.members\.local-b: geometry differs from toy-neox \(heads 8 vs 12, d_head 24 vs 16"):
        panel.check(cfg)
