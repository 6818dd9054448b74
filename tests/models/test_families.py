"""Every family adapter end to end (issue 27): ``headtrace.analyze`` on a tiny random model of each
family, ``family=`` for a relative's ``model_type``, the schema's enum, and BLOOM's sliced-dense configuration
refused by name.
Correctness per family (eager attention, out_proj slices, ablation vs a plain forward) is in
tests/cell/test_capture.py and tests/causal/test_ablation.py, parametrized over ``tiny.FAMILY_NAMES``."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
import yaml
from tiny import FAMILY_NAMES, tiny_config, tiny_model

import headtrace
from headtrace import api
from headtrace.core import tables
from headtrace.models import families


ROOT = Path(__file__).resolve().parents[2]
PROBE = {"n_sequences": 12, "seq_len": 64, "token_range": [2, 128], "seed": 1, "ab_range": [20, 40]}


def test_every_adapter_is_tested_and_in_the_schema():
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    enum = schema["$defs"]["model"]["properties"]["family"]["enum"] if "$defs" in schema and "model" in schema["$defs"] \
        else _family_enum(schema)
    assert set(enum) == {"auto", *families.FAMILIES}
    assert set(FAMILY_NAMES) == set(families.FAMILIES)  # every adapter has a tiny model in the tests
    assert set(families.MODEL_TYPES) == set(families.FAMILIES)
    assert not set(families.REFUSED) & set(families.FAMILIES)


def _family_enum(node):
    if isinstance(node, dict):
        if "family" in node and isinstance(node["family"], dict) and "enum" in node["family"]:
            return node["family"]["enum"]
        for v in node.values():
            found = _family_enum(v)
            if found:
                return found
    return None


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_analyze_runs_on_every_family(family):
    model = tiny_model(family, n_layers=2)
    cell = headtrace.analyze(model, probe=PROBE, n_random=2, batch_size=6, device="cpu", name=f"tiny-{family}",
                             revision="step1", tokens=1, progress=False)
    n_layers, n_heads, _ = families.dims(model)
    assert cell.screen.height == n_layers * n_heads
    for what in api.TABLES:
        df = getattr(cell, what)
        tables.conform(df, what)
        assert df.height > 0
    assert np.isfinite(cell.attention["attn_first_token"].to_numpy()).all()


@pytest.mark.slow
def test_family_argument_for_a_relative_model_type():
    """Mistral is Llama's module layout under another model_type: refused by auto, run with family='llama'."""
    torch.manual_seed(0)
    cfg = transformers.MistralConfig(**{k: v for k, v in tiny_config("llama").to_dict().items()
                                       if k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                                "num_key_value_heads", "intermediate_size", "max_position_embeddings")},
                                     sliding_window=None)
    model = transformers.MistralForCausalLM(cfg).eval()
    with pytest.raises(ValueError, match="no headtrace adapter for model_type 'mistral'"):
        headtrace.analyze(model, probe=PROBE, ablate=False, progress=False)
    cell = headtrace.analyze(model, probe=PROBE, ablate=False, family="llama", batch_size=6, progress=False)
    assert cell.screen.height == cfg.num_hidden_layers * cfg.num_attention_heads


def test_bloom_with_sliced_dense_is_refused_by_name():
    model = tiny_model("bloom")
    model.config.pretraining_tp, model.config.slow_but_exact = 4, True
    with pytest.raises(ValueError, match=r"'bloom' is not supported in this configuration: pretraining_tp = 4"):
        headtrace.analyze(model, probe=PROBE, ablate=False, progress=False)
