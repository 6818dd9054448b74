import copy
from pathlib import Path

import pytest
import yaml

from headtrace import panel

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    return yaml.safe_load((ROOT / "config" / name).read_text())


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
    ],
)
def test_bad_config_names_the_culprit(mutate, message):
    cfg = copy.deepcopy(load("config.yaml"))
    cfg["probe"].setdefault("bos_token_id", None)
    mutate(cfg)
    with pytest.raises(panel.ConfigError, match=message.replace(".", r"\.").replace("'", ".")):
        panel.check(cfg)
