"""Adaptive refinement (headtrace.panel.refine) on hand-built trajectories with known brackets."""
from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from helpers.trajectories import one_layer_trajectory as traj

from headtrace.core import revisions as revs
from headtrace.core.tables import SCHEMAS
from headtrace.models.layout import local_checkpoint_path
from headtrace.panel import config as panel
from headtrace.panel import refine
from headtrace.report import refinement as report_refinement

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pythia_branches.txt"
PYTHIA_TPS = 2_097_152


def pythia_schedule() -> list[str]:
    """Pythia's published checkpoint branches: step0, 1, 2, 4 ... 512, then every 1000 to 143000."""
    return ["step0"] + [f"step{2 ** i}" for i in range(10)] + [f"step{k * 1000}" for k in range(1, 144)]


def test_recorded_pythia_branch_list_is_the_published_schedule():
    names = refine.read_branch_list(FIXTURE)
    assert names == pythia_schedule() and len(names) == 154
    assert revs.sort_revisions(names) == names


@pytest.mark.parametrize("name, parsed", [("induction_3_heads", ("induction", 3)),
                                          ("first_token_50pct", ("first_token", 50)),
                                          ("induction_12_heads", ("induction", 12))])
def test_parse_milestone(name, parsed):
    assert refine.parse_milestone(name) == parsed


@pytest.mark.parametrize("name", ["induction_0_heads", "first_token_150pct", "bos_50pct", "induction_3"])
def test_unknown_milestone_names_are_rejected(name):
    with pytest.raises(ValueError, match="unknown milestone"):
        refine.parse_milestone(name)
    cfg = {"models": {"m": {"source": "toy", "revisions": ["step0"]}}, "refine": {"milestones": [name]}}
    with pytest.raises(panel.ConfigError, match=r"refine\.milestones"):
        refine.check(cfg)


def test_brackets_find_the_first_crossing_and_the_revision_before():
    revisions = [("step0", 0), ("step10", 10_000), ("step100", 100_000), ("step1000", 1_000_000)]
    t = traj("m", revisions, {"step100": 3, "step1000": 4}, bos={"step0": 5, "step10": 5, "step100": 5, "step1000": 5})
    b = refine.brackets(t, ["induction_3_heads", "induction_5_heads", "first_token_50pct"]).sort("milestone")
    rows = {r["milestone"]: r for r in b.iter_rows(named=True)}
    ind = rows["induction_3_heads"]
    assert (ind["lo_revision"], ind["hi_revision"], ind["status"]) == ("step10", "step100", "bracket")
    assert ind["bracket_ratio"] == pytest.approx(10.0)
    assert rows["induction_5_heads"]["status"] == refine.NEVER and rows["induction_5_heads"]["hi_revision"] is None
    assert rows["first_token_50pct"]["status"] == refine.AT_FIRST and rows["first_token_50pct"]["lo_revision"] is None


def test_pick_between_takes_the_geometric_midpoint_and_k_sections():
    cands = [(f"s{t}", t) for t in (1_000, 2_000, 3_000, 5_000, 10_000, 20_000, 50_000, 100_000)]
    # bracket (1000, 100000): geometric midpoint 10000
    assert refine.pick_between(1_000, 100_000, cands, 1) == ["s10000"]
    # two points at 1000 * 100^(1/3) = 4642 and 100^(2/3) * 1000 = 21544
    assert refine.pick_between(1_000, 100_000, cands, 2) == ["s5000", "s20000"]
    # strictly inside: the endpoints themselves are never picked, nothing inside -> nothing
    assert refine.pick_between(1_000, 2_000, cands, 1) == []
    # more asked than there are: all inside, once each
    assert refine.pick_between(1_000, 5_000, cands, 5) == ["s2000", "s3000"]
    # a bracket from step 0 still has a midpoint (log1p)
    mid = math.expm1(math.log1p(100_000) / 2)
    best = min((t for _, t in cands if 0 < t < 100_000), key=lambda t: abs(math.log1p(t) - math.log1p(mid)))
    assert refine.pick_between(0, 100_000, cands, 1) == [f"s{best}"]


def test_plan_round_stopping_rules():
    revisions = [("a", 1_000), ("b", 100_000), ("c", 140_000), ("d", 1_000_000)]
    t = traj("m", revisions, {"b": 3, "c": 3, "d": 3}, bos={"d": 4})
    b = refine.brackets(t, ["induction_3_heads", "first_token_50pct", "induction_5_heads"])
    pool = [(f"x{v}", v) for v in (500, 10_000, 120_000, 300_000)] + [("b", 100_000)]
    plans = {p["milestone"]: p for p in refine.plan_round(b, pool, t["revision"].unique().to_list(), 1.5, 1)}
    assert plans["induction_3_heads"]["action"] == refine.ADDED and plans["induction_3_heads"]["added"] == ["x10000"]
    # first-token bracket (c, d] = 140k..1M: 300k is nearest the midpoint 374k
    assert plans["first_token_50pct"]["added"] == ["x300000"]
    assert plans["induction_5_heads"]["action"] == refine.NEVER and plans["induction_5_heads"]["added"] == []
    # target met: the bracket (b, c] has ratio 1.4 <= 1.5 -> nothing added
    t2 = traj("m", revisions, {"c": 3, "d": 3})
    p2 = refine.plan_round(refine.brackets(t2, ["induction_3_heads"]), pool, ["a", "b", "c", "d"], 1.5, 1)
    assert p2[0]["action"] == refine.TARGET_MET and p2[0]["added"] == []
    # already screened candidates are not candidates: pool exhausted
    p3 = refine.plan_round(refine.brackets(t2, ["induction_3_heads"]), [("b", 100_000)], ["a", "b", "c", "d"], 1.1, 1)
    assert p3[0]["action"] == refine.EXHAUSTED


def test_hub_refinement_against_the_recorded_pythia_branches():
    """Pythia configured like the paper's panel; induction crosses between step512 and step3000."""
    configured = ["step1", "step4", "step16", "step64", "step256", "step512", "step3000", "step10000",
                  "step38000", "step143000"]
    spec = {"tokens_per_step": PYTHIA_TPS}
    toks = {r: revs.tokens_for(r, spec) for r in configured}
    t = traj("pythia", [(r, toks[r]) for r in configured], {r: 3 for r in configured[6:]})
    names = refine.read_branch_list(FIXTURE) + ["main"]
    pool = refine.pool_pairs(names, spec)
    assert "main" not in dict(pool) and len(pool) == 154
    s = {**refine.DEFAULTS, "milestones": ["induction_3_heads"], "per_round": 2}
    rec = refine.run_round(t, "pythia", 1, pool, s)
    added = rec["added"]
    assert len(added) == 2 and set(added) <= set(pythia_schedule())
    lo, hi = toks["step512"], toks["step3000"]
    assert all(lo < revs.tokens_for(r, spec) < hi for r in added) and not set(added) & set(configured)
    # k-section of (512, 3000) in log tokens: ~916 and ~1677 -> step1000 and step2000
    assert added == ["step1000", "step2000"]


def test_onsets_table_over_rounds():
    # round 1 added m5 (reached), round 2 added m3 (not reached): final bracket (m3, m5]
    revisions = [("m1", 1_000), ("m3", 3_000), ("m5", 5_000), ("m9", 9_000)]
    t = traj("m", revisions, {"m5": 3, "m9": 3})
    def plan(lo, hi, ratio, added):
        return {"milestone": "induction_3_heads", "action": refine.ADDED, "added": added,
                "lo_revision": lo, "hi_revision": hi, "bracket_ratio": ratio}

    records = {"m": [{"round": 1, "milestones": [plan("m1", "m9", 9.0, ["m5"])]},
                     {"round": 2, "milestones": [plan("m1", "m5", 5.0, ["m3"])]}]}
    info = {"m": {"milestones": ["induction_3_heads"], "target_ratio": 1.5, "refine": True, "source": "local"},
            "r": {"milestones": ["induction_3_heads"], "target_ratio": 1.5, "refine": False, "source": "reference"}}
    t = pl.concat([t, traj("r", [("p1", 10), ("p2", 100)], {"p2": 3})])
    out = refine.onsets(t, info, records)
    assert out.columns == list(SCHEMAS["f3_onsets"])
    m = out.filter(pl.col("model") == "m").row(0, named=True)
    assert (m["lo_revision"], m["hi_revision"], m["rounds"], m["n_added"]) == ("m3", "m5", 2, 2)
    assert m["bracket_ratio"] == pytest.approx(5 / 3) and not m["target_met"] and m["stop"] == refine.MAX_ROUNDS
    assert m["onset_lo_revision"] is None and m["onset_hi_revision"] is None
    assert (m["unrefined_lo_revision"], m["unrefined_hi_revision"], m["unrefined_ratio"]) == ("m1", "m9", 9.0)
    text = report_refinement.summary_section(out)
    assert "m induction_3_heads: onset bracket (m1, m9] 9x from the configured revisions -> (m3, m5] 1.67x" in text
    assert "r induction_3_heads: " + refine.NO_POOL in text
    r = out.filter(pl.col("model") == "r").row(0, named=True)
    assert (r["rounds"], r["n_added"], r["stop"]) == (0, 0, refine.NO_POOL)
    assert (r["unrefined_lo_revision"], r["unrefined_ratio"]) == ("p1", 10.0)  # unrefined: the bracket itself


def test_settings_merge_and_refinement_needs_tokens():
    cfg = {"models": {"a": {"source": "local", "path": "/x", "revisions": ["r1"], "refine": {"per_round": 2}},
                      "p": {"source": "reference", "published": "pythia1b", "revisions": ["step1"]}},
           "refine": {"enabled": True, "max_rounds": 3}}
    s = refine.settings(cfg, "a")
    assert (s["enabled"], s["max_rounds"], s["per_round"], s["target_ratio"]) == (True, 3, 2, 1.5)
    assert not refine.enabled(cfg, "p")  # reference: nothing to add
    with pytest.raises(panel.ConfigError, match="models.a: refinement needs training tokens"):
        refine.check(cfg)


def test_record_roundtrip(tmp_path):
    rec = refine.round_record("m", 1, [{"milestone": "x", "added": ["b", "a"]}], [("a", 2), ("b", 1)], {"a": 2, "b": 1})
    assert rec["added"] == ["b", "a"]  # token order
    refine.write_record(rec, tmp_path / "r.json")
    assert refine.read_added(tmp_path / "r.json") == ["b", "a"]


def _ckpt(folder: Path, weights: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if weights:
        (folder / "model.safetensors").write_bytes(b"")


def test_live_panel_lists_checkpoint_folders_in_step_order(tmp_path):
    for name in ("checkpoint-10", "checkpoint-2", "checkpoint-100"):
        _ckpt(tmp_path / name)
    _ckpt(tmp_path / "checkpoint-5", weights=False)  # still being written
    _ckpt(tmp_path / "tmp-checkpoint-7")  # HF Trainer's staging name: not matched by the glob
    (tmp_path / "checkpoint-9.json").write_text("{}")  # not a folder
    assert revs.parse_step("checkpoint-500") == 500
    assert revs.list_checkpoints(tmp_path, "checkpoint-*") == ["checkpoint-2", "checkpoint-10", "checkpoint-100"]
    cfg = {"models": {"live": {"source": "local", "path": str(tmp_path), "tokens_per_step": 10,
                               "revisions": {"glob": "checkpoint-*"}}}}
    panel.expand_revisions(cfg)
    spec = cfg["models"]["live"]
    assert spec["revisions"] == ["checkpoint-2", "checkpoint-10", "checkpoint-100"]
    assert spec["revisions_glob"] == "checkpoint-*"
    assert panel.cell_tokens(cfg, "live", "checkpoint-10") == 100
    assert refine.pool_pairs(revs.list_checkpoints(tmp_path), spec)[0] == ("checkpoint-2", 20)


def test_live_panel_glob_errors_name_the_key(tmp_path):
    cfg = {"models": {"live": {"source": "local", "path": str(tmp_path), "revisions": {"glob": "step*"}}}}
    with pytest.raises(panel.ConfigError, match=r"models\.live\.revisions: no checkpoint folder matching 'step\*'"):
        panel.expand_revisions(cfg)
    cfg = {"models": {"t": {"source": "toy", "family": "olmo", "revisions": {"glob": "step*"}}}}
    with pytest.raises(panel.ConfigError, match=r"models\.t\.revisions: a glob needs a local model"):
        panel.expand_revisions(cfg)
    cfg = {"models": {"live": {"source": "local", "path": str(tmp_path / "{revision}" / "hf"),
                               "revisions": {"glob": "step*"}}}}
    with pytest.raises(panel.ConfigError, match=r"models\.live\.revisions: .* has \{revision\} elsewhere: list the "
                                                r"revisions by name instead of a glob"):
        panel.expand_revisions(cfg)


def test_live_panel_glob_takes_the_path_headtrace_revisions_writes(tmp_path):
    """``headtrace revisions`` writes ``path: RUN/{revision}``; a glob over it lists RUN's folders, and each
    cell reads the same folder as with ``path: RUN``."""
    for name in ("checkpoint-20", "checkpoint-3"):
        _ckpt(tmp_path / name)
    for path in (str(tmp_path / "{revision}"), str(tmp_path / "{revision}") + "/", str(tmp_path)):
        cfg = {"models": {"live": {"source": "local", "path": path, "revisions": {"glob": "checkpoint-*"}}}}
        panel.expand_revisions(cfg)
        assert cfg["models"]["live"]["revisions"] == ["checkpoint-3", "checkpoint-20"], path
        assert local_checkpoint_path(cfg["models"]["live"], "checkpoint-20").rstrip("/") == str(tmp_path / "checkpoint-20")


def test_cli_lists_branches_as_a_recorded_branch_list(tmp_path, capsys):
    from headtrace import cli

    shuffled = list(reversed(pythia_schedule())) + ["main"]
    (tmp_path / "in.txt").write_text("\n".join(shuffled) + "\n")
    assert cli.main(["revisions", "EleutherAI/pythia-14m", "--from-file", str(tmp_path / "in.txt"), "--list"]) == 0
    (tmp_path / "out.txt").write_text(capsys.readouterr().out)
    assert refine.read_branch_list(tmp_path / "out.txt") == pythia_schedule() + ["main"]
