"""Checkpoint lineage (headtrace.findings.lineage) on hand-built fingerprint tables with known answers.

The fast half of the lineage tests: synthetic fingerprints (tests/helpers/lineage_fingerprints.py: the sketch is
the matrix itself) and hand-built lineage rows, no model and no file. The mutation check (docs/testing.md)
runs these for every mutant of the module; tests/test_lineage.py trains a toy panel and checks the same
flags on real fingerprints.
"""
from __future__ import annotations

import math

import numpy as np

import polars as pl
import pytest
from helpers.lineage_fingerprints import drift as _drift
from helpers.lineage_fingerprints import synthetic as _synthetic

from headtrace.core import results, tables
from headtrace.findings import lineage, lineage_panel
from headtrace.panel import config as panel_config
from headtrace.report import lineage as report_lineage


def no_flags(table: pl.DataFrame) -> bool:
    return int(table["flags"].list.len().sum()) == 0


def _rows(*rows: dict) -> pl.DataFrame:
    spec = tables.SCHEMAS["lineage"]
    return pl.DataFrame([{**dict.fromkeys(spec), "detail": None, **r} for r in rows], schema=spec)


def _renamed(fp: pl.DataFrame, model: str, revision: str) -> pl.DataFrame:
    return fp.with_columns(pl.lit(model).alias("model"), pl.lit(revision).alias("revision"))


def _panel(start: int | None, continues: bool) -> pl.DataFrame:
    """A base run (step0..step5) and a two-revision continuation whose step0 is the base's
    ``step{start}`` byte for byte (``None``: weights of its own), declared or not."""
    chain = _drift(5, keep=0.9, seed=4)
    base = _synthetic(chain, model="base")
    own = _synthetic(_drift(1, keep=0.9, seed=5, start=chain[5 if start is None else start]), model="base-shift")
    if start is None:  # step0 near the base's step5 but not its bytes
        own = own.with_columns(pl.col("sketch").list.eval(pl.element() * 1.001), pl.col("norm") * 1.001)
        shift = own
    else:
        shift = pl.concat([_renamed(base.filter(pl.col("revision") == f"step{start}"), "base-shift", "step0"),
                           own.filter(pl.col("revision") == "step1")])
    tokens = {("base", f"step{k}"): k for k in range(6)} | {("base-shift", "step0"): 5, ("base-shift", "step1"): 6}
    return tables.conform(lineage.lineage(pl.concat([base, shift]), tokens,
                                          continues={"base-shift": "base"} if continues else None), "lineage")


def test_on_suspect_lines_and_the_failure_message_in_words():
    table = _rows(dict(model="toy", revision="s1", flags=[]),
                  dict(model="toy", revision="s2", flags=["duplicate_of"], duplicate_of=["s1"],
                       detail="every weight file equals s1's"),
                  dict(model="toy", revision="s3", flags=["shares_shard_with", "discontinuous"],
                       shares_shard_with=["s5", "s6", "s7"]))
    lines = ["model 'toy' revision 's2': the same weights as s1 (every weight file equals s1's)",
             "model 'toy' revision 's3': a weight file shared with s5, s6 and s7, a break in the chain of revisions"]
    assert lineage.check_on_suspect(table, "warn") == lines == lineage.check_on_suspect(table, "drop")
    with pytest.raises(ValueError) as failed:
        lineage.check_on_suspect(table, "fail")
    assert str(failed.value) == ("provenance.on_suspect is 'fail' and the lineage check flagged these revisions "
                                 "(docs/integrity.md: dropping or replacing a flagged revision):\n  " + "\n  ".join(lines))
    assert lineage.check_on_suspect(table.filter(pl.col("revision") == "s1"), "fail") == []
    with pytest.raises(ValueError) as bad:
        lineage.check_on_suspect(table, "ignore")
    assert str(bad.value) == "provenance.on_suspect must be warn, drop or fail, got 'ignore'"
    assert lineage.suspect_map(table) == {("toy", "s2"): ["the same weights as s1"],
                                          ("toy", "s3"): ["a weight file shared with s5, s6 and s7",
                                                          "a break in the chain of revisions"]}
    assert lineage.suspect_map(None) == {} and lineage.suspect_map(table.clear()) == {}


def test_flags_in_words():
    labels = lineage.flag_labels
    assert labels({"flags": ["duplicate_of"], "duplicate_of": "s1"}) == ["the same weights as s1"]  # one name, a string
    assert labels({"flags": ["shares_shard_with"], "shares_shard_with": ["a", "b", "c"]}) == [
        "a weight file shared with a, b and c"]
    assert labels({"flags": ["duplicate_of"], "duplicate_of": []}) == ["the same weights as ?"]
    assert labels({"flags": ["a_flag_of_tomorrow", "discontinuous"]}) == ["a_flag_of_tomorrow",
                                                                         "a break in the chain of revisions"]
    assert labels({"flags": None}) == []
    assert lineage.flagged(None).is_empty() and lineage.flagged(None).columns == list(tables.SCHEMAS["lineage"])


def test_drift_far_from_init_is_descent_by_chain_and_another_init_is_not():
    healthy = _drift(20, keep=0.85, seed=0)  # consecutive cosine ~0.85, to step0 0.85^k -> ~0.04 at step 20
    table = lineage.model_lineage(_synthetic(healthy), {f"step{k}": k for k in range(21)})
    last = table.row(-1, named=True)
    # the direct test alone would flag the end of this healthy run: its cosine to step0 is under 4 null SDs
    assert last["cos_from_first"] < lineage.Z * last["cos_sd"]
    assert last["descent"] == "chain" and not last["flags"] and no_flags(table)
    assert table["descent"].to_list()[:2] == ["reference", "direct"] and table["reference_is_init"].all()
    # the same run after a foreign step0 (another seed's init): every later revision is flagged
    foreign = _drift(0, keep=0.85, seed=1) + healthy[1:]
    bad = lineage.model_lineage(_synthetic(foreign), {f"step{k}": k for k in range(21)})
    assert bad["descent"].to_list()[1:] == ["none"] * 20
    assert all(f == ["not_descended_from_init"] for f in bad["flags"].to_list()[1:])
    assert "no chain of revisions" in bad["detail"][1]


def test_a_last_revision_that_falls_back_towards_the_init_is_discontinuous():
    """step9 is step1 again (fresh digests, a little noise): its distance from step0 falls back from step8's,
    the farthest so far; the last revision has no detour to measure, so only the fall-back rule sees it."""
    import numpy as np

    run = _drift(8, keep=0.95, seed=4)
    rng = np.random.default_rng(5)
    run.append([v + 1e-3 * rng.normal(size=v.size) for v in run[1]])
    table = lineage.model_lineage(_synthetic(run), {f"step{k}": k for k in range(10)})
    rows = {r["revision"]: r for r in table.iter_rows(named=True)}
    assert rows["step9"]["flags"] == ["discontinuous"]
    assert rows["step9"]["detail"] == (f"distance from step0 falls back to {rows['step9']['dist_from_first']:.3f} "
                                       f"from {rows['step8']['dist_from_first']:.3f} (step8)")
    assert all(not rows[f"step{k}"]["flags"] for k in range(9))


def test_a_revision_whose_neighbours_are_one_point_is_a_detour_and_a_frozen_run_is_not():
    s0, s1, s2 = _drift(2, keep=0.9, seed=6)
    table = lineage.model_lineage(_synthetic([s0, s1, s2, s1]), {f"step{k}": k for k in range(4)})
    row = table.filter(pl.col("revision") == "step2").row(0, named=True)  # step1 -> step2 -> step1 again
    assert "discontinuous" in row["flags"] and row["detail"].startswith("detour inf > 2: step1→step2 ")
    frozen = lineage.model_lineage(_synthetic([s0, s1, s1, s1, s2]), {f"step{k}": k for k in range(5)})
    assert no_flags(frozen) and frozen["detour"].to_list()[2] == 1.0  # no step at all: no detour


def test_rows_in_token_order_with_their_digest_and_previous_distance():
    import hashlib

    run = _drift(2, keep=0.9, seed=8)
    names = {"step0": "init", "step1": "zeta", "step2": "alpha"}  # the names sort otherwise than the tokens
    fp = _synthetic(run).with_columns(pl.col("revision").replace(names))
    table = lineage.model_lineage(fp, {"init": 0, "zeta": 10, "alpha": 20})
    assert table["revision"].to_list() == ["init", "zeta", "alpha"] and table["order"].to_list() == [0, 1, 2]
    assert table["tokens"].to_list() == [0, 10, 20]
    # the digest: sha256 over the revision's sorted 'name sha256' tensor lines (_synthetic: sha 'syn-k-t')
    lines = sorted(f"m{t} syn-1-{t}" for t in range(40))
    assert table["weights_digest"][1] == hashlib.sha256("\n".join(lines).encode()).hexdigest()
    prev = table["dist_from_previous"].to_list()
    assert prev[0] is None and prev[1] == pytest.approx(table["dist_from_first"][1]) and prev[2] > 0


def test_pair_stats_on_exact_sketches_with_a_known_cosine():
    """Four unit-norm 64-long matrices, each at cosine 0.6 to its partner, the sketch the vector itself: every
    statistic has a closed form. d_t^2 = 2(1 - c), so rel = sqrt(2(1 - c)); Var(d_t^2) = 2 d_t^4 / m, so
    rel_sd = sqrt(T * 2 * 4(1 - c)^2 / m) / (2 rel T); sd0_t = sqrt(2 / m) (a2 + b2) / (2 ab) = sqrt(2 / m),
    so cos_sd = 1 / sqrt(T m / 2); the cosine is c."""
    import numpy as np

    rng = np.random.default_rng(9)
    T, m, c = 4, 64, 0.6
    a, b = [], []
    for _ in range(T):
        x = rng.normal(size=m)
        x /= np.linalg.norm(x)
        u = rng.normal(size=m)
        u -= (u @ x) * x
        u /= np.linalg.norm(u)
        a.append(x)
        b.append(c * x + math.sqrt(1 - c * c) * u)
    mod = lineage._Model(_synthetic([a, b]), ["step0", "step1"])
    s = lineage.pair_stats(mod, 0, 1)
    rel = math.sqrt(2 * (1 - c))
    assert s["n"] == T and s["rel"] == pytest.approx(rel) and s["cos"] == pytest.approx(c)
    assert s["rel_sd"] == pytest.approx(math.sqrt(T * 2 * (2 * (1 - c)) ** 2 / m) / (2 * rel * T))
    assert s["cos_sd"] == pytest.approx(1 / math.sqrt(T * m / 2))
    zero = lineage._Model(_synthetic([[0 * x for x in a], [0 * x for x in a]]), ["step0", "step1"])
    z = lineage.pair_stats(zero, 0, 1)  # no norm: no distance or cosine to measure
    assert math.isnan(z["rel"]) and z["rel_sd"] == 0.0 and math.isnan(z["cos"]) and math.isnan(z["cos_sd"])
    assert z["n"] == T
    apart = lineage._Model(pl.concat([_synthetic([a]), _synthetic([a]).with_columns(
        revision=pl.lit("step1"), name=pl.col("name") + "x")]), ["step0", "step1"])  # no matrix in common
    assert lineage.pair_stats(apart, 0, 1) == {"rel": pytest.approx(math.nan, nan_ok=True),
                                               "rel_sd": pytest.approx(math.nan, nan_ok=True),
                                               "cos": pytest.approx(math.nan, nan_ok=True),
                                               "cos_sd": pytest.approx(math.nan, nan_ok=True), "n": 0}


def test_a_panel_without_its_init_is_warned_about():
    run = _drift(4, keep=0.9, seed=2)
    fp = _synthetic(run).filter(pl.col("revision") != "step0")
    table = lineage.model_lineage(fp, {f"step{k}": k for k in range(5)})
    assert table["reference"][0] == "step1" and not table["reference_is_init"][0]
    (warning,) = lineage.reference_warnings(table)
    assert "step1, is not the init" in warning and "pythia#203" in warning
    assert warning.endswith("add the run's step 0 to its revisions if it publishes one")  # not known: if
    # step 0 advised only to a run that has one: a toy's (it trains one); none for a single checkpoint
    (toy,) = lineage.reference_warnings(lineage.model_lineage(fp, {f"step{k}": k for k in range(5)}, init_published=True))
    assert toy.endswith("add the run's step 0 to its revisions")
    (single,) = lineage.reference_warnings(lineage.model_lineage(fp, {f"step{k}": k for k in range(5)},
                                                                 init_published=False))
    assert "publishes no step 0 to add" in single and "add the run's step 0" not in single
    said = ("model 'syn': the earliest revision, step1, is not the init (step 0); the check that each revision "
            "descends from the init compares with it, so it cannot see weights that are another init from it on "
            "(EleutherAI/pythia#203): ")
    assert warning == said + "add the run's step 0 to its revisions if it publishes one"
    assert toy == said + "add the run's step 0 to its revisions"
    assert single == said + ("this run publishes no step 0 to add, so that case stays unseen (a revision from "
                             "elsewhere between two others is still seen by the detour test)")
    config = {"models": {"t": {"source": "toy"}, "g": {"source": "local", "path": "m.gguf", "single_checkpoint": True},
                         "h": {"source": "hub", "hf_id": "o/n"}}}
    assert [panel_config.init_published(config, m) for m in ("t", "g", "h")] == [True, False, None]
    both = lineage.lineage(pl.concat([fp, fp.with_columns(pl.lit("b").alias("model"))]),
                           init_published={"b": False})
    assert dict(both.group_by("model").agg(pl.col("init_published").first()).rows()) == {"syn": None, "b": False}
    # a model with its init listed first is passed over, and the next one still read
    whole = lineage.model_lineage(_synthetic(run, model="aaa"), {f"step{k}": k for k in range(5)})
    assert lineage.reference_warnings(pl.concat([whole, table])) == [warning]
    assert lineage.reference_warnings(lineage.model_lineage(_synthetic(run), {f"step{k}": k for k in range(5)})) == []
    assert lineage.is_init("step0-tokens0B") and lineage.is_init("checkpoint-0") and not lineage.is_init("step01x0")
    assert not lineage.is_init("step10") and lineage.is_init("main", 0)
    md = report_lineage.section_markdown(table, ["syn", "pythia-1b-published"])
    assert "is not the init" in md and "Unchecked (no fingerprints" in md and "pythia-1b-published" in md
    assert "cosine to first ± null SD" in md
    only = report_lineage.section_html(None, ["pythia-1b-published"])
    assert "Unchecked" in only and "pythia-1b-published" in only


def test_a_declared_continuation_is_one_checkpoint_and_not_flagged():
    table = _panel(start=5, continues=True)
    assert no_flags(table) and report_lineage.suspect(table) == {}
    # its step0 carries the base's tokens: no init, but no warning either (its descent is the base's)
    first = table.filter(pl.col("model") == "base-shift").row(0, named=True)
    assert first["reference_is_init"] is False and lineage.reference_warnings(table) == []
    (alone,) = lineage.reference_warnings(table.filter(pl.col("model") == "base-shift"))  # the job's view
    assert alone == ("model 'base-shift' continues base: its earliest revision, step0, is no init; the report checks "
                     "that it is base's last checkpoint, whose descent base's table checks")
    (pair,) = lineage.declared_pairs(table)
    assert pair.startswith("base-shift step0 and base step5 are the same weights") and "counted once" in pair
    panel = lineage_panel.panel_table(table)  # the findings job's table, which the report words
    assert report_lineage.suspect(panel) == {}
    md, page = report_lineage.banner_markdown(panel), report_lineage.banner_html(panel)
    assert "flagged" not in md and "One checkpoint under two models' names" in md and pair in md
    assert "lineage-same" in page and "lineage-banner" not in page
    section = report_lineage.section_markdown(panel)
    assert "step0 has the same weights as base step5 (declared: one checkpoint, count it once)" in section
    assert "step5 has the same weights as base-shift step0 (declared" in section
    annotated = lineage.across_models(table)
    assert annotated.filter(pl.col("same_weights_as").list.len() > 0).height == 2
    assert lineage.across_models(annotated) is annotated  # once is enough


def test_the_same_weights_in_two_models_undeclared_are_flagged_both():
    table = _panel(start=5, continues=False)
    assert no_flags(table)  # each model's own table cannot see it
    assert report_lineage.suspect(table) == {}  # nor do the pages, given those tables alone
    panel = lineage_panel.panel_table(table)  # the findings job's table, which the report words
    assert report_lineage.suspect(panel) == {("base", "step5"): ["the same weights as base-shift step0 (another model)"],
                                             ("base-shift", "step0"): ["the same weights as base step5 (another model)"]}
    assert lineage.reference_warnings(table) == []  # its reference is a checked revision of another model
    md = report_lineage.banner_markdown(panel)
    assert "2 revisions flagged" in md and "the same weights as base step5 (another model)" in md
    assert "cannot tell which, if any, is genuine" in md and "provenance.on_suspect does not act on it" in md
    assert lineage.declared_pairs(table) == []


def test_a_continuation_that_does_not_start_where_declared():
    # from the base's step3, not its last checkpoint: the identity is not the declared one
    table = lineage.across_models(_panel(start=3, continues=True))
    flags = {(m, r): f for m, r, f in table.select("model", "revision", "flags").iter_rows() if f}
    assert flags == {("base", "step3"): ["same_weights_as"],
                     ("base-shift", "step0"): ["same_weights_as", "start_not_declared"]}
    assert "from its last checkpoint, step5, but its weights are not identical" in \
        table.filter(pl.col("model") == "base-shift")["detail"][0]
    # weights of its own: only the declaration is contradicted
    table = lineage.across_models(_panel(start=None, continues=True))
    flags = {(m, r): f for m, r, f in table.select("model", "revision", "flags").iter_rows() if f}
    assert flags == {("base-shift", "step0"): ["start_not_declared"]}


def test_tables_without_digests_and_the_init_by_tokens():
    old = _panel(start=5, continues=True).drop("weights_digest", "continues")
    out = lineage.across_models(old)
    assert out["same_weights_as"].list.len().sum() == 0 and no_flags(out)
    assert lineage.declared_pairs(old) == [] and lineage.across_models(None) is None
    assert not lineage.is_init("step0", 768000) and lineage.is_init("step0") and lineage.is_init("step0", 0)



# ---- sharing, frozen modules and the evidence in words: hand-built tables of named tensors --------

def _table(revisions: list[dict], model: str = "hb") -> pl.DataFrame:
    """Fingerprint rows of revisions step0..stepN, each ``{"files": {file: sha256}, "tensors": [(name, file,
    sha256, 64-long vector or None for a vector tensor)]}``; a matrix's sketch is its vector (as in
    lineage_fingerprints.synthetic), so equal sha256s are given equal vectors by the caller."""
    rows = []
    for k, rev in enumerate(revisions):
        for name, sha in rev["files"].items():
            rows.append(dict(model=model, revision=f"step{k}", kind="file", name=name, file=name, format="safetensors",
                             sha256=sha, dtype=None, shape=None, numel=None, norm=None, sketch=None))
        for name, file, sha, v in rev["tensors"]:
            matrix = v is not None
            rows.append(dict(model=model, revision=f"step{k}", kind="tensor", name=name, file=file,
                             format="safetensors", sha256=sha, dtype="F32", shape=[8, 8] if matrix else [8],
                             numel=64 if matrix else 8, norm=float(np.linalg.norm(v)) if matrix else 1.0,
                             sketch=[float(x) for x in v] if matrix else None))
    return tables.conform(pl.DataFrame(rows), "fingerprint")


def _run(n: int, seed: int, modules: int = 6):
    """``n`` revisions of a drifting run, ``modules`` modules ``l{t}`` of a weight (a matrix) and a bias
    each, modules 0-2 in file a.st and the rest in b.st: ``[{name: (sha256, vector)}]`` per revision,
    every tensor new at every revision."""
    chain = _drift(n - 1, keep=0.9, seed=seed)
    out = []
    for k, mats in enumerate(chain):
        rev = {}
        for t in range(modules):
            rev[f"l{t}.weight"] = (f"w{t}-{k}", mats[t])
            rev[f"l{t}.bias"] = (f"b{t}-{k}", None)
        out.append(rev)
    return out


def _fps(run, file_sha=None) -> pl.DataFrame:
    """``run`` (:func:`_run`, possibly edited) as a fingerprint table; ``file_sha[k]``: revision k's file
    digests (default: each file its own digest per revision)."""
    revisions = []
    for k, rev in enumerate(run):
        files = (file_sha or {}).get(k) or {"a.st": f"a-{k}", "b.st": f"b-{k}"}
        revisions.append({"files": files, "tensors": [
            (name, "a.st" if int(name[1]) < 3 else "b.st", sha, v) for name, (sha, v) in rev.items()]})
    return _table(revisions)


def _hold(run, names, src: int, into: list[int]):
    """Revisions ``into`` carry revision ``src``'s tensors ``names`` (same sha256, same values)."""
    for k in into:
        run[k] = {**run[k], **{n: run[src][n] for n in names}}
    return run


def _flags(table: pl.DataFrame) -> dict[str, list[str]]:
    return {r: f for r, f in table.select("revision", "flags").iter_rows() if f}


def _lineage(fp: pl.DataFrame) -> pl.DataFrame:
    revs = fp["revision"].unique().to_list()
    return lineage.model_lineage(fp, {r: int(r[4:]) for r in revs})


def test_a_healthy_hand_built_run_raises_no_flag():
    table = _lineage(_fps(_run(6, seed=11)))
    assert no_flags(table) and table["n_matrices"].to_list() == [6] * 6
    assert table["shares"].to_list() == [[]] * 6


def test_a_shard_equal_to_a_later_revisions_file_is_shared_and_named():
    run = _hold(_run(6, seed=12), [f"l{t}.{p}" for t in range(3) for p in ("weight", "bias")], src=4, into=[1])
    files = {1: {"a.st": "a-4", "b.st": "b-1"}}  # step1's a.st is step4's file, byte for byte
    table = _lineage(_fps(run, files))
    row = table.row(1, named=True)
    assert row["flags"][0] == "shares_shard_with" and row["shares_shard_with"] == ["step4"]
    assert row["detail"].split("; ")[0] == "a.st = step4's"  # the file, not its matrices one by one
    assert "matrices" not in row["detail"]
    assert row["shares"] == ["step4"] and table.row(4, named=True)["shares"] == ["step1"]
    assert table.row(4, named=True)["flags"] == [] and row["duplicate_of"] == []
    # the same matrices re-saved into another file (another digest): the matrices tell, naming their file
    table = _lineage(_fps(run))
    row = table.row(1, named=True)
    assert row["shares_shard_with"] == ["step4"]
    assert row["detail"].split("; ")[0] == "3 of 6 matrices (in a.st) = step4's"


def test_matrices_from_two_files_and_one_of_unknown_file():
    run = _hold(_run(6, seed=13), ["l0.weight", "l4.weight", "l0.bias"], src=5, into=[2])
    fp = _fps(run)
    row = _lineage(fp).row(2, named=True)
    assert row["flags"][0] == "shares_shard_with" and row["shares_shard_with"] == ["step5"]
    assert row["detail"].split("; ")[0] == "2 of 6 matrices (in a.st, b.st) = step5's"
    unnamed = fp.with_columns(pl.when((pl.col("revision") == "step2") & (pl.col("name") == "l4.weight"))
                              .then(None).otherwise(pl.col("file")).alias("file"))
    assert _lineage(unnamed).row(2, named=True)["detail"].split("; ")[0] == "2 of 6 matrices (in ?, a.st) = step5's"


def test_two_shards_equal_to_a_later_revisions_files_are_named_together():
    files = {1: {"a.st": "a-4", "b.st": "b-4", "c.st": "c-1"}, 4: {"a.st": "a-4", "b.st": "b-4", "c.st": "c-4"}}
    row = _lineage(_fps(_run(6, seed=17), files)).row(1, named=True)
    assert row["shares_shard_with"] == ["step4"] and row["detail"].split("; ")[0] == "a.st, b.st = step4's"


def test_three_holders_of_one_file_name_the_latest():
    run = _run(7, seed=14)
    files = {k: {"a.st": "a-shared", "b.st": f"b-{k}"} for k in (1, 3, 5)}
    table = _lineage(_fps(run, files))
    by = {r["revision"]: r for r in table.iter_rows(named=True)}
    assert by["step1"]["shares_shard_with"] == ["step5"] and by["step3"]["shares_shard_with"] == ["step5"]
    assert by["step5"]["shares_shard_with"] == [] and "shares_shard_with" not in by["step5"]["flags"]
    assert by["step1"]["shares"] == ["step3", "step5"] and by["step5"]["shares"] == ["step1", "step3"]
    assert by["step3"]["shares"] == ["step1", "step5"]
    assert by["step1"]["detail"].startswith("a.st = step5's") and by["step3"]["detail"].startswith("a.st = step5's")


def test_a_module_frozen_from_the_start_or_over_two_steps_is_no_sharing():
    module = ["l1.weight", "l1.bias"]
    assert no_flags(_lineage(_fps(_hold(_run(6, seed=15), module, src=0, into=[1]))))  # from the start, one step
    assert no_flags(_lineage(_fps(_hold(_run(6, seed=15), module, src=0, into=[1, 2]))))  # from the start, two
    assert no_flags(_lineage(_fps(_hold(_run(6, seed=15), module, src=0, into=[1, 2, 3, 4, 5]))))  # the whole run
    assert no_flags(_lineage(_fps(_hold(_run(6, seed=15), module, src=4, into=[2, 3]))))  # two steps: 2 -> 3 -> 4
    assert no_flags(_lineage(_fps(_hold(_run(6, seed=15), module, src=5, into=[1, 2, 3, 4]))))
    # one step, not from the start: a copy of the later revision's module, the earlier one flagged
    one = _lineage(_fps(_hold(_run(6, seed=15), module, src=4, into=[3])))
    assert _flags(one) == {"step3": ["shares_shard_with"]} and one.row(3, named=True)["shares_shard_with"] == ["step4"]
    assert one.row(3, named=True)["detail"] == "1 of 6 matrices (in a.st) = step4's"
    # the module back after a revision that changed it: no freeze over the revisions between
    back = _lineage(_fps(_hold(_run(6, seed=15), module, src=4, into=[1, 2])))
    assert _flags(back) == {"step1": ["shares_shard_with"], "step2": ["shares_shard_with"]}
    gap = _lineage(_fps(_hold(_hold(_run(6, seed=15), module, src=4, into=[1]), module, src=4, into=[3])))
    assert set(_flags(gap)) == {"step1", "step3"}  # step2 changed it: step1's is no freeze


def test_a_matrix_held_while_its_bias_moves_is_no_freeze():
    weight = ["l1.weight"]
    half = _lineage(_fps(_hold(_run(6, seed=16), weight, src=4, into=[1, 2, 3])))
    assert _flags(half) == {f"step{k}": ["shares_shard_with"] for k in (1, 2, 3)}
    assert all(r["shares_shard_with"] == ["step4"] for r in half.filter(pl.col("flags").list.len() > 0)
               .iter_rows(named=True))
    start = _lineage(_fps(_hold(_run(6, seed=16), weight, src=1, into=[0])))  # from the start: still no freeze
    assert _flags(start) == {"step0": ["shares_shard_with"]}
    # a module whose later revision has no bias at all: no freeze either
    run = _hold(_run(6, seed=16), ["l1.weight", "l1.bias"], src=4, into=[2, 3])
    run[4] = {n: v for n, v in run[4].items() if n != "l1.bias"}
    assert set(_flags(_lineage(_fps(run)))) == {"step2", "step3"}


def test_drop_flagged_removes_the_flagged_revisions_only():
    table = pl.DataFrame({"model": ["toy", "toy", "toy", "other"], "revision": ["step2", "step4", "step8", "step4"],
                          "flags": [[], ["duplicate_of"], [], ["discontinuous"]]})
    traj = pl.DataFrame({"model": ["toy"] * 3 + ["other", "other"], "revision": ["step2", "step4", "step8", "step4", "x"],
                         "v": [1, 2, 3, 4, 5]})
    assert lineage.drop_flagged(traj, table).rows() == [("toy", "step2", 1), ("toy", "step8", 3), ("other", "x", 5)]
    assert lineage.drop_flagged(traj, None) is traj and lineage.drop_flagged(traj, table.clear()) is traj
    calm = table.with_columns(pl.lit([], dtype=pl.List(pl.String)).alias("flags"))
    assert lineage.drop_flagged(traj, calm) is traj  # nothing flagged: the table as it was
    empty = traj.clear()
    assert lineage.drop_flagged(empty, table) is empty
    assert lineage.flagged(table)["revision"].to_list() == ["step4", "step4"]
    assert lineage.flagged(table.clear()).columns == list(tables.SCHEMAS["lineage"])


def test_lineage_passes_its_rules_on_to_each_model():
    fp = _synthetic(_drift(5, keep=0.9, seed=18))
    tokens = {("syn", f"step{k}"): k for k in range(6)}
    assert no_flags(lineage.lineage(fp, tokens))
    strict = lineage.lineage(fp, tokens, detour=1.0)  # any step off the straight line is a detour now
    assert strict["flags"].to_list() == [[]] + [["discontinuous"]] * 4 + [[]]  # the ends have no detour


ALL = [f"l{t}.{p}" for t in range(6) for p in ("weight", "bias")]
DUP = ("every weight file or tensor = {}: one set of weights under {} names, and the fingerprints cannot tell "
       "which name, if any, it belongs to (every one is flagged)")


def test_a_revision_serving_a_later_ones_files_is_a_duplicate_both_flagged():
    run = _hold(_run(6, seed=19), ALL, src=5, into=[2])
    table = _lineage(_fps(run, {2: {"a.st": "a-5", "b.st": "b-5"}}))
    assert _flags(table) == {"step2": ["duplicate_of"], "step5": ["duplicate_of"]}
    by = {r["revision"]: r for r in table.iter_rows(named=True)}
    assert by["step2"]["duplicate_of"] == ["step5"] and by["step5"]["duplicate_of"] == ["step2"]
    assert by["step2"]["detail"] == DUP.format("step5's", 2) and by["step5"]["detail"] == DUP.format("step2's", 2)
    assert by["step2"]["shares"] == ["step5"] and by["step2"]["shares_shard_with"] == []
    assert by["step3"]["previous"] == "step1" and by["step2"]["previous"] == "step1"  # the set sits at step5
    assert by["step2"]["descent"] == by["step5"]["descent"] == "direct"  # a duplicate's descent: its set's
    # beside the set, step1 carries step3's module l4 (one step before it): it shares with step3 alone
    shared = _lineage(_fps(_hold(run, ["l4.weight", "l4.bias"], src=3, into=[1]), {2: {"a.st": "a-5", "b.st": "b-5"}}))
    assert shared.row(1, named=True)["shares"] == ["step3"] and shared.row(1, named=True)["shares_shard_with"] == ["step3"]
    # a third name for the same weights, its tensors re-saved (other file digests): the tensors tell
    run = _hold(run, ALL, src=5, into=[3])
    table = _lineage(_fps(run, {2: {"a.st": "a-5", "b.st": "b-5"}}))
    dup = {r: d for r, d in table.select("revision", "duplicate_of").iter_rows() if d}
    assert dup == {"step2": ["step3", "step5"], "step3": ["step2", "step5"], "step5": ["step2", "step3"]}
    assert table.row(3, named=True)["detail"] == DUP.format("step2's and step5's", 3)
    assert _flags(table) == {f"step{k}": ["duplicate_of"] for k in (2, 3, 5)}
    assert table.row(4, named=True)["previous"] == "step1"


def test_two_sets_of_duplicates_and_a_duplicated_first_revision():
    run = _hold(_hold(_run(7, seed=20), ALL, src=6, into=[0]), ALL, src=4, into=[2])
    table = _lineage(_fps(run))  # tensors equal, files re-saved
    assert _flags(table) == {f"step{k}": ["duplicate_of"] for k in (0, 2, 4, 6)}
    dup = {r: d for r, d in table.select("revision", "duplicate_of").iter_rows() if d}
    assert dup == {"step0": ["step6"], "step6": ["step0"], "step2": ["step4"], "step4": ["step2"]}
    assert table["reference"].unique().to_list() == ["step1"]  # the earliest revision that is no duplicate
    assert table.row(1, named=True)["dist_from_first"] == 0 and table.row(3, named=True)["previous"] == "step1"


def test_small_rules_with_known_answers():
    assert lineage._module("layers.3.mlp.experts.5.up_proj.weight") == "layers.3.mlp.experts.5.up_proj"
    assert lineage._module("bias") == "bias"
    nan = math.nan
    assert lineage._descends({"n": 3, "cos": nan, "cos_sd": nan}, 4.0, 0.1)  # no cosine (zero weights): undecidable
    assert lineage._descends({"n": 0, "cos": 0.0, "cos_sd": 1.0}, 4.0, 0.1)  # nothing compared: undecidable
    assert not lineage._descends({"n": 3, "cos": 0.3, "cos_sd": 0.1}, 4.0, 0.1)  # under 4 null SDs
    assert lineage._descends({"n": 3, "cos": 0.5, "cos_sd": 0.1}, 4.0, 0.1)
    assert not lineage._descends({"n": 3, "cos": 0.15, "cos_sd": 0.01}, 4.0, 0.2)  # under the floor


def test_order_by_name_without_tokens_and_one_model_only():
    import hashlib

    fp = _synthetic(_drift(10, keep=0.9, seed=21))
    assert lineage.model_lineage(fp)["revision"].to_list() == [f"step{k}" for k in range(11)]  # step10 last
    files = lineage.model_lineage(fp.filter(pl.col("kind") == "file"))  # no tensor rows: the files' digests
    assert files["weights_digest"][0] == hashlib.sha256(b"syn-file0").hexdigest()
    with pytest.raises(ValueError) as e:
        lineage.model_lineage(pl.concat([fp, fp.with_columns(pl.lit("a").alias("model"))]))
    assert str(e.value) == "model_lineage takes one model's fingerprints, got ['a', 'syn']"


def test_pair_stats_of_small_weights_of_two_scales():
    """The closed forms again with norms 0.1 and 0.2 (a scale under 1, unequal norms): d_t^2 = 0.01 + 0.04
    - 2 (0.02) c, so with c = 0.6 rel = sqrt(0.026 / 0.025); the cosine stays c."""
    import numpy as np

    rng = np.random.default_rng(10)
    T, m, c = 4, 64, 0.6
    a, b = [], []
    for _ in range(T):
        x = rng.normal(size=m)
        x /= np.linalg.norm(x)
        u = rng.normal(size=m)
        u -= (u @ x) * x
        u /= np.linalg.norm(u)
        a.append(0.1 * x)
        b.append(0.2 * (c * x + math.sqrt(1 - c * c) * u))
    s = lineage.pair_stats(lineage._Model(_synthetic([a, b]), ["step0", "step1"]), 0, 1)
    assert s["rel"] == pytest.approx(math.sqrt(0.026 / 0.025)) and s["cos"] == pytest.approx(c)
    assert s["rel_sd"] > 0 and s["n"] == T


def test_the_findings_job_writes_the_flags_across_models(tmp_path):
    """lineage_panel (findings.lineage_panel.panel_table): the base's step5 is the continuation's step0 byte
    for byte. Declared: no flag, each names the other in same_weights_as and declared_same. Undeclared: both
    flagged same_weights_as, declared_same empty. From the base's step3 (declared from its last): both
    flagged, the continuation start_not_declared too. The report's declared sentence and marks are words
    of these columns; core.results.read reads this table where the findings job wrote one."""
    def cols(t):
        return {(m, r): (f, s, d) for m, r, f, s, d in
                t.select("model", "revision", "flags", "same_weights_as", "declared_same").iter_rows() if s or f}
    declared = lineage_panel.panel_table(_panel(start=5, continues=True))
    assert declared.schema == pl.Schema(tables.SCHEMAS["lineage_panel"])
    assert cols(declared) == {("base", "step5"): ([], ["base-shift step0"], ["base-shift step0"]),
                              ("base-shift", "step0"): ([], ["base step5"], ["base step5"])}
    undeclared = lineage_panel.panel_table(_panel(start=5, continues=False))
    assert cols(undeclared) == {("base", "step5"): (["same_weights_as"], ["base-shift step0"], []),
                                ("base-shift", "step0"): (["same_weights_as"], ["base step5"], [])}
    early = lineage_panel.panel_table(_panel(start=3, continues=True))
    assert cols(early) == {("base", "step3"): (["same_weights_as"], ["base-shift step0"], []),
                           ("base-shift", "step0"): (["same_weights_as", "start_not_declared"], ["base step3"], [])}
    empty = lineage_panel.panel_table(None)
    assert empty.is_empty() and empty.schema == pl.Schema(tables.SCHEMAS["lineage_panel"])
    # the report words the columns: the declared sentence is the one findings.lineage_panel states
    table = _panel(start=5, continues=True)
    assert report_lineage._declared(declared) == lineage.declared_pairs(table) != []
    assert report_lineage._declared(undeclared) == [] and report_lineage.suspect(empty) == {}
    # read: the findings job's table first; without it, the lineage jobs' own tables
    res = tmp_path / "results"
    tables.write(table.filter(pl.col("model") == "base"), res / "models" / "base" / "lineage.parquet")
    assert "same_weights_as" not in results.read(res).lineage.columns
    tables.write(undeclared, res / "findings" / "lineage_panel.parquet", schema="lineage_panel")
    assert report_lineage.suspect(results.read(res).lineage) == report_lineage.suspect(undeclared) != {}
