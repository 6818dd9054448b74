"""Model source ``reference``: the author's published per-revision results as headtrace cells.

Paper B's 30-run panel (Pythia-1B, OLMo-1B-0724-hf, OLMoE-1B-7B-0924 x 10 revisions) was published
as one mech-interp JSON per revision (six-class selectivity of every head) and one phase-1 PR
trajectory JSON per model (PR of every head at the 10 revisions). This module reads those files
(copied under ``resources/reference/spectral-probe-circuits/``, see its SOURCE.md) into the same
per-cell tables the pipeline writes, so the findings code runs unchanged on the published panel.

* ``screen_cell`` -> schema ``screen``. The six ``sel_*`` columns are the published selectivities
  (author's baseline); ``attn_*``/``attn_baseline`` are null (not published). ``best_class``,
  ``best_selectivity``, ``classification`` and ``in_induction_circuit`` are *recomputed* from the
  six selectivities with the pipeline's rule (``screen.classify_table``), not copied.
* ``pr_cell`` -> schema ``pr``: the PR of that revision from the phase-1 trajectory. A revision that
  the trajectory file does not list gives null PR (never interpolated or invented).
* ``ablation_cell`` -> schema ``ablation``: the published final-checkpoint group ablation
  (``prev_token_circuit/{model}_ablation.json``, revision ``main`` = the final revision), conditions
  named as ours: ``baseline``, ``circuit`` (the induction circuit), ``previous_token_circuit`` and
  its one matched draw, ``previous_token_matched_random`` draw 1 (the published "matched random"
  is drawn in the *previous-token* circuit's layers - checked against its head list - although the
  paper quotes it next to the induction circuit). ``acc_top1``/``acc_top5``/``loss``/``mean_logit_B``
  are ``top1``/``top5``/``ce``/``logit_b``; no upper bound, no per-sequence values (intervals null).
  ``n_sequences`` = 2000 (``PUBLISHED_ABLATION_SEQUENCES``; the file does not state it, the paper's
  screen batch is 2000 and every published top-1 is a multiple of 1/2000). With one matched draw
  the previous-token circuit's verdict is honestly ``underpowered``, and the induction circuit, with
  none, is ``untested``; the effect is shown. The ``gt/*_gt_ablation.json``
  files are a different task (greater-than, metric ``top1_above``) and are not imported as
  induction ablations.

Published model keys: ``pythia1b``, ``olmo``, ``olmoe`` (the file-name prefixes). Training tokens
(``reference_tokens``): Pythia = step x 2,097,152 (2048-token sequences x 1024 batch); OLMo/OLMoE
revision names carry them (``step126000-tokens264B`` -> 264 x 10^9).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import polars as pl

from headtrace.cell.screen import classify_table
from headtrace.core.classes import CLASSES
from headtrace.core.heads import parse_head
from headtrace.core.revisions import parse_step, parse_tokens
from headtrace.core.tables import CLASS_COLUMNS, SCHEMAS, conform

RESULTS = Path("cross_architecture") / "results"
PER_REVISION = RESULTS / "per_revision_mechinterp"
ABLATIONS = RESULTS / "prev_token_circuit"
PUBLISHED_ABLATION_SEQUENCES = 2000
# published metric key -> ours
_ABLATION_METRICS = {"acc_top1": "top1", "acc_top5": "top5", "loss": "ce", "mean_logit_B": "logit_b"}
PYTHIA_TOKENS_PER_STEP = 2_097_152

# published model key -> (mech-interp file prefix, phase-1 trajectory file)
PUBLISHED: dict[str, tuple[str, str]] = {
    "pythia1b": ("pythia1b", "pythia_1b_phase1_trajectory.json"),
    "olmo": ("olmo", "olmo_phase1_trajectory.json"),
    "olmoe": ("olmoe", "olmoe_phase1_trajectory.json"),
}


def default_reference_dir() -> Path:
    """``resources/reference/spectral-probe-circuits`` of this checkout."""
    return Path(__file__).resolve().parents[3] / "resources" / "reference" / "spectral-probe-circuits"


# ---------------------------------------------------------------------------------------------
# files


def _dir(reference_dir) -> Path:
    return Path(reference_dir) if reference_dir is not None else default_reference_dir()


def _check_model(published_model: str) -> None:
    if published_model not in PUBLISHED:
        raise ValueError(f"unknown published model {published_model!r}; one of {sorted(PUBLISHED)}")


def mechinterp_path(reference_dir, published_model: str, revision: str) -> Path:
    _check_model(published_model)
    prefix = PUBLISHED[published_model][0]
    return _dir(reference_dir) / PER_REVISION / f"{prefix}_mechinterp_{revision}.json"


def trajectory_path(reference_dir, published_model: str) -> Path:
    _check_model(published_model)
    return _dir(reference_dir) / RESULTS / PUBLISHED[published_model][1]


@lru_cache(maxsize=64)
def _load(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def load_mechinterp(reference_dir, published_model: str, revision: str) -> dict:
    path = mechinterp_path(reference_dir, published_model, revision)
    if not path.exists():
        raise FileNotFoundError(f"no published mech-interp file for {published_model} {revision}: {path}")
    return _load(str(path))


def load_trajectory(reference_dir, published_model: str) -> dict:
    return _load(str(trajectory_path(reference_dir, published_model)))


def published_revisions(reference_dir, published_model: str) -> list[str]:
    """The revisions that have a published mech-interp file, in training order."""
    _check_model(published_model)
    prefix = PUBLISHED[published_model][0] + "_mechinterp_"
    revs = [p.name[len(prefix):-len(".json")]
            for p in (_dir(reference_dir) / PER_REVISION).glob(f"{prefix}*.json")]
    return sorted(revs, key=_step)


def _step(revision: str) -> int:
    step = parse_step(revision)
    if step is None:
        raise ValueError(f"revision {revision!r} is not of the form step<N>[-tokens<T>B]")
    return step


def reference_tokens(published_model: str, revision: str) -> int | None:
    """Training tokens seen at ``revision``: Pythia step x 2,097,152; OLMo/OLMoE from the
    ``-tokens<T>B`` suffix (B = 10^9). None when the name carries no token count."""
    _check_model(published_model)
    if published_model == "pythia1b":
        return _step(revision) * PYTHIA_TOKENS_PER_STEP
    return parse_tokens(revision)


def screen_cell(reference_dir, published_model: str, revision: str, model_name: str | None = None,
                tokens: int | None = None, class_threshold: float = 30.0,
                induction_threshold: float = 50.0) -> pl.DataFrame:
    """The published screen of one revision as a ``screen`` table (one row per head).

    ``model_name`` defaults to ``published_model``; ``tokens`` defaults to ``reference_tokens``.
    """
    data = load_mechinterp(reference_dir, published_model, revision)
    if tokens is None:
        tokens = reference_tokens(published_model, revision)
    rows = []
    for key, sel in data["all_head_selectivity"].items():
        layer, head = parse_head(key)
        row = {"layer": layer, "head": head}
        for cls, col in zip(CLASSES, CLASS_COLUMNS):
            v = sel.get(cls)
            row[f"sel_{col}"] = None if v is None else float(v)
        rows.append(row)
    df = pl.DataFrame(rows, schema={"layer": pl.Int32, "head": pl.Int32,
                                    **{f"sel_{c}": pl.Float64 for c in CLASS_COLUMNS}})
    df = df.with_columns(
        model=pl.lit(model_name or published_model, dtype=pl.String),
        revision=pl.lit(revision, dtype=pl.String),
        tokens=pl.lit(tokens, dtype=pl.Int64),
        **{f"attn_{c}": pl.lit(None, dtype=pl.Float64) for c in CLASS_COLUMNS},
        attn_baseline=pl.lit(None, dtype=pl.Float64),
    )
    df = classify_table(df, class_threshold=class_threshold, induction_threshold=induction_threshold)
    return conform(df, "screen").select(list(SCHEMAS["screen"])).sort("layer", "head")


def pr_cell(reference_dir, published_model: str, revision: str, model_name: str | None = None,
            tokens: int | None = None) -> pl.DataFrame:
    """PR of every head at ``revision`` from the phase-1 trajectory, as a ``pr`` table.

    Heads come from the trajectory file; if it does not list ``revision``, every PR is null.
    """
    traj = load_trajectory(reference_dir, published_model)
    if tokens is None:
        tokens = reference_tokens(published_model, revision)
    revs = list(traj["revisions"])
    idx = revs.index(revision) if revision in revs else None
    rows = []
    for key, values in traj["pr"].items():
        layer, head = parse_head(key)
        v = None if idx is None or idx >= len(values) or values[idx] is None else float(values[idx])
        rows.append({"layer": layer, "head": head, "pr": v})
    df = pl.DataFrame(rows, schema={"layer": pl.Int32, "head": pl.Int32, "pr": pl.Float64})
    df = df.with_columns(model=pl.lit(model_name or published_model, dtype=pl.String),
                         revision=pl.lit(revision, dtype=pl.String),
                         tokens=pl.lit(tokens, dtype=pl.Int64))
    return conform(df, "pr").select(list(SCHEMAS["pr"])).sort("layer", "head")


def ablation_path(reference_dir, published_model: str) -> Path:
    _check_model(published_model)
    return _dir(reference_dir) / ABLATIONS / f"{PUBLISHED[published_model][0]}_ablation.json"


def _spec_heads(spec: dict) -> tuple[tuple[int, int], ...]:
    return tuple(sorted((int(l), int(h)) for l, hs in spec.items() for h in hs))


def _layer_counts(heads) -> dict[int, int]:
    out: dict[int, int] = {}
    for l, _ in heads:
        out[l] = out.get(l, 0) + 1
    return out


def ablation_cell(reference_dir, published_model: str, revision: str, model_name: str | None = None,
                  tokens: int | None = None) -> pl.DataFrame:
    """The published final-checkpoint ablation as an ``ablation`` table (module docstring).
    ``revision``: our name of the final revision the published ``main`` is (e.g. ``step143000``)."""
    from headtrace.causal import ablation  # imports torch: only the published-ablation import needs it

    path = ablation_path(reference_dir, published_model)
    if not path.exists():
        raise FileNotFoundError(f"no published ablation file for {published_model}: {path}")
    data = _load(str(path))
    if tokens is None:
        tokens = reference_tokens(published_model, revision)
    by_label = {}
    for c in data["conditions"]:
        label = c["condition"].split(" (")[0]
        by_label[label] = c
    need = ("baseline", "ablate_induction_circuit", "ablate_prev_token_circuit", "ablate_matched_random_same_layers")
    missing = [k for k in need if k not in by_label]
    if missing:
        raise ValueError(f"{path}: no condition(s) {missing}")
    prev = _spec_heads(by_label["ablate_prev_token_circuit"]["spec"])
    rnd = _spec_heads(by_label["ablate_matched_random_same_layers"]["spec"])
    if _layer_counts(rnd) != _layer_counts(prev) or set(rnd) & set(prev):
        raise ValueError(f"{path}: the matched-random heads {rnd} are not matched to the previous-token circuit {prev}")
    results = []
    for label, name, draw in (("baseline", "baseline", 0), ("ablate_induction_circuit", "circuit", 0),
                              ("ablate_prev_token_circuit", "previous_token_circuit", 0),
                              ("ablate_matched_random_same_layers", "previous_token_matched_random", 1)):
        c = by_label[label]
        heads = _spec_heads(c["spec"])
        results.append({"name": name, "draw": draw, "heads": heads, "n_heads": len(heads),
                        **{ours: float(c[key]) for key, ours in _ABLATION_METRICS.items()},
                        "n_sequences": PUBLISHED_ABLATION_SEQUENCES,
                        # the author's draw comes from the heads the circuit leaves free, not from the
                        # circuit's reference set (headtrace.causal.conditions): its set count is not ours
                        "n_sets": None})
    return ablation.ablation_table(results, model_name or published_model, revision, tokens, n_boot=0)


def import_model(reference_dir, published_model: str, model_name: str | None = None,
                 revisions: list[str] | None = None, class_threshold: float = 30.0,
                 induction_threshold: float = 50.0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(screen, pr) of every published revision of one model, concatenated."""
    revisions = revisions or published_revisions(reference_dir, published_model)
    screens = [screen_cell(reference_dir, published_model, r, model_name, None, class_threshold,
                           induction_threshold) for r in revisions]
    prs = [pr_cell(reference_dir, published_model, r, model_name) for r in revisions]
    return pl.concat(screens), pl.concat(prs)


def published_classifications(reference_dir, published_model: str, revision: str) -> pl.DataFrame:
    """The published top-k entries (layer, head, rank, integral, spread, classification,
    best_class, best_selectivity) of one revision, for comparison with the recomputed screen."""
    data = load_mechinterp(reference_dir, published_model, revision)
    rows = [{k: e[k] for k in ("rank", "layer", "head", "integral", "spread", "classification",
                                "best_class", "best_selectivity")} for e in data["classifications"]]
    return pl.DataFrame(rows).with_columns(pl.col("layer", "head").cast(pl.Int32))
