"""headtrace revisions on a Hugging Face Trainer run (issue 51, point 7): the tokens per step proposed from
trainer_state.json and config.json, commented out and marked as a proposal; the missing step 0 said with
how to save one; each folder left out named with its own reason."""
from __future__ import annotations

import json

import polars as pl

from headtrace import cli
from headtrace.core import local_panel


def trainer_run(root, steps=(500, 1000, 1500), batch=16, context=160):
    for s in steps:
        d = root / f"checkpoint-{s}"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": context, "vocab_size": 256}))
        (d / "model.safetensors").write_bytes(b"")
        (d / "trainer_state.json").write_text(json.dumps({"global_step": s, "train_batch_size": batch}))
    return root


def test_tokens_per_step_is_proposed_from_the_trainer_files(tmp_path):
    root = trainer_run(tmp_path / "run")
    value, why = local_panel.proposed_tokens_per_step(root, ["checkpoint-500", "checkpoint-1500"])
    assert value == 16 * 160
    assert "train_batch_size 16 (trainer_state.json)" in why and "context 160 (n_positions" in why
    assert "gradient_accumulation_steps" in why
    block = local_panel.config_block(root, "run", ["checkpoint-500", "checkpoint-1500"])
    line = next(l for l in block.splitlines() if "tokens_per_step:" in l)
    assert line.strip().startswith("# tokens_per_step: 2560") and "PROPOSAL" in line  # never set silently
    given = local_panel.config_block(root, "run", ["checkpoint-500"], tokens_per_step=1000)
    assert "    tokens_per_step: 1000" in given and "PROPOSAL" not in given


def test_no_proposal_without_the_trainer_state(tmp_path):
    root = trainer_run(tmp_path / "run")
    for d in root.iterdir():
        (d / "trainer_state.json").unlink()
    assert local_panel.proposed_tokens_per_step(root, ["checkpoint-500"]) is None
    assert "tokens unknown" in local_panel.config_block(root, "run", ["checkpoint-500"])


def test_a_run_without_step_0_is_told_how_to_save_the_init(tmp_path):
    note = local_panel.no_init_note(["checkpoint-500", "checkpoint-1000"])
    assert "save_pretrained" in note and "before trainer.train()" in note and "another init" in note
    assert local_panel.no_init_note(["checkpoint-0", "checkpoint-500"]) is None


def test_revisions_of_a_folder_names_each_left_out_folder_with_its_reason(tmp_path, capsys):
    root = trainer_run(tmp_path / "run")
    (root / "runs").mkdir()  # TensorBoard logs: no step in the name
    opt = root / "checkpoint-2000"
    opt.mkdir()
    (opt / "config.json").write_text("{}")
    (opt / "optimizer.pt").write_bytes(b"")
    assert cli.main(["revisions", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "runs not listed: no step in the name" in err
    assert "checkpoint-2000 not listed: no *.safetensors (it holds config.json, optimizer.pt)" in err
    assert "tokens_per_step 2560 is a proposal" in err
    assert "# tokens_per_step: 2560" in out and "save_pretrained" in out


def test_revisions_help_names_folders_too(capsys):
    try:
        cli.main(["revisions", "--help"])
    except SystemExit:
        pass
    text = capsys.readouterr().out
    assert "SOURCE" in text and "folder of your own run's checkpoints" in text


def test_the_lineage_warning_of_a_trainer_run_says_it_has_no_step_0_unless_one_is_on_disk(tmp_path):
    from headtrace.findings import lineage
    from headtrace.panel import config as panel

    root = trainer_run(tmp_path / "run")
    spec = {"source": "local", "path": str(root / "{revision}"), "revisions": ["checkpoint-500", "checkpoint-1500"]}
    assert panel.init_published({"models": {"run": spec}}, "run") is False  # the Trainer saved none
    (root / "checkpoint-0").mkdir()  # the init, saved before trainer.train()
    assert panel.init_published({"models": {"run": spec}}, "run") is True
    other = {"source": "local", "path": str(tmp_path / "other"), "revisions": ["step100", "step400"]}
    assert panel.init_published({"models": {"x": other}}, "x") is None  # not known
    rows = [{"model": "run", "revision": "checkpoint-500", "order": 0, "reference": "checkpoint-500", "reference_is_init": False,
             "continues": None, "init_published": False}]
    (warning,) = lineage.reference_warnings(pl.DataFrame(rows))
    assert "publishes no step 0 to add" in warning
