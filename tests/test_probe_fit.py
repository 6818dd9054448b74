"""A probe that fits the model (issue 27, item 5): token ids inside the checkpoint's vocabulary,
checked before any job (toy, local: ``panel.config.check``), at job start before the weights are
read (hub, ``hub.load_model``), and by ``headtrace cell`` with the flag to pass."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import transformers
import yaml

from headtrace import cli
from headtrace.core.errors import ConfigError
from headtrace.models import hub
from headtrace.panel import config as panel

sys.path.insert(0, str(Path(__file__).parent))
from test_hub import _add_revision  # noqa: E402
from tiny import tiny_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A local checkpoint folder (run/step1) of a tiny model with a 300-token vocabulary."""
    root = tmp_path_factory.mktemp("local")
    tiny_model("olmo", vocab_size=300).save_pretrained(root / "step1")
    return root


def _local_config(root, probe=None):
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    cfg["models"] = {"small": {"source": "local", "path": str(root / "{revision}"), "family": "auto",
                               "revisions": ["step1"], "tokens_per_step": 1000}}
    cfg["probe"] = {"seq_len": 64, "ab_range": [20, 40], **(probe or {})}
    return cfg


def test_local_model_with_a_small_vocabulary_fails_the_check_naming_the_key(small_vocab):
    cfg = _local_config(small_vocab)  # default probe: tokens [100, 10000)
    with pytest.raises(ConfigError, match=r"models\.small: probe\.token_range \[100, 10000\) reaches token id 9999, "
                                          r"but the model's vocabulary has 300 tokens"):
        panel.check(cfg)
    panel.check(_local_config(small_vocab, {"token_range": [2, 300]}))
    with pytest.raises(ConfigError, match="probe.token_range"):
        panel.check(_local_config(small_vocab, {"token_range": [2, 301]}))
    bos = _local_config(small_vocab, {"token_range": [2, 300], "prepend_bos": True, "bos_token_id": 300})
    with pytest.raises(ConfigError, match="probe.bos_token_id 300"):
        panel.check(bos)


def test_toy_vocabulary_from_the_recipe_or_the_arch():
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    panel.check(cfg)
    name = next(m for m, s in cfg["models"].items() if s["source"] == "toy")
    cfg["models"][name]["train"].setdefault("arch", {})["vocab_size"] = 50
    with pytest.raises(ConfigError, match=rf"models\.{name}: probe\.token_range .* vocabulary has 50 tokens"):
        panel.check(cfg)


def test_hub_checkpoint_refused_before_its_weights_are_read(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    _add_revision(root, "org/small", "step1", tiny_model("olmo", vocab_size=300))

    def no_weights(*a, **k):
        raise AssertionError("the weights were read")
    monkeypatch.setattr(transformers.OlmoForCausalLM, "from_pretrained", no_weights)
    with pytest.raises(ConfigError, match=r"models\.small: probe\.token_range \[100, 10000\).*vocabulary has 300"):
        hub.load_for_cell({"source": "hub", "hf_id": "org/small"}, "small", "step1", device="cpu",
                          cache_dir=str(root), seq_len=64, token_range=(100, 10000))
    with pytest.raises(AssertionError, match="weights were read"):  # a fitting probe goes on to the weights
        hub.load_for_cell({"source": "hub", "hf_id": "org/small"}, "small", "step1", device="cpu",
                          cache_dir=str(root), seq_len=64, token_range=(2, 300))


def test_headtrace_cell_names_the_flag(small_vocab, capsys):
    assert cli.main(["cell", str(small_vocab / "step1"), "--device", "cpu", "--no-ablate"]) == 2
    err = capsys.readouterr().err
    assert "--token-range LOW HIGH" in err and "vocabulary has 300 tokens" in err
