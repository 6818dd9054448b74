"""Checkpoint lineage (headtrace.findings.lineage) on toy checkpoints trained here.

A tiny GPT-NeoX toy model is trained for a few steps (the repo's toy recipe, headtrace.models.toy)
and every checkpoint is saved as three safetensors shards, then fingerprinted with
headtrace.models.fingerprint as the capture job does. The healthy trajectory raises no flag; four
broken panels built from it (a copy of another revision, the final's first shard, a re-init from
another seed, a later revision's matrices in one shard) each raise the right flag, and the report
module shows them in its banner.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from safetensors.numpy import load_file, save_file

from headtrace.core import tables
from headtrace.findings import lineage
from headtrace.models import fingerprint
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy
from headtrace.panel import config as panel_config
from headtrace.report import lineage as report_lineage

ARCH = {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64, "vocab_size": toy_recipe.VOCAB_SIZE,
        "max_position_embeddings": 64, "rotary_pct": 1.0}
OPTIM = {"lr": 1e-3, "warmup": 2, "batch_size": 4, "seq_len": 32, "weight_decay": 0.01, "log_every": 0}
DATA = {"kind": "repeat", "token_low": 0, "token_high": 256, "repeat_min": 4, "repeat_max": 10}
STEPS = [0, 1, 2, 4, 6, 8, 12, 16, 24, 32]
N_SHARDS = 3


def save_sharded(state: dict, folder: Path, n: int = N_SHARDS) -> list[Path]:
    """``state`` as ``n`` safetensors shards with an index, in key order (as save_pretrained shards)."""
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(state)
    size = math.ceil(len(keys) / n)
    files, weight_map = [], {}
    for k in range(n):
        name = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        part = {key: state[key] for key in keys[k * size:(k + 1) * size]}
        save_file(part, str(folder / name), metadata={"format": "pt"})
        weight_map.update({key: name for key in part})
        files.append(folder / name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return files


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def fp(folder: Path, revision: str, model: str = "toy") -> pl.DataFrame:
    return tables.conform(fingerprint.fingerprint_rows(shards(folder), model, revision), "fingerprint")


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """``{revision: sharded folder}`` of a toy run, plus a re-init of another seed."""
    root = tmp_path_factory.mktemp("lineage")
    dirs = toy.train("gpt_neox", root / "train", arch=ARCH, data=DATA, optim=OPTIM, max_steps=STEPS[-1],
                     checkpoint_steps=STEPS, seed=0, progress=False)
    out = {}
    for d in dirs:
        save_sharded(load_file(d / "model.safetensors"), root / "sharded" / d.name)
        out[d.name] = root / "sharded" / d.name
    other = toy.train("gpt_neox", root / "seed7-train", arch=ARCH, data=DATA, optim=OPTIM, max_steps=0,
                      checkpoint_steps=[0], seed=7, progress=False)  # the same recipe's init, seed 7
    save_sharded(load_file(other[0] / "model.safetensors"), root / "seed7")
    out["seed7"] = root / "seed7"
    return root, out


def fingerprints(panel) -> dict[str, pl.DataFrame]:
    _, folders = panel
    return {r: fp(f, r) for r, f in folders.items() if r != "seed7"}


@pytest.fixture(scope="module")
def healthy_fps(panel):
    return fingerprints(panel)


def run(fps: dict[str, pl.DataFrame]) -> pl.DataFrame:
    table = lineage.lineage(pl.concat(list(fps.values())))
    return tables.conform(table, "lineage")


def no_flags(table: pl.DataFrame) -> bool:
    return int(table["flags"].list.len().sum()) == 0


def flags_of(table: pl.DataFrame) -> dict[str, list[str]]:
    return {r: f for r, f in table.select("revision", "flags").iter_rows()}


def test_healthy_trajectory_raises_no_flag(healthy_fps):
    table = run(healthy_fps)
    assert table["revision"].to_list() == [f"step{s}" for s in STEPS]  # training order
    assert no_flags(table), table.filter(pl.col("flags").list.len() > 0)
    d = table["dist_from_first"].to_list()
    assert d[0] == 0 and all(b > a for a, b in zip(d[1:], d[2:]))  # moves away from the init
    assert all(x < math.sqrt(2) for x in d)
    assert (table["cos_from_first"][1:] > 0.5).all() and table["reference"].unique().to_list() == ["step0"]
    assert table["previous"].to_list() == [None] + [f"step{s}" for s in STEPS[:-1]]
    assert report_lineage.banner_markdown(table) == "" and report_lineage.banner_html(table) == ""
    assert report_lineage.suspect(table) == {}
    assert "no revision flagged" in report_lineage.section_markdown(table)


def test_distance_estimates_the_true_distance(panel, healthy_fps):
    """The sketch distance agrees with the exact one over the same matrices (within its noise)."""
    _, folders = panel
    a, b = ({k: v for f in shards(folders[r]) for k, v in load_file(f).items()} for r in ("step0", "step32"))
    mats = [k for k in a if a[k].ndim >= 2]
    d2 = sum(float(((a[k].astype("float64") - b[k]) ** 2).sum()) for k in mats)
    scale = (sum(float((a[k].astype("float64") ** 2).sum()) for k in mats)
             + sum(float((b[k].astype("float64") ** 2).sum()) for k in mats)) / 2
    true = math.sqrt(d2 / scale)
    est = run(healthy_fps).filter(pl.col("revision") == "step32")["dist_from_first"][0]
    assert abs(est - true) < 0.25 * true, (est, true)


def test_files_equal_to_another_revision_are_a_duplicate(panel, healthy_fps):
    """step4's branch serves step32's files (#205): both are flagged, each naming the other; neither
    is assumed genuine. A third copy joins the set."""
    _, folders = panel
    fps = dict(healthy_fps)
    fps["step4"] = fp(folders["step32"], "step4")
    table = run(fps)
    by = {r["revision"]: r for r in table.iter_rows(named=True)}
    assert by["step4"]["flags"] == ["duplicate_of"] and by["step4"]["duplicate_of"] == ["step32"]
    assert by["step32"]["flags"] == ["duplicate_of"] and by["step32"]["duplicate_of"] == ["step4"]
    assert "step4" in by["step32"]["shares"] and "cannot tell which name" in by["step32"]["detail"]
    others = table.filter(~pl.col("revision").is_in(["step4", "step32"]))
    assert no_flags(others), others.filter(pl.col("flags").list.len() > 0)
    assert report_lineage.suspect(table) == {("toy", "step4"): ["the same weights as step32"],
                                             ("toy", "step32"): ["the same weights as step4"]}
    fps["step16"] = fp(folders["step32"], "step16")  # a third name for the same files
    table = run(fps)
    dup = {r: d for r, d in table.select("revision", "duplicate_of").iter_rows() if d}
    assert dup == {"step4": ["step16", "step32"], "step16": ["step4", "step32"], "step32": ["step4", "step16"]}
    assert table.filter(pl.col("revision") == "step4")["detail"][0] == (
        "every weight file or tensor = step16's and step32's: one set of weights under 3 names, and the "
        "fingerprints cannot tell which name, if any, it belongs to (every one is flagged)")
    assert table.filter(pl.col("revision") == "step24")["previous"][0] == "step12"  # the set sits at step32


def test_first_shard_equal_to_the_final_shares_a_shard(panel, healthy_fps, tmp_path):
    _, folders = panel
    bad = tmp_path / "step8"
    shutil.copytree(folders["step8"], bad)
    first = shards(bad)[0]
    shutil.copyfile(shards(folders["step32"])[0], first)  # #206: the final checkpoint's first shard
    fps = dict(healthy_fps)
    fps["step8"] = fp(bad, "step8")
    table = run(fps)
    row = table.filter(pl.col("revision") == "step8").row(0, named=True)
    assert "shares_shard_with" in row["flags"] and row["shares_shard_with"] == ["step32"]
    assert first.name in row["detail"] and row["duplicate_of"] == []
    # the evidence: the file (not its matrices one by one), then the break in the chain it makes
    evidence, chain = row["detail"].split("; ")
    assert evidence == f"{first.name} = step32's" and chain.startswith("detour ")
    assert set(flags_of(table)) == set(fps)
    assert all(not f for r, f in flags_of(table).items() if r != "step8")


def test_reinit_from_another_seed_is_not_descended(panel, healthy_fps):
    _, folders = panel
    fps = dict(healthy_fps)
    fps["step12"] = fp(folders["seed7"], "step12")  # re-initialised from seed 7
    table = run(fps)
    row = table.filter(pl.col("revision") == "step12").row(0, named=True)
    assert "not_descended_from_init" in row["flags"]
    assert abs(row["cos_from_first"]) < lineage.Z * row["cos_sd"]
    assert abs(row["dist_from_first"] - math.sqrt(2)) < 0.2  # as far as an independent init
    assert "discontinuous" in row["flags"]  # and off the path between step8 and step16
    assert all(not f for r, f in flags_of(table).items() if r != "step12")


def test_later_matrices_in_one_shard_are_shared_and_discontinuous(panel, healthy_fps, tmp_path):
    _, folders = panel
    own = load_file(shards(folders["step6"])[1])
    later = load_file(shards(folders["step32"])[1])
    mats = [k for k in own if own[k].ndim >= 2]
    mixed = {k: (later[k] if k in mats else own[k]) for k in own}  # its own vectors, step32's matrices
    bad = tmp_path / "step6"
    shutil.copytree(folders["step6"], bad)
    save_file(mixed, str(shards(bad)[1]), metadata={"format": "pt"})
    assert fingerprint.file_sha256(shards(bad)[1]) != fingerprint.file_sha256(shards(folders["step32"])[1])
    fps = dict(healthy_fps)
    fps["step6"] = fp(bad, "step6")
    table = run(fps)
    row = table.filter(pl.col("revision") == "step6").row(0, named=True)
    assert "shares_shard_with" in row["flags"] and row["shares_shard_with"] == ["step32"]
    n_matrices = sum(a.ndim >= 2 for f in shards(bad) for a in load_file(f).values())
    assert row["detail"].startswith(  # the matrices, not the file: its vectors are its own
        f"{len(mats)} of {n_matrices} matrices (in {shards(bad)[1].name}) = step32's; ")
    assert "discontinuous" in row["flags"] and row["detour"] > lineage.DETOUR
    assert all(not f for r, f in flags_of(table).items() if r != "step6")
    md, page = report_lineage.banner_markdown(table), report_lineage.banner_html(table)
    assert "toy step6: a weight file shared with step32, a break in the chain of revisions" in md and "1 revision flagged" in md
    assert "toy step6: a weight file shared with step32, a break in the chain of revisions" in page and 'class="lineage-banner"' in page


def test_independent_inits_are_not_descended_and_calibrated():
    """Fresh inits of the toy recipe's model, six seeds: every pair is independent; the cosine's
    null noise predicts their spread (|z| < Z for every pair, mean near 0)."""
    import numpy as np

    rows = []
    for seed in range(6):
        m = toy.build_model("gpt_neox", ARCH, seed=seed)
        rows.append(_state_rows(m, f"s{seed}"))
    fps = pl.concat(rows)
    mod = lineage._Model(fps, [f"s{i}" for i in range(6)])
    z = [lineage.pair_stats(mod, i, j) for i in range(6) for j in range(i + 1, 6)]
    zs = np.array([s["cos"] / s["cos_sd"] for s in z])
    assert (np.abs(zs) < lineage.Z).all(), zs
    assert abs(zs.mean()) < 3 / math.sqrt(len(zs)) * 1.5, zs  # centred on 0
    assert all(abs(s["rel"] - math.sqrt(2)) < 0.1 for s in z)


def _state_rows(model, revision: str) -> pl.DataFrame:
    """Fingerprint rows of an in-memory model's state dict (one file row, named model.safetensors)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d, safe_serialization=True)
        path = Path(d) / "model.safetensors"
        return tables.conform(fingerprint.fingerprint_rows([path], "x", revision), "fingerprint")


def test_no_fingerprints_no_rows_and_on_suspect(healthy_fps, panel):
    assert lineage.lineage(pl.DataFrame(schema=tables.SCHEMAS["fingerprint"])).is_empty()
    assert report_lineage.section_markdown(None) == "" and report_lineage.suspect(None) == {}
    _, folders = panel
    fps = dict(healthy_fps)
    fps["step4"] = fp(folders["step32"], "step4")
    table = run(fps)
    assert lineage.check_on_suspect(table, "warn") == lineage.check_on_suspect(table, "drop")
    with pytest.raises(ValueError, match=r"revision 'step4': the same weights as step32"):
        lineage.check_on_suspect(table, "fail")
    assert lineage.check_on_suspect(run(healthy_fps), "fail") == []
    with pytest.raises(ValueError, match="on_suspect"):
        lineage.check_on_suspect(table, "ignore")
    traj = pl.DataFrame({"model": ["toy"] * 3 + ["other"], "revision": ["step2", "step4", "step8", "step4"]})
    assert lineage.drop_flagged(traj, table).rows() == [("toy", "step2"), ("toy", "step8"), ("other", "step4")]


def _rows(*rows: dict) -> pl.DataFrame:
    spec = tables.SCHEMAS["lineage"]
    return pl.DataFrame([{**dict.fromkeys(spec), "detail": None, **r} for r in rows], schema=spec)


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


def test_a_frozen_matrix_is_no_sharing(healthy_fps):
    """A module unchanged over consecutive revisions (frozen, never routed: its weight and bias alike)
    shares nothing; the same module back after a revision that changed it does."""
    fps = {r: df for r, df in healthy_fps.items()}
    name = fps["step0"].filter((pl.col("kind") == "tensor") & (pl.col("shape").list.len() >= 2))["name"][0]
    module = name.rsplit(".", 1)[0]
    names = [n for n in fps["step0"]["name"] if n.rsplit(".", 1)[0] == module]  # the weight, and a bias if any

    def frozen(df, src):
        out = df
        for n in names:
            keep = src.filter(pl.col("name") == n).select("sha256", "norm", "sketch").row(0)
            out = out.with_columns(
                pl.when(pl.col("name") == n).then(pl.lit(keep[0])).otherwise(pl.col("sha256")).alias("sha256"),
                pl.when(pl.col("name") == n).then(pl.lit(keep[1])).otherwise(pl.col("norm")).alias("norm"),
                pl.when(pl.col("name") == n).then(pl.lit(pl.Series([keep[2]]))).otherwise(pl.col("sketch"))
                .alias("sketch"))
        return out

    fps["step1"] = frozen(fps["step1"], fps["step0"])
    fps["step2"] = frozen(fps["step2"], fps["step0"])
    assert no_flags(run(fps))
    fps["step8"] = frozen(fps["step8"], fps["step0"])  # step4 and step6 changed it: step8 has step0's back
    table = run(fps)
    bad = table.filter(pl.col("flags").list.len() > 0)
    assert bad["revision"].to_list() == ["step0", "step1", "step2"]  # the earlier holders name the latest
    assert all(r["flags"] == ["shares_shard_with"] and r["shares_shard_with"] == ["step8"]
               for r in bad.iter_rows(named=True))


def test_reference_skips_a_duplicated_first_revision_and_edge_cases(healthy_fps):
    """#205 served main's weights under step0 too: the reference is then the earliest revision that
    is no duplicate. A model with one revision, or with file rows only, gets rows and no flag."""
    fps = {r: df for r, df in healthy_fps.items() if r in ("step0", "step2", "step4", "step8", "step32")}
    fps["step0"] = healthy_fps["step32"].with_columns(pl.lit("step0").alias("revision"))
    table = run(fps)
    assert table.filter(pl.col("revision") == "step0")["duplicate_of"][0].to_list() == ["step32"]
    assert table["reference"].unique().to_list() == ["step2"]
    assert flags_of(table) == {"step0": ["duplicate_of"], "step2": [], "step4": [], "step8": [],
                               "step32": ["duplicate_of"]}
    assert table.filter(pl.col("revision") == "step2")["dist_from_first"][0] == 0
    one = run({"step4": healthy_fps["step4"]})
    assert one.height == 1 and no_flags(one) and one["previous"][0] is None
    files_only = run({r: df.filter(pl.col("kind") == "file") for r, df in healthy_fps.items()})
    assert no_flags(files_only) and files_only["n_matrices"].max() == 0
    with pytest.raises(ValueError, match="one model"):
        lineage.model_lineage(pl.concat([healthy_fps["step0"], healthy_fps["step2"].with_columns(pl.lit("b").alias("model"))]))


def test_report_reads_the_run_lineage_tables(healthy_fps, tmp_path):
    assert report_lineage.read(tmp_path) is None
    fps = dict(healthy_fps)
    fps["step4"] = healthy_fps["step32"].with_columns(pl.lit("step4").alias("revision"))
    tables.write(run(fps), tmp_path / "models" / "toy" / "lineage.parquet", schema="lineage")
    other = lineage.model_lineage(_synthetic(_drift(3, keep=0.9, seed=3), model="other"),
                                  {f"step{k}": k for k in range(4)})
    tables.write(other, tmp_path / "models" / "other" / "lineage.parquet", schema="lineage")
    table = report_lineage.read(tmp_path)
    assert report_lineage.suspect(table) == {("toy", "step4"): ["the same weights as step32"],
                                             ("toy", "step32"): ["the same weights as step4"]}
    md = report_lineage.section_markdown(table)
    assert "**other** (reference step0; no revision flagged)" in md and "**toy** (reference step0; 2 flagged)" in md
    assert '<section id="lineage">' in report_lineage.section_html(table)


# ---- drift against another init: synthetic fingerprints whose sketch is the tensor itself ----------

def _synthetic(chain: list[list], model: str = "syn") -> pl.DataFrame:
    """Fingerprint rows of revisions step0..stepN: per revision a list of 64-long vectors, one per
    matrix, used as both the sketch and (through its norm) the exact norm (a self-consistent table)."""
    import numpy as np

    rows = []
    for k, mats in enumerate(chain):
        rev = f"step{k}"
        rows.append(dict(model=model, revision=rev, kind="file", name=f"f{k}", file=f"f{k}", format="safetensors",
                         sha256=f"{model}-file{k}", dtype=None, shape=None, numel=None, norm=None, sketch=None))
        for t, v in enumerate(mats):
            rows.append(dict(model=model, revision=rev, kind="tensor", name=f"m{t}", file=f"f{k}", format="safetensors",
                             sha256=f"{model}-{k}-{t}", dtype="F32", shape=[8, 8], numel=64,
                             norm=float(np.linalg.norm(v)),
                             sketch=[float(x) for x in v]))
    return tables.conform(pl.DataFrame(rows), "fingerprint")


def _drift(n_steps: int, keep: float, seed: int, start=None) -> list[list]:
    """A chain of 40 matrices, each step keeping ``keep`` of the previous direction plus fresh noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cur = [rng.normal(size=64) for _ in range(40)] if start is None else start
    out = [cur]
    for _ in range(n_steps):
        cur = [keep * v + math.sqrt(1 - keep ** 2) * rng.normal(size=64) for v in cur]
        out.append(cur)
    return out


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


# ---- across the models of a panel (headtrace.findings.lineage_panel) ----------------------------

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


def test_a_declared_continuation_is_one_checkpoint_and_not_flagged():
    table = _panel(start=5, continues=True)
    assert no_flags(table) and report_lineage.suspect(table) == {}
    # its step0 carries the base's tokens: no init, but no warning either (its descent is the base's)
    first = table.filter(pl.col("model") == "base-shift").row(0, named=True)
    assert first["reference_is_init"] is False and lineage.reference_warnings(table) == []
    (alone,) = lineage.reference_warnings(table.filter(pl.col("model") == "base-shift"))  # the job's view
    assert "continues base" in alone and "the report checks" in alone
    (pair,) = lineage.declared_pairs(table)
    assert pair.startswith("base-shift step0 and base step5 are the same weights") and "counted once" in pair
    md, page = report_lineage.banner_markdown(table), report_lineage.banner_html(table)
    assert "flagged" not in md and "One checkpoint under two models' names" in md and pair in md
    assert "lineage-same" in page and "lineage-banner" not in page
    section = report_lineage.section_markdown(table)
    assert "step0 has the same weights as base step5 (declared: one checkpoint, count it once)" in section
    assert "step5 has the same weights as base-shift step0 (declared" in section
    annotated = lineage.across_models(table)
    assert annotated.filter(pl.col("same_weights_as").list.len() > 0).height == 2
    assert lineage.across_models(annotated) is annotated  # once is enough


def test_the_same_weights_in_two_models_undeclared_are_flagged_both():
    table = _panel(start=5, continues=False)
    assert no_flags(table)  # each model's own table cannot see it
    assert report_lineage.suspect(table) == {("base", "step5"): ["the same weights as base-shift step0 (another model)"],
                                             ("base-shift", "step0"): ["the same weights as base step5 (another model)"]}
    assert lineage.reference_warnings(table) == []  # its reference is a checked revision of another model
    md = report_lineage.banner_markdown(table)
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


def test_the_finals_first_shard_is_flagged_when_the_revision_between_serves_the_finals_files(
        panel, healthy_fps, tmp_path):
    """The two faults together (#206 and #205): step16 holds the final's first shard, and step24, the
    revision between them, serves the final's files. The duplicate is no step of the run: on the path of
    training step16 and step32 are one step apart, and one unchanged step before a later revision is what
    a copy of it looks like, not a frozen weight. Flagged whether the shard is the final's file byte for
    byte or its tensors re-saved (another file digest: only the matrices tell)."""
    _, folders = panel
    final_first = shards(folders["step32"])[0]
    for how in ("copied", "re-saved"):
        bad = tmp_path / how / "step16"
        shutil.copytree(folders["step16"], bad)
        first = shards(bad)[0]
        if how == "copied":
            shutil.copyfile(final_first, first)
        else:
            save_file(load_file(final_first), str(first), metadata={"format": "pt", "re": "saved"})
            assert fingerprint.file_sha256(first) != fingerprint.file_sha256(final_first)
        fps = dict(healthy_fps)
        fps["step16"] = fp(bad, "step16")
        fps["step24"] = fp(folders["step32"], "step24")
        table = run(fps)
        by = {r["revision"]: r for r in table.iter_rows(named=True)}
        assert "shares_shard_with" in by["step16"]["flags"] and by["step16"]["shares_shard_with"] == ["step32"], how
        assert {"step24", "step32"} <= set(by["step16"]["shares"]), how
        assert by["step24"]["flags"] == ["duplicate_of"] and by["step32"]["flags"] == ["duplicate_of"], how
        assert all(not f for r, f in flags_of(table).items() if r not in ("step16", "step24", "step32")), how
        if how == "re-saved":
            assert "matrices" in by["step16"]["detail"]


def test_a_module_frozen_over_one_step_before_a_later_revision_is_taken_for_a_copy(healthy_fps):
    """The price of the rule above, stated: a whole module unchanged over one step only (step24 ->
    step32), not from the first revision, is flagged; over two steps (step16 -> step24 -> step32) it is
    a frozen module; a matrix equal while its module's bias differs is no freeze either."""
    fps = dict(healthy_fps)
    rows = fps["step0"].filter(pl.col("kind") == "tensor")
    name = next(n for n in rows["name"] if n.endswith(".weight") and n.replace(".weight", ".bias") in rows["name"]
                and rows.filter(pl.col("name") == n)["shape"][0].len() >= 2)
    module = [name, name.replace(".weight", ".bias")]

    def with_module(df, src, names):
        keep = src.filter(pl.col("name").is_in(names)).select("name", "sha256", "norm", "sketch")
        return pl.concat([df.filter(~pl.col("name").is_in(names) | (pl.col("kind") != "tensor")),
                          df.filter(pl.col("name").is_in(names) & (pl.col("kind") == "tensor"))
                          .drop("sha256", "norm", "sketch").join(keep, on="name").select(df.columns)])

    one = dict(fps, step24=with_module(fps["step24"], fps["step32"], module))
    assert flags_of(run(one))["step24"] == ["shares_shard_with"]
    two = dict(one, step16=with_module(fps["step16"], fps["step32"], module))
    assert no_flags(run(two))
    half = dict(fps, step16=with_module(fps["step16"], fps["step32"], [name]),
                step24=with_module(fps["step24"], fps["step32"], [name]))  # the weight, not its bias
    assert flags_of(run(half))["step16"] == ["shares_shard_with"]
