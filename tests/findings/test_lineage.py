"""Checkpoint lineage (headtrace.findings.lineage) on toy checkpoints trained here.

A tiny GPT-NeoX toy model is trained for a few steps (the repo's toy recipe, headtrace.models.toy)
and every checkpoint is saved as three safetensors shards, then fingerprinted with
headtrace.models.fingerprint as the capture job does. The healthy trajectory raises no flag; four
broken panels built from it (a copy of another revision, the final's first shard, a re-init from
another seed, a later revision's matrices in one shard) each raise the right flag, and the report
module shows them in its banner.

These tests train a panel once per module (a few seconds): the hand-built cases with known answers, which the
mutation check runs for every mutant of the module, are in test_lineage_units.py.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from safetensors.numpy import load_file, save_file

from helpers.lineage_fingerprints import drift as _drift
from helpers.lineage_fingerprints import synthetic as _synthetic

from headtrace.core import results, tables
from headtrace.findings import lineage
from headtrace.models import fingerprint
from headtrace.models.toy import recipe as toy_recipe
from headtrace.models.toy import train as toy
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
    assert results.read(tmp_path).lineage is None
    fps = dict(healthy_fps)
    fps["step4"] = healthy_fps["step32"].with_columns(pl.lit("step4").alias("revision"))
    tables.write(run(fps), tmp_path / "models" / "toy" / "lineage.parquet", schema="lineage")
    other = lineage.model_lineage(_synthetic(_drift(3, keep=0.9, seed=3), model="other"),
                                  {f"step{k}": k for k in range(4)})
    tables.write(other, tmp_path / "models" / "other" / "lineage.parquet", schema="lineage")
    table = results.read(tmp_path).lineage
    assert report_lineage.suspect(table) == {("toy", "step4"): ["the same weights as step32"],
                                             ("toy", "step32"): ["the same weights as step4"]}
    md = report_lineage.section_markdown(table)
    assert "**other** (reference step0; no revision flagged)" in md and "**toy** (reference step0; 2 flagged)" in md
    assert '<section id="lineage">' in report_lineage.section_html(table)


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
