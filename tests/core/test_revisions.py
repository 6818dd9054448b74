"""Revision names, tokens, log-spaced selection and the `headtrace revisions` command (no network)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from headtrace import cli
from headtrace.core import revisions as rv

# Recorded branch lists (abridged from the Hub).
PYTHIA = (["main", "step0"] + [f"step{2 ** i}" for i in range(10)]
          + [f"step{k * 1000}" for k in range(1, 144)])
OLMO = ["main", "step1000-tokens2B", "step2000-tokens4B", "step5000-tokens10B", "step11000-tokens23B",
        "step25000-tokens52B", "step56000-tokens117B", "step126000-tokens264B", "step285000-tokens597B",
        "step644000-tokens1350B", "step1454000-tokens3048B"]
OLMO2 = ["stage1-step0-tokens0B", "stage1-step1000-tokens5B", "stage1-step928646-tokens3896B",
         "stage2-ingredient1-step11931-tokens50B"]


@pytest.mark.parametrize("name, step", [
    ("step126000-tokens264B", 126000), ("step1", 1), ("step0", 0), ("main", None),
    ("stage1-step1000-tokens5B", 1000), ("stage2-ingredient1-step11931-tokens50B", 11931),
    ("mystep5", None), ("step5x", None), ("", None),
])
def test_parse_step(name, step):
    assert rv.parse_step(name) == step


@pytest.mark.parametrize("name, tokens", [
    ("step126000-tokens264B", 264_000_000_000), ("step1000-tokens1.5T", 1_500_000_000_000),
    ("step10-tokens40M", 40_000_000), ("step0-tokens0B", 0), ("step3-tokens2.25B", 2_250_000_000),
    ("step5-tokens12345", 12345), ("step1000-tokens5b", 5_000_000_000),
    ("step1000", None), ("main", None),
])
def test_parse_tokens(name, tokens):
    assert rv.parse_tokens(name) == tokens


def test_parse_count():
    assert rv.parse_count("2M") == 2_000_000
    assert rv.parse_count(2097152) == 2097152
    assert rv.parse_count("0.5B") == 500_000_000
    for bad in ("1.5", "x", "", True):
        with pytest.raises(ValueError):
            rv.parse_count(bad)


def test_tokens_for_precedence():
    spec = {"tokens_per_step": 2097152, "tokens": {"main": 300_000_000_000, "step1000-tokens2B": 7}}
    assert rv.tokens_for("main", spec) == 300_000_000_000          # explicit map
    assert rv.tokens_for("step1000-tokens2B", spec) == 7             # map beats the name
    assert rv.tokens_for("step2000-tokens4B", spec) == 4_000_000_000  # name beats tokens_per_step
    assert rv.tokens_for("step143000", spec) == 143000 * 2097152     # tokens_per_step × step
    assert rv.tokens_for("step143000", {"tokens_per_step": "2M"}) == 143000 * 2_000_000
    assert rv.tokens_for("step2000-tokens4B", {"tokens_per_step": 10, "tokens_from_name": False}) == 20000
    assert rv.tokens_for("step2000-tokens4B", {"tokens_from_name": True}) == 4_000_000_000


def test_tokens_schedule_sums_the_phases():
    sched = [{"until": 400, "tokens_per_step": 512}, {"until": 1000, "tokens_per_step": 2048},
             {"tokens_per_step": "4K"}]
    assert [rv.schedule_tokens(n, sched) for n in (0, 1, 400, 401, 1000, 1500)] == [
        0, 512, 400 * 512, 400 * 512 + 2048, 400 * 512 + 600 * 2048, 400 * 512 + 600 * 2048 + 500 * 4000]
    assert rv.tokens_for("step1000", {"tokens_schedule": sched}) == 400 * 512 + 600 * 2048
    assert rv.tokens_for("step7-tokens1M", {"tokens_schedule": sched}) == 1_000_000  # the name still wins
    closed = sched[:2]
    assert rv.schedule_tokens(1000, closed) == 400 * 512 + 600 * 2048
    with pytest.raises(ValueError, match="beyond the tokens_schedule, which ends at step 1000"):
        rv.schedule_tokens(1001, closed)
    with pytest.raises(ValueError, match=r"tokens_schedule\[1\].until = 300"):
        rv.schedule_tokens(5, [{"until": 400, "tokens_per_step": 1}, {"until": 300, "tokens_per_step": 1}])
    with pytest.raises(ValueError, match=r"tokens_schedule\[0\]: only the last"):
        rv.schedule_tokens(5, [{"tokens_per_step": 1}, {"tokens_per_step": 2}])
    with pytest.raises(ValueError, match=r"tokens_schedule\[0\]: needs tokens_per_step"):
        rv.schedule_tokens(5, [{"until": 9}])
    with pytest.raises(ValueError, match="not both"):
        rv.tokens_for("step5", {"tokens_per_step": 1, "tokens_schedule": sched})
    with pytest.raises(ValueError, match="'main'.*tokens_schedule"):
        rv.tokens_for("main", {"tokens_schedule": sched})


def test_tokens_for_none_and_errors():
    assert rv.tokens_for("step5-tokens4B", {}) is None
    assert rv.tokens_for("step5", {"hf_id": "x", "revisions": ["step5"]}) is None
    with pytest.raises(ValueError, match="'main'"):
        rv.tokens_for("main", {"tokens_per_step": 100})
    with pytest.raises(ValueError, match="'step5'"):
        rv.tokens_for("step5", {"tokens_from_name": True})
    with pytest.raises(ValueError, match="'step7'.*tokens"):
        rv.tokens_for("step7", {"tokens": {"step5": 1}})


def test_log_spaced_pythia():
    items = [(r, rv.parse_step(r)) for r in PYTHIA]
    picked = rv.log_spaced(items, 8)
    assert len(picked) == 8 and picked[0] == "step0" and picked[-1] == "step143000"
    steps = [rv.parse_step(r) for r in picked]
    assert steps == sorted(steps) and "main" not in picked
    assert steps == [0, 4, 32, 128, 1000, 5000, 26000, 143000]
    # roughly geometric once past the first few: ratios of consecutive log1p values are stable
    assert rv.log_spaced(items, 2) == ["step0", "step143000"]
    assert rv.log_spaced(items, 1) == ["step143000"]


def test_log_spaced_dedupe_and_small():
    items = [("a", 1), ("a", 1), ("b", 1), ("c", None), ("d", 10), ("e", -3)]
    assert rv.log_spaced(items, 10) == ["a", "d"]
    assert rv.log_spaced([], 3) == []
    with pytest.raises(ValueError):
        rv.log_spaced(items, 0)


def test_log_spaced_olmo_tokens():
    items = [(r, rv.parse_tokens(r)) for r in OLMO]
    picked = rv.log_spaced(items, 4)
    assert picked[0] == "step1000-tokens2B" and picked[-1] == "step1454000-tokens3048B"
    assert len(picked) == 4 and len(set(picked)) == 4


def test_sort_revisions():
    assert rv.sort_revisions(["main", "step10", "step2", "step10"]) == ["step2", "step10", "main"]


def test_toy_step_exact_names_and_ints_only():
    import numpy as np
    assert rv.toy_step("step0") == 0 and rv.toy_step("step1500") == 1500
    assert rv.toy_step(7) == 7 and rv.toy_step(np.int64(9)) == 9
    for bad in ("main", "step", "run1-step5", "step5-tokens10B", "Step5", True):
        with pytest.raises(ValueError, match="must be named step<N>"):
            rv.toy_step(bad)


def test_parse_name_list_skips_blanks_and_comments():
    text = "# recorded 2026-11-30\nstep1\n\n  step2   # kept\n#step3\nmain\n"
    assert rv.parse_name_list(text) == ["step1", "step2", "main"]


def test_training_order_key_tokens_then_step_then_name_missing_last():
    revs = [("main", None), ("step20", None), ("step3", None), ("b", 5), ("a", 5), ("step9", 2)]
    got = [r for r, _ in sorted(revs, key=lambda rt: rv.training_order_key(*rt))]
    assert got == ["step9", "a", "b", "step3", "step20", "main"]


def test_config_block_parses():
    block = rv.config_block("EleutherAI/pythia-160m", None, ["step0", "step1000", "step143000"])
    doc = yaml.safe_load(block)
    m = doc["models"]["pythia-160m"]
    assert m == {"source": "hub", "hf_id": "EleutherAI/pythia-160m", "family": "auto",
                 "revisions": ["step0", "step1000", "step143000"], "tokens_per_step": 2097152}
    doc = yaml.safe_load(rv.config_block("allenai/OLMo-1B-0724-hf", "olmo1b", OLMO[1:3]))
    assert doc["models"]["olmo1b"]["tokens_from_name"] is True
    assert doc["models"]["olmo1b"]["revisions"] == OLMO[1:3]
    doc = yaml.safe_load(rv.config_block("org/x", "x", ["step1", "main"], tokens={"step1": 5, "main": "1B"}))
    assert doc["models"]["x"]["tokens"] == {"step1": 5, "main": 1_000_000_000}
    unknown = rv.config_block("org/y", "y", ["step1"])
    assert "# tokens unknown" in unknown and "tokens_per_step" not in yaml.safe_load(unknown)["models"]["y"]


def test_cli_pythia(tmp_path, capsys):
    f = tmp_path / "branches.txt"
    f.write_text("\n".join(PYTHIA) + "\n")
    assert cli.main(["revisions", "EleutherAI/pythia-1b", "--log-spaced", "8", "--name", "pythia-1b",
                     "--from-file", str(f)]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    m = doc["models"]["pythia-1b"]
    assert m["revisions"] == ["step0", "step4", "step32", "step128", "step1000", "step5000", "step26000",
                              "step143000"]
    assert m["source"] == "hub" and m["family"] == "auto" and m["tokens_per_step"] == 2097152
    # every chosen revision has tokens under the emitted spec
    assert all(rv.tokens_for(r, m) is not None for r in m["revisions"])


def test_cli_olmo(tmp_path, capsys):
    f = tmp_path / "branches.txt"
    f.write_text("# recorded\n" + "\n".join(OLMO2 + OLMO) + "\n")
    assert cli.main(["revisions", "allenai/OLMo-1B-0724-hf", "--log-spaced", "5", "--from-file", str(f)]) == 0
    m = yaml.safe_load(capsys.readouterr().out)["models"]["olmo-1b-0724-hf"]
    assert m["tokens_from_name"] is True and len(m["revisions"]) == 5
    assert all(rv.tokens_for(r, m) is not None for r in m["revisions"])
    assert "main" not in m["revisions"] and m["revisions"][0] == "stage1-step0-tokens0B"


def test_cli_no_steps(tmp_path, capsys):
    f = tmp_path / "b.txt"
    f.write_text("main\n")
    assert cli.main(["revisions", "org/x", "--log-spaced", "3", "--from-file", str(f)]) == 1


def test_cli_summary_empty(tmp_path, capsys):
    assert cli.main(["summary", str(tmp_path)]) == 0
    assert "no trajectories" in capsys.readouterr().out


# ------------------------------------------------------------------------------ every public suite (issue 27)

SUITES = Path(__file__).parents[1] / "fixtures" / "suites"


@pytest.mark.parametrize("name, step, tokens", [
    ("step0", 0, None), ("step143000", 143000, None),                                   # Pythia / PolyPythias
    ("step557000-tokens2464B", 557000, 2_464_000_000_000),                              # OLMo-1
    ("step1000-tokens4194304", 1000, 4_194_304),                                        # OLMo, plain count
    ("stage1-step1907359-tokens4001B", 1907359, 4_001_000_000_000),                     # OLMo-2 stage 1
    ("step150-tokens1B", 150, 1_000_000_000),                                           # early, no stage1-
    ("stage2-ingredient2-step11931-tokens50B", 11931, 50_000_000_000),                  # OLMo-2 stage 2
    ("stage1-step1413814", 1413814, None), ("stage3-step5000", 5000, None),             # Olmo 3
    ("step1220000-tokens5117B", 1220000, 5_117_000_000_000),                            # OLMoE
    ("ckpt_000", 0, None), ("ckpt_358", 358, None),                                     # Amber (index)
    ("step-480k-token-1007B", 480000, 1_007_000_000_000),                               # TinyLlama branch
    ("TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T", 480000, 10**12),             # TinyLlama repos
    ("PY007/TinyLlama-1.1B-step-50K-105b", 50000, 105_000_000_000),
    ("TinyLlama/TinyLlama-1.1B-intermediate-step-1195k-token-2.5T", 1195000, 2_500_000_000_000),
    ("step-125000", 125000, None),                                                      # SmolLM2
    ("stage2-step-3480000", 3480000, None), ("lc-4k-to-32k-step-4000", 4000, None),     # SmolLM3
    ("it-SFT", None, None), ("it-soup-APO", None, None),
    ("checkpoint-0", 0, None), ("checkpoint-400000", 400000, None),                     # CRFM GPT-2
    ("global_step1000", 1000, None), ("global_step600000", 600000, None),               # BLOOM
    ("main", None, None), ("mystep5", None, None), ("step5x", None, None),
])
def test_every_naming_scheme(name, step, tokens):
    assert rv.parse_step(name) == step
    assert rv.parse_tokens(name) == tokens


def test_stages_order_after_pretraining_and_are_marked():
    names = ["it-SFT", "stage2-ingredient1-step1000-tokens5B", "lc-32k-to-64k-step-4000", "main",
             "stage1-step928646-tokens3896B", "lc-4k-to-32k-step-20000", "stage3-step-4240000", "step150-tokens1B"]
    assert rv.sort_revisions(names) == [
        "step150-tokens1B", "stage1-step928646-tokens3896B", "stage2-ingredient1-step1000-tokens5B",
        "stage3-step-4240000", "lc-4k-to-32k-step-20000", "lc-32k-to-64k-step-4000", "main", "it-SFT"]
    key = [(r, rv.parse_tokens(r)) for r in ("stage2-ingredient1-step1000-tokens5B", "stage1-step928646-tokens3896B")]
    assert [r for r, _ in sorted(key, key=lambda rt: rv.training_order_key(*rt))][0].startswith("stage1")
    assert rv.stage_label("stage2-ingredient1-step1000-tokens5B") == "stage 2 (annealing)"
    assert rv.stage_label("stage1-step1000") is None and rv.stage_label("step1000") is None
    assert rv.stage_label("stage3-step-4240000") == "stage 3"
    assert rv.stage_label("lc-4k-to-32k-step-4000") == "long context 32k"
    assert rv.stage_label("it-SFT") == "post-training"
    block = rv.config_block("allenai/OLMo-2-0425-1B", "o", ["stage1-step0-tokens0B", "stage2-ingredient1-step1000-tokens3B"])
    assert "stage2-ingredient1-step1000-tokens3B  # stage 2 (annealing)" in block
    assert yaml.safe_load(block)["models"]["o"]["revisions"][1] == "stage2-ingredient1-step1000-tokens3B"


def test_training_positions_shift_restarting_stages_only():
    pos = rv.training_positions([("stage1-step0-tokens0B", 0), ("stage1-step9-tokens90B", 90),
                                 ("stage2-ingredient1-step1-tokens10B", 10), ("stage2-ingredient1-step2-tokens20B", 20)])
    assert pos["stage2-ingredient1-step1-tokens10B"] > pos["stage1-step9-tokens90B"]
    assert pos["stage2-ingredient1-step2-tokens20B"] > pos["stage2-ingredient1-step1-tokens10B"]
    global_steps = rv.training_positions([("stage1-step-40", 40), ("stage2-step-80", 80)])  # SmolLM3: no restart
    assert global_steps == {"stage1-step-40": 40, "stage2-step-80": 80}


def _fixture(name):
    return rv.parse_name_list((SUITES / name).read_text())


@pytest.mark.parametrize("fixture", sorted(p.name for p in SUITES.glob("*.txt")))
def test_every_fixture_parses(fixture):
    names = _fixture(fixture)
    for n in names:
        if not n.startswith("it-"):
            assert rv.parse_step(n) is not None, n
    if names:
        chosen = rv.choose_log_spaced(names, 10)
        assert len(chosen) == min(10, len(names))
        assert chosen[0] == rv.sort_revisions(names)[0]  # the earliest is always there


@pytest.mark.parametrize("fixture, hf_id, first, last", [
    ("pythia.txt", "EleutherAI/pythia-160m", "step0", "step143000"),
    ("olmo2-1b.txt", "allenai/OLMo-2-0425-1B", "stage1-step0-tokens0B", "stage2-ingredient1-step23852-tokens51B"),
    ("olmo2-7b.txt", "allenai/OLMo-2-1124-7B", "stage1-step150-tokens1B", "stage2-ingredient1-step11931-tokens50B"),
    ("crfm-gpt2.txt", "stanford-crfm/alias-gpt2-small-x21", "checkpoint-0", "checkpoint-400000"),
    ("tinyllama.txt", "TinyLlama/tinyLlama-intermediate-checkpoints", "step-5k-token-10B", "step-725k-token-1520B"),
    ("amber.txt", "LLM360/Amber", "ckpt_000", "ckpt_358"),
    ("smollm2-1.7b.txt", "HuggingFaceTB/SmolLM2-1.7B-intermediate-checkpoints", "step-125000", "step-5125000"),
    ("bloom-560m.txt", "bigscience/bloom-560m-intermediate", "global_step1000", "global_step600000"),
])
def test_cli_log_spaced_from_fixture(fixture, hf_id, first, last, capsys):
    assert cli.main(["revisions", hf_id, "--log-spaced", "10", "--name", "m",
                     "--from-file", str(SUITES / fixture)]) == 0
    out = capsys.readouterr().out
    m = yaml.safe_load(out)["models"]["m"]
    revs = m["revisions"]
    assert revs[0] == first and revs[-1] == last and len(revs) == min(10, len(_fixture(fixture)))
    assert revs == [r for r in rv.sort_revisions(revs)]  # training order, stage 2 last
    stage2 = [r for r in revs if rv.stage_of(r)[0] > 0]
    assert all(revs.index(r) > revs.index(s) for r in stage2 for s in revs if rv.stage_of(s)[0] == 0)
    for r in stage2:
        assert f"{r}  # stage 2" in out


def test_olmo3_panel_follows_its_manifest_fixture(capsys, monkeypatch):
    """config/suites/olmo3.yaml: ten stage-1 revisions as `headtrace revisions --log-spaced 10` chooses
    them from the fixture's stage-1 names (stage1-step0 first), then the last checkpoint of stage 2 and
    of stage 3; every name in the fixture, in training order; tokens step x 4,194,304 in stage 1 and
    the stage totals for the later stages, which restart their steps."""
    import io

    names = _fixture("olmo3-7b.txt")
    stage1 = [n for n in names if n.startswith("stage1-")]
    later = {k: [n for n in names if n.startswith(f"stage{k}-")] for k in (2, 3)}
    assert (len(stage1), len(later[2]), len(later[3])) == (1415, 48, 12)  # the manifest's rows
    assert len(names) == len(set(names)) == 1415 + 48 + 12
    assert stage1[0] == "stage1-step0" and stage1[-1] == "stage1-step1413814"
    assert all(rv.parse_tokens(n) is None and rv.parse_step(n) is not None for n in names)
    # the parser puts stage 2 after every stage-1 name and stage 3 after stage 2, whatever the steps
    assert rv.sort_revisions(list(reversed(names))) == names
    assert [rv.stage_label(n) for n in ("stage1-step0", later[2][0], later[3][0])] == [None, "stage 2", "stage 3"]

    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{n}\n" for n in stage1)))
    assert cli.main(["revisions", "allenai/Olmo-3-1025-7B", "--log-spaced", "10", "--name", "m",
                     "--from-file", "-"]) == 0
    chosen = yaml.safe_load(capsys.readouterr().out)["models"]["m"]["revisions"]

    suite = yaml.safe_load((Path(__file__).parents[2] / "config" / "suites" / "olmo3.yaml").read_text())
    spec = suite["models"]["olmo3-7b"]
    assert spec["hf_id"] == "allenai/Olmo-3-1025-7B" and spec["family"] == "olmo3"
    assert spec["revisions"] == chosen + [later[2][-1], later[3][-1]]
    assert chosen[0] == "stage1-step0" and len(chosen) == 10
    assert set(spec["revisions"]) <= set(names)
    assert spec["revisions"] == rv.sort_revisions(spec["revisions"])
    assert spec["tokens_per_step"] == 8192 * 512
    end1 = 1413814 * 8192 * 512
    assert rv.tokens_for("stage1-step631000", spec) == 631000 * 4_194_304
    assert rv.tokens_for("stage2-step47684", spec) == end1 + 47684 * 2**21  # midtraining: 2,097,152 a step
    assert rv.tokens_for("stage3-step11921", spec) == end1 + 47684 * 2**21 + 11921 * 65536 * 64
    tokens = [rv.tokens_for(r, spec) for r in spec["revisions"]]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
