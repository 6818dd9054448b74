"""A probe that fits the model (issue 27 item 5, issue 33 items 8 and 9).

Every misfit of a probe (longer than the context, token ids outside the vocabulary, ``ab_range``
into the query window, a BOS that is not set) is said in one message with a probe that fits, in
the words of whoever typed it, before any weight is read: before any job (toy, local:
``panel.config.check``), at job start (hub, ``hub.load_model``), by ``headtrace cell`` (its flags)
and by ``headtrace.analyze`` (its ``probe=`` dict). ``derive: true`` / ``--probe auto`` derive the
probe from the model. A hub or local model without a token axis is refused before any job.

The newcomer's model: a GPT-NeoX checkpoint of context 160 and vocabulary 256, laid out on disk as
a training run saves it (``run/step100``, ``run/step200``: config.json + model.safetensors).
"""
from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import transformers
import yaml
from snakemake.utils import validate
from helpers.checkpoints import add_revision as _add_revision
from tiny import tiny_config, tiny_model

from headtrace import api, cli, experiments
from headtrace.core import tables
from headtrace.core.errors import ConfigError
from headtrace.models import hub
from headtrace.panel import config as panel
from headtrace.probe import fit, synthetic
import headtrace


ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
CONTEXT, VOCAB = 160, 256
REVISIONS = ("step100", "step200")


def _small_model(seed: int):
    """The newcomer's model: GPT-NeoX, context 160, vocabulary 256."""
    cfg = tiny_config("gpt_neox", vocab_size=VOCAB)
    cfg.max_position_embeddings = CONTEXT
    transformers.set_seed(seed)
    return transformers.GPTNeoXForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """``run/step100``, ``run/step200``: the small model's checkpoints; ``broken/step100``,
    ``broken/step200``: their config.json beside a weights file that is not safetensors at all, so
    that any attempt to read the weights fails loudly."""
    root = tmp_path_factory.mktemp("newcomer")
    for i, rev in enumerate(REVISIONS):
        _small_model(seed=i).save_pretrained(root / "run" / rev)
        (root / "broken" / rev).mkdir(parents=True)
        shutil.copy(root / "run" / rev / "config.json", root / "broken" / rev / "config.json")
        (root / "broken" / rev / "model.safetensors").write_bytes(b"not a safetensors file")
    return root


def _local_config(path, probe=None, model_probe=None, **model):
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    cfg.pop("groups", None)  # the demo's seed group names models this config replaces
    cfg["models"] = {"mine": {"source": "local", "path": str(path / "{revision}"), "family": "auto",
                              "revisions": list(REVISIONS), "tokens_per_step": 1000, **model}}
    if model_probe is not None:
        cfg["models"]["mine"]["probe"] = model_probe
    cfg["probe"] = dict(probe or {})
    cfg.pop("text_probe", None)  # the demo's text probe is for its toys; these local checkpoints have no tokenizer
    return cfg


def _message(cfg) -> str:
    with pytest.raises(ConfigError) as err:
        panel.check(cfg)
    return str(err.value)


# ---- one message, every misfit, a probe that fits ---------------------------------------------


def test_every_misfit_in_one_message_with_a_fitting_probe_before_any_job(newcomer):
    # seq_len past the context, ab_range into the query window, tokens past the vocabulary: one message
    cfg = _local_config(newcomer / "broken", {"seq_len": 200, "ab_range": [20, 196]})
    msg = _message(cfg)
    assert msg.startswith("models.mine: probe.seq_len 200 (tokens as fed, BOS included) exceeds the model's "
                          "context length of 160 positions (max_position_embeddings = 160 in ")
    assert "probe.ab_range [20, 196) ends after 193 = probe.seq_len - 7" in msg
    assert ("probe.token_range [100, 10000) (the default) reaches token id 9999, but the model's vocabulary "
            "has 256 tokens") in msg
    assert "A probe that fits: probe: {seq_len: 160, ab_range: [12, 80], token_range: [2, 256]}" in msg
    assert "probe: {derive: true}" in msg
    assert "rotary" in msg and "learned position tables" in msg  # not every model is called rotary
    # the probe it proposes passes the check
    panel.check(_local_config(newcomer / "broken", {"seq_len": 160, "ab_range": [12, 80], "token_range": [2, 256]}))


def test_the_fitting_probe_keeps_what_fits(newcomer):
    # seq_len 128 fits the context but leaves the paper's ab_range no room; tokens misfit: only those two change
    msg = _message(_local_config(newcomer / "broken", {"seq_len": 128}))
    assert "probe.ab_range [20, 128) (the default) ends after 121" in msg
    assert "A probe that fits: probe: {ab_range: [10, 64], token_range: [2, 256]}" in msg
    assert "probe.seq_len 128" not in msg and "seq_len: 128" not in msg


def test_misfits_against_hand_built_limits():
    limits = fit.Limits(160, "n_positions", "cfg", 256, "cfg")
    fits = {"n_sequences": 8, "seq_len": 160, "ab_range": [12, 80], "token_range": [2, 256],
            "prepend_bos": False, "bos_token_id": None}
    assert fit.misfits(fits, limits) == [] and fit.misfit("m", fits, limits) is None
    assert fit.misfits({**fits, "ab_range": [12, 154]}, limits)[0][0] == "ab_range"  # 154 > 160 - 7
    assert fit.misfits({**fits, "ab_range": [12, 153]}, limits) == []
    bos = {**fits, "ab_range": [12, 153], "prepend_bos": True, "bos_token_id": 256}
    assert [k for k, _ in fit.misfits(bos, limits)] == ["ab_range", "bos_token_id"]  # 153 > 160 - 8 too
    assert fit.fitting_probe({**bos, "ab_range": [12, 80]}, limits) == {"prepend_bos": False}
    assert [k for k, _ in fit.misfits({**fits, "prepend_bos": True}, limits)] == ["bos_token_id"]
    # unknown limits: only the probe's own keys are checked
    assert fit.misfits({**fits, "seq_len": 4096, "token_range": [2, 10 ** 6]}, fit.Limits()) == []
    # a model too small for any probe says so instead of proposing one
    assert "No probe fits this model" in fit.misfit("m", fits, fit.Limits(40, "n_positions", "cfg"))


def test_the_words_of_whoever_typed_the_probe():
    limits = fit.Limits(CONTEXT, "max_position_embeddings", "cfg", VOCAB, "cfg")
    settings = {"seq_len": 256, "ab_range": [20, 128], "token_range": [100, 10000]}
    cli_msg = fit.misfit("ckpt", settings, limits, "cli", given={"seq_len"})
    assert cli_msg.startswith("ckpt: --seq-len 256 (tokens as fed")
    assert "--token-range 100 10000 (the default) reaches token id 9999" in cli_msg
    assert "A probe that fits: --seq-len 160 --token-range 2 256; or --probe auto" in cli_msg
    assert "probe." not in cli_msg and "models." not in cli_msg
    api_msg = fit.misfit("ckpt", settings, limits, "api")
    assert "A probe that fits: probe={'seq_len': 160, 'token_range': [2, 256]}; or probe={'derive': True}" in api_msg


# ---- the derived probe -------------------------------------------------------------------------


def test_derived_probe_keeps_the_papers_proportions():
    assert fit.derived_settings(2048, 50304) == {"seq_len": 256, "ab_range": [20, 128],
                                                 "token_range": [100, 10000]}  # the paper's probe
    assert fit.derived_settings(None, None) == fit.derived_settings(4096, 10000)
    assert fit.derived_settings(CONTEXT, VOCAB) == {"seq_len": 160, "ab_range": [12, 80],
                                                    "token_range": [2, 256]}
    assert fit.derived_settings(64, 128) == {"seq_len": 64, "ab_range": [5, 32], "token_range": [1, 128]}
    for ctx in range(64, 300, 7):  # every derived probe builds, with or without a BOS
        for bos in (False, True):
            d = fit.derived_settings(ctx, 1000)
            batch = synthetic.make_batch(n_sequences=3, seq_len=d["seq_len"], token_range=(d["token_range"][0], d["token_range"][1]), ab_range=(d["ab_range"][0], d["ab_range"][1]), prepend_bos=bos, bos_token_id=0)
            assert batch.seq_len == min(ctx, 256)
    with pytest.raises(ValueError, match="shorter than the shortest probe"):
        fit.derived_settings(63, 1000)
    with pytest.raises(ValueError, match="too small"):
        fit.derived_settings(128, 1)


def test_config_derive_resolves_before_any_job(newcomer):
    cfg = _local_config(newcomer / "broken", {"derive": True, "n_sequences": 16})
    panel.check(cfg)
    p = panel.probe_settings(cfg, "mine")
    assert (p["seq_len"], p["ab_range"], p["token_range"], p["n_sequences"]) == (160, [12, 80], [2, 256], 16)
    # keys the config sets win; ab_range follows the seq_len set
    cfg = _local_config(newcomer / "broken", {"derive": True}, model_probe={"seq_len": 128})
    assert panel.probe_kwargs(panel.probe_settings(cfg, "mine"))["ab_range"][1] == 64
    # a hub model's config.json comes with its fetch job: refused, naming the keys to set instead
    hubcfg = _local_config(newcomer, {"derive": True})
    hubcfg["models"]["mine"] = {"source": "hub", "hf_id": "org/mine", "revisions": ["step1"], "tokens_per_step": 1}
    assert "models.mine: probe.derive needs the model's config.json before any job" in _message(hubcfg)
    hubcfg["models"]["mine"]["probe"] = {"seq_len": 128, "ab_range": [10, 64], "token_range": [2, 256]}
    panel.check(hubcfg)  # nothing left to derive
    # no revision there yet: nothing to derive from
    assert "no revision's config.json" in _message(_local_config(newcomer / "nowhere", {"derive": True}))


def test_a_models_probe_block_overrides_the_global_one_key_by_key(newcomer):
    """Snakemake's validation fills in schema defaults under "properties": the probe blocks are
    validated without defaults, so a model's block does not reset the global keys it omits."""
    cfg = _local_config(newcomer / "broken", {"derive": True, "n_sequences": 16}, model_probe={"seed": 7})
    validate(cfg, str(ROOT / "config" / "schema.yaml"))
    assert cfg["models"]["mine"]["probe"] == {"seed": 7} and cfg["probe"] == {"derive": True, "n_sequences": 16}
    p = panel.probe_settings(cfg, "mine")
    assert (p["derive"], p["n_sequences"], p["seed"], p["seq_len"]) == (True, 16, 7, 160)


# ---- before any weight is read: the CLI, the API, the job start -------------------------------


def _no_weights(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the weights were read")
    monkeypatch.setattr(transformers.GPTNeoXForCausalLM, "from_pretrained", refuse)


def test_headtrace_cell_says_every_misfit_in_its_flags_before_the_weights(newcomer, capsys, monkeypatch):
    _no_weights(monkeypatch)
    ckpt = str(newcomer / "broken" / "step100")
    assert cli.main(["cell", ckpt, "--device", "cpu", "--seq-len", "200", "--ab-range", "20", "196"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("headtrace cell: broken step100: --seq-len 200 (tokens as fed")
    for said in ("--ab-range 20 196 ends after 193", "--token-range 100 10000 (the default) reaches token id 9999",
                 "A probe that fits: --seq-len 160 --ab-range 12 80 --token-range 2 256; or --probe auto"):
        assert said in err
    assert "probe." not in err and "models." not in err


def test_hub_checkpoint_refused_before_its_weights_are_read(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    _add_revision(root, "org/small", "step1", tiny_model("olmo", vocab_size=300))

    def no_weights(*a, **k):
        raise AssertionError("the weights were read")
    monkeypatch.setattr(transformers.OlmoForCausalLM, "from_pretrained", no_weights)
    with pytest.raises(ConfigError, match=r"models\.small: probe\.seq_len 300 .*context length of 256.*; "
                                          r"probe\.token_range \[100, 10000\).*vocabulary has 300"):
        hub.load_for_cell({"source": "hub", "hf_id": "org/small"}, "small", "step1", device="cpu",
                          cache_dir=str(root), seq_len=300, token_range=(100, 10000))
    with pytest.raises(AssertionError, match="weights were read"):  # a fitting probe goes on to the weights
        hub.load_for_cell({"source": "hub", "hf_id": "org/small"}, "small", "step1", device="cpu",
                          cache_dir=str(root), seq_len=64, token_range=(2, 300))


@pytest.mark.slow
def test_toy_vocabulary_from_the_recipe_or_the_arch():
    cfg = experiments.expand_models(copy.deepcopy(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())))
    panel.check(cfg)
    cfg.pop("groups")  # the test changes one toy's vocabulary: no longer its seed twin's
    name = next(m for m, s in cfg["models"].items() if s["source"] == "toy")
    cfg["models"][name]["train"].setdefault("arch", {})["vocab_size"] = 50
    assert f"models.{name}: probe.token_range" in _message(cfg) and "vocabulary has 50 tokens" in _message(cfg)
    cfg["probe"] = {**cfg["probe"], "derive": True}
    cfg["probe"].pop("token_range", None)
    panel.check(cfg)
    assert panel.probe_settings(cfg, name)["token_range"] == [0, 50]


def test_analyze_says_every_misfit_and_runs_the_derived_probe(newcomer):
    model, _ = hub.load_model("local", str(newcomer / "run" / "step100"), "step100")
    with pytest.raises(ValueError) as err:
        headtrace.analyze(model, probe={"n_sequences": 4}, ablate=False)
    msg = str(err.value)
    assert "seq_len 256 (the default) (tokens as fed" in msg and "token_range [100, 10000) (the default)" in msg
    assert "probe={'seq_len': 160, 'token_range': [2, 256]}" in msg
    batch = api.probe_batch({"derive": True, "n_sequences": 12}, model)
    assert batch.seq_len == 160 and batch.token_span[1] <= 256 and 12 <= batch.ab.min() and batch.ab.max() < 80
    with pytest.raises(ValueError, match="derive needs the model"):
        api.probe_batch({"derive": True})
    cell = headtrace.analyze(model, probe={"derive": True, "n_sequences": 12}, ablate=True, n_random=2,
                             progress=False, name="mine", revision="step100")
    assert cell.screen.height == 2 * 4 and cell.verdict.height > 0
    # the held-out draw the ablation ran on repeats the derived probe, not the schema's defaults
    derived = api.probe_settings({"derive": True, "n_sequences": 12}, model)
    held = api.probe_batch({**derived, "seed": derived["seed"] + 1}, model)
    assert cell.verdict["ablation_probe"][0] == "held_out"
    assert cell.verdict["ablation_probe_sha256"][0] == synthetic.tokens_sha256(held.tokens)


def test_headtrace_cell_probe_auto_runs_end_to_end(newcomer, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["cell", str(newcomer / "run" / "step200"), "--probe", "auto", "--n-sequences", "12",
                     "--n-random", "2", "--device", "cpu", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "induction circuit" in printed
    assert ("probe derived from the checkpoint's config.json: --seq-len 160 --ab-range 12 80 "
            "--token-range 2 256") in printed
    attention = tables.conform(pl.read_parquet(out / "attention.parquet"), "attention")
    assert (attention["n_sequences"] == 12).all()


# ---- a panel without a token axis (issue 33 item 9): refused before any job -------------------


def test_a_revision_without_tokens_is_refused_naming_the_key(newcomer):
    cfg = _local_config(newcomer / "run", {"derive": True}, revisions=["final"])
    del cfg["models"]["mine"]["tokens_per_step"]
    msg = _message(cfg)
    assert msg.startswith("models.mine.revisions: no training tokens for 'final'")
    assert "set models.mine.tokens: {final: N}" in msg
    cfg["models"]["mine"]["revisions"] = list(REVISIONS)
    assert "set models.mine.tokens_per_step" in _message(cfg)
    cfg["models"]["mine"]["tokens"] = {"step100": 10, "step200": 20}
    panel.check(cfg)


# ---- the workflow: a derived probe on the newcomer's two revisions -----------------------------


@pytest.mark.slow
def test_workflow_runs_the_derived_probe_end_to_end(newcomer, tmp_path, warm_jobs):
    work = tmp_path
    cfg = {"models": {"mine": {"source": "local", "path": str(newcomer / "run"), "family": "auto",
                               "tokens_per_step": 4096, "revisions": list(REVISIONS)}},
           "probe": {"derive": True, "n_sequences": 16},
           "capture": {"device": "cpu", "batch_size": 8}, "bootstrap": {"n_resamples": 20},
           "ablation": {"n_random": 2, "batch_size": 8}, "experiments": {"enabled": False}}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(work), "--configfile",
           str(work / "config.yaml"), "--cores", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=warm_jobs)
    assert proc.returncode == 0, proc.stderr[-6000:]
    batch = synthetic.batch_from_table(tables.read(work / "results" / "probes" / "mine" / "induction_batch.parquet"))
    assert batch.seq_len == 160 and batch.token_span[0] >= 2 and batch.token_span[1] <= 256
    assert 12 <= batch.ab.min() and batch.ab.max() < 80 and len(batch.tokens) == 16
    traj = pl.read_parquet(work / "results" / "models" / "mine" / "trajectory.parquet")
    assert traj.select("revision").unique(maintain_order=True)["revision"].to_list() == list(REVISIONS)
    assert any((work / "results" / "figures").glob("*.png"))
    again = subprocess.run([*cmd, "-n"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert np.array_equal(batch.tokens, synthetic.batch_from_table(
        tables.read(work / "results" / "probes" / "mine" / "induction_batch.parquet")).tokens)
