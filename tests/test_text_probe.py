"""The text probe: files read (plain text, JSONL, Parquet), tokenised with the checkpoint's own
tokenizer (or bytes for the toys), cut into seq_len windows led by the tokenizer's BOS; bad input named."""
from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from tiny import tiny_model, tiny_tokenizer

import headtrace
from headtrace.core import tables, texts
from headtrace.core.errors import ConfigError
from headtrace.models import tokenize
from headtrace.panel import config as panel

TEXT = " ".join(["the first token of the text is a sink for every head of the model"] * 20)


def test_documents_from_plain_text_jsonl_and_parquet(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "three"}) + "\n\n" + json.dumps({"text": "four"}) + "\n")
    pl.DataFrame({"body": ["five", None, "six"]}).write_parquet(tmp_path / "c.parquet")
    assert texts.read_documents(str(tmp_path / "a.txt")) == ["one\n\ntwo"]  # a plain file is one document
    assert texts.read_documents(str(tmp_path / "b.jsonl")) == ["three", "four"]
    assert texts.read_documents(str(tmp_path / "c.parquet"), column="body") == ["five", "six"]
    assert len(texts.read_documents(str(tmp_path / "*.txt"))) == 1
    with pytest.raises(ValueError, match="no column 'text'"):
        texts.read_documents(str(tmp_path / "c.parquet"))
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="empty.txt' holds no text"):
        texts.read_documents(str(tmp_path / "empty.txt"))
    with pytest.raises(ValueError, match="no file matches"):
        texts.read_documents(str(tmp_path / "missing.txt"))


def test_byte_windows():
    ids, used = tokenize.text_sequences(["abcdefgh", "xy", "ijklmnop"], tokenize.ByteTokenizer(), 4, 10)
    assert used == 2  # "xy" is shorter than one window
    assert ids.tolist() == [list(b"abcd"), list(b"efgh"), list(b"ijkl"), list(b"mnop")]
    assert tokenize.text_sequences(["abcdefgh"], tokenize.ByteTokenizer(), 4, 1)[0].shape == (1, 4)
    with pytest.raises(ValueError, match="too short"):
        tokenize.text_sequences(["ab"], tokenize.ByteTokenizer(), 4, 3)


def test_checkpoint_tokenizer_puts_its_bos_before_every_window(tmp_path):
    tok = tiny_tokenizer(tmp_path / "ckpt")
    (tmp_path / "t.txt").write_text(TEXT)
    table = tokenize.build({"file": str(tmp_path / "t.txt"), "column": "text", "seq_len": 16, "n_sequences": 5},
                           None, tmp_path / "ckpt", "model 'm' revision 'r'")
    tables.conform(table, "text_probe")
    ids = tokenize.tokens_of(table)
    assert ids.shape == (5, 16) and (ids[:, 0] == 0).all() and not (ids[:, 1:] == 0).any()
    plain = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert ids[1, 1:].tolist() == plain[15:30]  # consecutive windows of 15 tokens after the BOS
    assert table["n_documents"][0] == 1 and table["file"][0].endswith("t.txt")
    # another revision with the same tokenizer passes; one without a tokenizer is named
    tiny_tokenizer(tmp_path / "other")
    tokenize.check_revision(table, None, tmp_path / "other", "revision 'b'")
    (tmp_path / "bare").mkdir()
    with pytest.raises(ValueError, match="revision 'c': no tokenizer in .*bare"):
        tokenize.check_revision(table, None, tmp_path / "bare", "revision 'c'")


def test_analyze_runs_the_text_probe_with_a_locally_built_tokenizer(tmp_path):
    model = tiny_model("llama")
    tiny_tokenizer(tmp_path / "tok")
    (tmp_path / "t.txt").write_text(TEXT)
    probe = {"n_sequences": 8, "seq_len": 64, "token_range": [2, 128], "seed": 1, "ab_range": [20, 30]}
    cell = headtrace.analyze(model, probe=probe, ablate=False, batch_size=8, progress=False,
                             settings={"repeated_probe": {"n_sequences": 4}},
                             text_probe={"file": str(tmp_path / "t.txt"), "tokenizer": str(tmp_path / "tok"),
                                         "seq_len": 32, "n_sequences": 6})
    m = cell.measures
    assert set(m["probe"].unique()) == {"repeated", "text"}
    text = m.filter(pl.col("probe") == "text")
    assert (text["n_sequences"] == 6).all() and (text["seq_len"] == 32).all()
    assert np.isfinite(text["sink_alpha"].to_numpy()).all()
    assert cell.text_probe.height == 6
    with pytest.raises(ValueError, match="no tokenizer in"):  # a model without a tokenizer folder, named
        headtrace.analyze(model, probe=probe, ablate=False, progress=False,
                          text_probe={"file": str(tmp_path / "t.txt")})


def test_config_fails_before_any_job_on_an_empty_file_or_a_revision_without_tokenizer(tmp_path):
    for rev in ("a", "b"):
        tiny_model("olmo").save_pretrained(tmp_path / "ckpt" / rev)
    tiny_tokenizer(tmp_path / "ckpt" / "a")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "t.txt").write_text(TEXT)
    config = {"models": {"m": {"source": "local", "path": str(tmp_path / "ckpt"), "family": "auto",
                               "revisions": ["a", "b"], "tokens": {"a": 1, "b": 2}}},
              "probe": {"seq_len": 64, "token_range": [2, 128], "ab_range": [20, 30]},
              "text_probe": {"file": str(tmp_path / "empty.txt")}}
    with pytest.raises(ConfigError, match="empty.txt' holds no text"):
        panel.check(config)
    config["text_probe"]["file"] = str(tmp_path / "t.txt")
    with pytest.raises(ConfigError, match="models.m revision 'b': no tokenizer in"):
        panel.check(config)
    tiny_tokenizer(tmp_path / "ckpt" / "b")
    panel.check(config)
    config["text_probe"]["tokenizer"] = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="text_probe.tokenizer: no tokenizer in"):
        panel.check(config)
