"""Paper A's method experiments: seed specificity, data shift, composition, noise floor.

Everything here is a pure function of tables (or of a config dict), except ``cross_seed_run``
(which runs ``headtrace.ablation.run``) and the ``plot_*`` functions (matplotlib, Agg).

**Derived models** (``expand_models``). The config's ``experiments`` block names a *base* toy
model; the seed and data-shift models are added to ``config["models"]`` as ordinary ``source:
toy`` models (so every per-cell rule - capture, PR, screen, ablation - runs on them unchanged):

- ``experiments.seeds = {base: M, seeds: [1, 2], revisions: ends|all}`` adds ``M-seed1``,
  ``M-seed2``: M's spec with ``train.seed`` set (M itself is seed ``M.train.seed``, default 0);
  ``revisions: ends`` (default) keeps only M's first and final revision (training costs the same,
  the per-cell jobs do not).
- ``experiments.data_shift = {base: M, data: {...}, max_steps: N, n_checkpoints: n, optim: {...}}``
  adds ``M-shift``: trained by the ``train_shift`` rule from M's final checkpoint on the second
  corpus ``data`` (a ``toy.make_data`` spec, default the ``zipf`` kind) for N steps, checkpoints
  at ``toy.checkpoint_steps(N, n)``. Its ``train`` block carries ``shift_from: M``; its step
  counts from the shift (tokens from ``tokens_per_step``, i.e. tokens *since* the shift).

A name already present in ``config["models"]`` is left alone (an explicit spec wins).

**Jaccard** of two head sets = |A & B| / |A | B|; NaN when both are empty.

**Cross-seed ablation** (``cross_seed_conditions`` / ``cross_seed_table``): in the final model of
seed j, ablate the final induction circuit of every seed i (heads named ``LxHy``), each with K
matched-random draws drawn *in model j* (same heads per layer among the heads not in circuit i).
``top1_drop = baseline_top1 - ablated_top1``; ``random_drop_mean`` = mean over the draws of
``baseline_top1 - draw_top1``; ``top1_drop_vs_random = top1_drop - random_drop_mean`` (the excess
drop over the matched-random control, in top-1 units); ``effect_vs_random`` is the ratio, and
``p_value`` the empirical permutation p-value, as in ``ablation.verdict``. ``jaccard`` is between
circuit i and circuit j.

**Data shift** (``data_shift_table``): the base model's revisions are phase ``before``, the shift
model's are ``after``; ``tokens`` of the after phase = base final tokens + tokens since the shift.
``circuit`` is each revision's induction circuit (``in_induction_circuit``), compared to the base
model's final (pre-shift) circuit by Jaccard.

**Composition** (``composition_table``): per revision, the ``previous_token_circuit`` verdict row
(ablation of the previous-token circuit, against ``previous_token_matched_random``).
``destroys_induction`` = the verdict's causal rule holds AND the baseline top-1 is at least
``min_baseline_top1`` (there is induction to destroy). ``onset`` = the first such revision;
``sustained_onset`` = the first revision from which it holds at every later revision.

**Noise floor** (``null_samples`` / ``floors`` / ``noise_floor_table``): null selectivities per
class from (a) every head of the model's ``init`` revision (random init, all six classes) and (b)
a position-shuffled probe (``shuffle_batch``: each sequence's tokens before the query permuted
with a fixed seed, the class positions kept) captured at the ``shuffle_revisions``; the shuffle
breaks the content at the induction / duplicate-token keys but cannot change what a purely
positional head does, so (b) is used for the content classes only (``SHUFFLE_CLASSES``). The
floor of a class is the ``quantile`` (0.99, 'higher' interpolation) of each null's samples; the ``combined`` floor is the
maximum over the nulls available for the class. Per revision and class: ``n_above`` heads with
selectivity > floor; class ``any``: heads above the floor of at least one class = the
specialized-head fraction, next to the 30x classification count (``n_classified``).
"""
from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from headtrace import probe as _probe
from headtrace.tables import CLASS_COLUMNS, head_name

Head = tuple[int, int]
SHUFFLE_CLASSES = ("induction", "duplicate_token")
EXP_DIR = "results/experiments"

DEFAULTS = {
    "enabled": True,
    "n_random": 20,
    "seed": 0,
    "seeds": {"base": None, "seeds": [], "revisions": "ends"},
    "data_shift": {"base": None, "max_steps": 100, "n_checkpoints": 5, "seed": 1,
                   "data": {"kind": "zipf"}, "optim": {}},
    "composition": {"enabled": True, "min_baseline_top1": 0.05},
    "noise_floor": {"enabled": True, "quantile": 0.99, "init_revision": "step0",
                    "shuffle_revisions": ["first", "final"], "shuffle_seed": 0, "models": None},
}


# --------------------------------------------------------------------------------------------
# Config


def settings(config: Mapping) -> dict:
    """The ``experiments`` block merged over ``DEFAULTS`` (one level deep)."""
    user = dict(config.get("experiments") or {})
    out = {}
    for k, v in DEFAULTS.items():
        u = user.get(k)
        out[k] = {**v, **(u or {})} if isinstance(v, dict) else (v if u is None else u)
    return out


def seed_model_name(base: str, seed: int) -> str:
    return f"{base}-seed{seed}"


def shift_model_name(base: str) -> str:
    return f"{base}-shift"


def _base_spec(config: Mapping, base: str, what: str) -> dict:
    spec = config["models"].get(base)
    if spec is None:
        raise ValueError(f"experiments.{what}.base: no model '{base}' in models")
    if spec.get("source") != "toy":
        raise ValueError(f"experiments.{what}.base: '{base}' is not a toy model (source {spec.get('source')})")
    return spec


def expand_models(config: dict) -> dict:
    """Add the seed and data-shift models to ``config["models"]`` (in place; also returned)."""
    s = settings(config)
    if not s["enabled"]:
        return config
    seeds = s["seeds"]
    if seeds.get("base"):
        base = seeds["base"]
        spec = _base_spec(config, base, "seeds")
        base_seed = int((spec.get("train") or {}).get("seed", 0))
        for seed in seeds.get("seeds") or []:
            if int(seed) == base_seed:
                continue
            name = seed_model_name(base, int(seed))
            if name in config["models"]:
                continue
            new = copy.deepcopy(spec)
            new["train"] = {**(new.get("train") or {}), "seed": int(seed)}
            if seeds.get("revisions", "ends") == "ends" and len(spec["revisions"]) > 1:
                new["revisions"] = [spec["revisions"][0], spec["revisions"][-1]]
            config["models"][name] = new
    shift = s["data_shift"]
    if shift.get("base"):
        base = shift["base"]
        spec = _base_spec(config, base, "data_shift")
        name = shift_model_name(base)
        if name not in config["models"]:
            from headtrace import toy

            steps = toy.checkpoint_steps(int(shift["max_steps"]), int(shift["n_checkpoints"]))
            new = {k: copy.deepcopy(v) for k, v in spec.items() if k not in ("revisions", "train", "tokens")}
            new["revisions"] = [f"step{n}" for n in steps]
            # Cumulative tokens (the base's final tokens + tokens since the shift), so the
            # continuation sits after its base on every token axis.
            from headtrace import revisions as _revs

            final_tokens = _revs.tokens_for(spec["revisions"][-1], spec)
            tps = spec.get("tokens_per_step")
            if final_tokens is not None and tps:
                new["tokens"] = {f"step{n}": int(final_tokens) + n * int(tps) for n in steps}
            train = {"shift_from": base, "max_steps": int(shift["max_steps"]), "seed": int(shift.get("seed", 1)),
                     "data": copy.deepcopy(shift.get("data") or {}), "optim": copy.deepcopy(shift.get("optim") or {})}
            new["train"] = train
            config["models"][name] = new
    return config


def seed_models(config: Mapping) -> list[str]:
    """The seed panel: the base model first, then its derived seed models (may be [])."""
    s = settings(config)
    base = s["seeds"].get("base")
    if not s["enabled"] or not base:
        return []
    base_seed = int((config["models"][base].get("train") or {}).get("seed", 0))
    extra = [seed_model_name(base, int(x)) for x in s["seeds"].get("seeds") or [] if int(x) != base_seed]
    names = [base] + [m for m in extra if m in config["models"]]
    return names if len(names) > 1 else []


def model_seed(config: Mapping, model: str) -> int:
    return int((config["models"][model].get("train") or {}).get("seed", 0))


def shift_models(config: Mapping) -> list[str]:
    """Models trained by ``train_shift`` (their train block has ``shift_from``)."""
    return [m for m, spec in config["models"].items()
            if spec.get("source") == "toy" and (spec.get("train") or {}).get("shift_from")]


def shift_pair(config: Mapping) -> tuple[str, str] | None:
    """(base, shift model) of the data-shift experiment, or None."""
    s = settings(config)
    base = s["data_shift"].get("base")
    if not s["enabled"] or not base:
        return None
    return base, shift_model_name(base)


PATHS = {
    "cross_seed_model": f"{EXP_DIR}/cross_seed/{{model}}.parquet",
    "cross_seed": f"{EXP_DIR}/cross_seed_ablation.parquet",
    "data_shift": f"{EXP_DIR}/data_shift.parquet",
    "data_shift_heads": f"{EXP_DIR}/data_shift_heads.parquet",
    "composition": f"{EXP_DIR}/composition.parquet",
    "shuffled": f"{EXP_DIR}/shuffled/{{model}}/{{revision}}/attention.parquet",
    "noise_floor": f"{EXP_DIR}/noise_floor.parquet",
    "noise_floor_null": f"{EXP_DIR}/noise_floor_null.parquet",
    "summary": f"{EXP_DIR}/summary.md",
}
FIGURES = {name: f"{EXP_DIR}/figures/exp_{name}.png" for name in ("cross_seed", "data_shift", "composition", "noise_floor")}


def noise_floor_models(config: Mapping, run_models: Sequence[str]) -> list[str]:
    """Models of the noise-floor experiment: ``noise_floor.models`` (null: every run model except
    data-shift continuations), restricted to ``run_models``."""
    s = settings(config)
    if not (s["enabled"] and s["noise_floor"]["enabled"]):
        return []
    chosen = s["noise_floor"].get("models")
    if chosen is None:
        shifts = set(shift_models(config))
        return [m for m in run_models if m not in shifts]
    return [m for m in chosen if m in run_models]


def shuffled_cells(config: Mapping, run_models: Sequence[str]) -> list[tuple[str, str]]:
    """(model, revision) cells captured on the position-shuffled probe."""
    spec = settings(config)["noise_floor"]["shuffle_revisions"]
    return [(m, r) for m in noise_floor_models(config, run_models)
            for r in resolve_revisions(spec, list(config["models"][m]["revisions"]))]


def composition_on(config: Mapping, ablation_enabled: bool, run_models: Sequence[str]) -> bool:
    s = settings(config)
    return bool(s["enabled"] and s["composition"]["enabled"] and ablation_enabled and run_models)


def targets(config: Mapping, ablation_enabled: bool, run_models: Sequence[str]) -> list[str]:
    """Every experiment output the config asks for (for the workflow's ``all_targets()``)."""
    if not settings(config)["enabled"]:
        return []
    out = []
    if seed_models(config):
        out += [PATHS["cross_seed"], FIGURES["cross_seed"]]
    if shift_pair(config):
        out += [PATHS["data_shift"], FIGURES["data_shift"]]
    if composition_on(config, ablation_enabled, run_models):
        out += [PATHS["composition"], FIGURES["composition"]]
    if noise_floor_models(config, run_models):
        out += [PATHS["noise_floor"], FIGURES["noise_floor"]]
    return out + [PATHS["summary"]] if out else []


def _deep_merge(a: dict, b: Mapping) -> dict:
    out = copy.deepcopy(a)
    for k, v in (b or {}).items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def shift_train_kwargs(family: str, train: Mapping, revisions: Sequence[str], init_from: str,
                       defaults: Mapping | None = None) -> dict:
    """Keyword arguments of ``toy.train`` for a data-shift continuation from ``init_from``."""
    if defaults is None:
        from headtrace import toy

        defaults = toy.DEFAULTS[family]
    merged = _deep_merge(dict(defaults), {k: v for k, v in train.items() if k in ("arch", "optim", "max_steps")})
    data = {**(defaults.get("data") or {}), **(train.get("data") or {})} if train.get("data") else dict(defaults["data"])
    steps = []
    for r in revisions:
        m = re.fullmatch(r"step(\d+)", r)
        if not m:
            raise ValueError(f"shift revision '{r}' must be named step<N>")
        steps.append(int(m.group(1)))
    max_steps = int(train.get("max_steps", max(steps)))
    return {"arch": merged["arch"], "data": data, "optim": merged["optim"], "max_steps": max_steps,
            "checkpoint_steps": steps, "seed": int(train.get("seed", 0)), "init_from": str(init_from)}


# --------------------------------------------------------------------------------------------
# Head sets


def parse_head(name: str) -> Head:
    m = re.fullmatch(r"L(\d+)H(\d+)", name.strip())
    if not m:
        raise ValueError(f"cannot parse head name '{name}'")
    return int(m.group(1)), int(m.group(2))


def as_heads(heads: Iterable) -> tuple[Head, ...]:
    return tuple(sorted({parse_head(h) if isinstance(h, str) else (int(h[0]), int(h[1])) for h in heads}))


def jaccard(a: Iterable, b: Iterable) -> float:
    """|A & B| / |A | B| of two head sets (``(layer, head)`` pairs or ``LxHy`` names); NaN if both empty."""
    sa, sb = set(as_heads(a)), set(as_heads(b))
    union = sa | sb
    return len(sa & sb) / len(union) if union else math.nan


def circuit_of(screen_or_traj: pl.DataFrame, revision: str | None = None) -> tuple[Head, ...]:
    """Induction circuit (``in_induction_circuit``) of a screen, or of one revision of a trajectory."""
    df = screen_or_traj if revision is None else screen_or_traj.filter(pl.col("revision") == revision)
    df = df.filter(pl.col("in_induction_circuit"))
    return as_heads(zip(df["layer"].to_list(), df["head"].to_list()))


# --------------------------------------------------------------------------------------------
# Cross-seed ablation


def cross_seed_conditions(circuits: Mapping[str, Sequence], n_heads_per_layer: int, n_random: int, seed: int):
    """Baseline, then per circuit model i: ``circuit:i`` and ``random:i`` x K matched draws."""
    from headtrace.ablation import Condition, matched_random_draws

    conds = [Condition("baseline", 0, ())]
    for name, heads in circuits.items():
        heads = as_heads(heads)
        bad = [h for _, h in heads if not 0 <= h < n_heads_per_layer]
        if bad:
            raise ValueError(f"circuit of {name} has heads {bad} beyond {n_heads_per_layer} heads per layer")
        conds.append(Condition(f"circuit:{name}", 0, heads))
        if heads:
            conds += [Condition(f"random:{name}", i + 1, d) for i, d in
                      enumerate(matched_random_draws(heads, n_heads_per_layer, n_random, seed, f"random:{name}"))]
    return conds


def cross_seed_table(results: Sequence[dict], circuits: Mapping[str, Sequence], model: str,
                     seeds: Mapping[str, int]) -> pl.DataFrame:
    """Rows (circuit_seed, model_seed, ...) from ``ablation.run`` results of ``cross_seed_conditions``
    evaluated in ``model`` (one row per circuit model)."""
    by = {}
    for r in results:
        by.setdefault(r["name"], []).append(r)
    b = float(by["baseline"][0]["top1"])
    own = circuits[model]
    rows = []
    for name, heads in circuits.items():
        heads = as_heads(heads)
        a = float(by[f"circuit:{name}"][0]["top1"])
        draws = np.array([d["top1"] for d in by.get(f"random:{name}", [])], float)
        drop = b - a
        if draws.size:
            rmean = float(np.mean(b - draws))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.float64(drop) / np.float64(rmean))
            p = (1 + int((draws <= a).sum())) / (1 + draws.size) if heads else math.nan
        else:
            rmean, ratio, p = (0.0 if not heads else math.nan), math.nan, math.nan
        rows.append({
            "circuit_seed": int(seeds[name]), "model_seed": int(seeds[model]),
            "top1_drop": drop, "top1_drop_vs_random": drop - rmean if not math.isnan(rmean) else math.nan,
            "jaccard": jaccard(heads, own),
            "circuit_model": name, "model": model, "same_seed": name == model,
            "circuit": [head_name(*h) for h in heads], "n_heads": len(heads),
            "baseline_top1": b, "ablated_top1": a, "random_drop_mean": rmean,
            "effect_vs_random": ratio, "p_value": p, "n_random": int(draws.size),
        })
    return pl.DataFrame(rows, schema_overrides={"circuit": pl.List(pl.String)})


def cross_seed_matrix(df: pl.DataFrame, value: str = "top1_drop_vs_random") -> tuple[list[int], list[int], np.ndarray]:
    """(circuit seeds = rows, model seeds = columns, matrix of ``value``)."""
    rows = sorted(df["circuit_seed"].unique().to_list())
    cols = sorted(df["model_seed"].unique().to_list())
    m = np.full((len(rows), len(cols)), np.nan)
    for r in df.iter_rows(named=True):
        m[rows.index(r["circuit_seed"]), cols.index(r["model_seed"])] = r[value]
    return rows, cols, m


# --------------------------------------------------------------------------------------------
# Data shift


def data_shift_table(base: pl.DataFrame, shifted: pl.DataFrame, base_final_tokens: int | None = None) -> pl.DataFrame:
    """``data_shift`` rows from two trajectories (base model = before, shift model = after)."""
    base_revs = base.select("revision", "tokens").unique(maintain_order=True).sort("tokens", nulls_last=True)
    final_rev = base_revs["revision"][-1]
    pre = circuit_of(base, final_rev)
    if base_final_tokens is None:
        base_final_tokens = int(base_revs["tokens"][-1] or 0)
    rows = []
    shift_tokens = [t for t in shifted["tokens"].to_list() if t is not None]
    # After-phase tokens counted from the shift (explicit specs) get the base's final tokens added;
    # cumulative ones (expand_models) are kept.
    offset = base_final_tokens if shift_tokens and min(shift_tokens) < base_final_tokens else 0
    for phase, traj in (("before", base), ("after", shifted)):
        revs = traj.select("revision", "tokens").unique(maintain_order=True).sort("tokens", nulls_last=True)
        for rev, tok in revs.iter_rows():
            c = circuit_of(traj, rev)
            total = (tok if phase == "before" else (None if tok is None else offset + tok))
            cell = traj.filter(pl.col("revision") == rev)
            pre_sel = [float(v) for l, h, v in cell.select("layer", "head", "sel_induction").iter_rows()
                       if (l, h) in set(pre) and v is not None]
            rows.append({"model": traj["model"][0], "revision": rev, "tokens": total, "phase": phase,
                         "circuit": [head_name(*h) for h in c], "jaccard_to_pre_shift": jaccard(c, pre),
                         "tokens_since_shift": None if (phase == "before" or total is None) else total - base_final_tokens,
                         "n_circuit": len(c),
                         "pre_shift_circuit": [head_name(*h) for h in pre],
                         "recall_pre_shift": (len(set(c) & set(pre)) / len(pre)) if pre else math.nan,
                         "pre_shift_heads_sel_induction": float(np.mean(pre_sel)) if pre_sel else math.nan})
    return pl.DataFrame(rows, schema_overrides={"circuit": pl.List(pl.String), "pre_shift_circuit": pl.List(pl.String),
                                                "tokens": pl.Int64, "tokens_since_shift": pl.Int64})


def data_shift_heads(base: pl.DataFrame, shifted: pl.DataFrame, base_final_tokens: int | None = None) -> pl.DataFrame:
    """Per head and revision across the shift: induction selectivity and PR, with cumulative tokens."""
    table = data_shift_table(base, shifted, base_final_tokens)
    pre = set(as_heads(table["pre_shift_circuit"][0]))
    after_tokens = dict(table.filter(pl.col("phase") == "after").select("revision", "tokens").iter_rows())
    out = []
    for phase, traj in (("before", base), ("after", shifted)):
        t = traj.select("model", "revision", "tokens", "layer", "head", "sel_induction", "pr", "in_induction_circuit")
        t = t.with_columns(phase=pl.lit(phase))
        if phase == "after":
            t = t.with_columns(tokens=pl.col("revision").replace_strict(after_tokens, return_dtype=pl.Int64))
        out.append(t)
    df = pl.concat(out, how="diagonal_relaxed")
    return df.with_columns(in_pre_shift_circuit=pl.struct("layer", "head").map_elements(
        lambda s: (s["layer"], s["head"]) in pre, return_dtype=pl.Boolean))


# --------------------------------------------------------------------------------------------
# Composition


def composition_table(verdicts: pl.DataFrame, min_baseline_top1: float = 0.05) -> pl.DataFrame:
    """Per model x revision: the previous-token-circuit ablation against its matched-random control,
    ``destroys_induction``, and per model ``onset`` / ``sustained_onset`` (revision and tokens)."""
    v = verdicts.filter(pl.col("circuit") == "previous_token_circuit")
    v = v.with_columns(random_top1_mean=(pl.col("random_top1_mean") if "random_top1_mean" in v.columns
                                         else pl.col("baseline_top1") - pl.col("random_effect_mean")))
    v = v.sort("model", "tokens", nulls_last=True)
    v = v.with_columns(destroys_induction=(pl.col("causal") & (pl.col("baseline_top1") >= min_baseline_top1)))
    parts = []
    for (m,), g in v.group_by("model", maintain_order=True):
        d = g["destroys_induction"].to_list()
        onset = next((i for i, x in enumerate(d) if x), None)
        sus = None
        for i in range(len(d) - 1, -1, -1):
            if d[i]:
                sus = i
            else:
                break
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        parts.append(g.with_columns(
            onset_revision=pl.lit(None if onset is None else revs[onset], pl.String),
            onset_tokens=pl.lit(None if onset is None else toks[onset], pl.Int64),
            sustained_onset_revision=pl.lit(None if sus is None else revs[sus], pl.String),
            sustained_onset_tokens=pl.lit(None if sus is None else toks[sus], pl.Int64),
        ))
    cols = ["model", "revision", "tokens", "n_heads", "heads", "baseline_top1", "ablated_top1", "random_top1_mean",
            "effect", "random_effect_mean", "effect_vs_random", "p_value", "causal", "destroys_induction",
            "onset_revision", "onset_tokens", "sustained_onset_revision", "sustained_onset_tokens"]
    if not parts:
        return pl.DataFrame(schema={c: pl.String for c in cols})
    return pl.concat(parts).select(cols)


# --------------------------------------------------------------------------------------------
# Noise floor


def shuffle_batch(batch: _probe.ProbeBatch, seed: int = 0, keep_first: bool = False) -> _probe.ProbeBatch:
    """Position-shuffled control: each sequence's tokens before the query permuted (fixed seed);
    the query token (A), ``ab``, target and validity flags are kept, so the screen reads the same
    key positions, whose content is now random. ``keep_first`` keeps position 0 (a prepended BOS)."""
    tokens = batch.tokens.copy()
    rng = np.random.default_rng(seed)
    start = 1 if keep_first else 0
    for i in range(tokens.shape[0]):
        body = tokens[i, start:-1]
        tokens[i, start:-1] = body[rng.permutation(body.size)]
    return _probe.ProbeBatch(tokens=tokens, ab=batch.ab.copy(), target=batch.target.copy(), valid=batch.valid.copy())


def null_samples(init_screen: pl.DataFrame | None, shuffled_sel: pl.DataFrame | None) -> pl.DataFrame:
    """Long table (model, null, class, value): ``init`` = every head x class of the init revision;
    ``shuffled`` = the content classes of the position-shuffled captures."""
    parts = []
    if init_screen is not None and init_screen.height:
        for c in CLASS_COLUMNS:
            parts.append(init_screen.select("model", pl.lit("init").alias("null"), pl.lit(c).alias("class"),
                                            pl.col(f"sel_{c}").cast(pl.Float64).alias("value")))
    if shuffled_sel is not None and shuffled_sel.height:
        for c in SHUFFLE_CLASSES:
            parts.append(shuffled_sel.select("model", pl.lit("shuffled").alias("null"), pl.lit(c).alias("class"),
                                             pl.col(f"sel_{c}").cast(pl.Float64).alias("value")))
    if not parts:
        return pl.DataFrame(schema={"model": pl.String, "null": pl.String, "class": pl.String, "value": pl.Float64})
    return pl.concat(parts).filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())


def floors(null: pl.DataFrame, quantile: float = 0.99) -> pl.DataFrame:
    """Per (model, class, null): the ``quantile`` of the null samples (the next sample up, so that with
    few samples - a toy model has 8 heads - the floor is the null's maximum, never below it) and
    n_samples; plus a ``combined`` row per (model, class) = the max over the nulls."""
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    per = (null.group_by("model", "class", "null", maintain_order=True)
           .agg(floor=pl.col("value").quantile(quantile, interpolation="higher"), n_samples=pl.len()))
    comb = (per.group_by("model", "class", maintain_order=True)
            .agg(pl.col("floor").max(), pl.col("n_samples").sum(),
                 pl.col("null").sort().str.join("+").alias("sources"))
            .with_columns(null=pl.lit("combined")))
    per = per.with_columns(sources=pl.col("null"))
    cols = ["model", "class", "null", "floor", "n_samples", "sources"]
    return pl.concat([per.select(cols), comb.select(cols)]).with_columns(
        quantile=pl.lit(float(quantile)), n_samples=pl.col("n_samples").cast(pl.Int32))


def noise_floor_table(traj: pl.DataFrame, floor_table: pl.DataFrame, class_threshold: float = 30.0,
                      null: str = "combined") -> pl.DataFrame:
    """Per model x revision x class (+ ``any``): heads above the class floor, and the 30x count."""
    from headtrace.probe import CLASSES

    fl = floor_table.filter(pl.col("null") == null)
    rows = []
    for (m, rev, tok), g in traj.group_by("model", "revision", "tokens", maintain_order=True):
        fm = {r["class"]: (r["floor"], r["sources"]) for r in fl.filter(pl.col("model") == m).iter_rows(named=True)}
        n = g.height
        above_any = np.zeros(n, bool)
        classified = g["classification"].to_list() if "classification" in g.columns else [None] * n
        for cls_name, c in zip(CLASSES, CLASS_COLUMNS):
            f, src = fm.get(c, (math.nan, None))
            sel = g[f"sel_{c}"].fill_nan(None).fill_null(-math.inf).to_numpy()
            above = sel > f if not (f is None or math.isnan(f)) else np.zeros(n, bool)
            above_any |= above
            n_cls = sum(1 for x in classified if x == cls_name)
            rows.append({"model": m, "revision": rev, "tokens": tok, "class": c, "floor": f,
                         "n_above": int(above.sum()), "fraction_above": above.sum() / n if n else math.nan,
                         "n_heads": n, "n_classified": n_cls, "fraction_classified": n_cls / n if n else math.nan,
                         "null": src})
        n_cls = sum(1 for x in classified if x is not None and x != _probe.UNCLASSIFIED)
        rows.append({"model": m, "revision": rev, "tokens": tok, "class": "any", "floor": math.nan,
                     "n_above": int(above_any.sum()), "fraction_above": above_any.sum() / n if n else math.nan,
                     "n_heads": n, "n_classified": n_cls, "fraction_classified": n_cls / n if n else math.nan,
                     "null": null})
    return pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64, "floor": pl.Float64, "null": pl.String})


def resolve_revisions(spec: Sequence[str], revisions: Sequence[str]) -> list[str]:
    """``first``/``final`` -> the model's first/last revision; names not among ``revisions`` dropped."""
    out = []
    for r in spec:
        r = revisions[0] if r == "first" else revisions[-1] if r == "final" else r
        if r in revisions and r not in out:
            out.append(r)
    return out


# --------------------------------------------------------------------------------------------
# Figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    _plt().close(fig)


def _empty(path, text: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    _save(fig, path)


def _xtok(tokens, floor=None):
    t = np.array([np.nan if x is None else float(x) for x in tokens])
    pos = t[t > 0]
    f = floor or (10 ** (math.floor(math.log10(pos.min())) - 1) if pos.size else 1.0)
    return np.where(t == 0, f, t), f


def plot_cross_seed(df: pl.DataFrame, path) -> None:
    """Heatmaps: excess top-1 drop over matched random (circuit seed x model seed), and Jaccard."""
    if df.height == 0:
        return _empty(path, "no cross-seed ablation (fewer than two seeds)")
    plt = _plt()
    rows, cols, m = cross_seed_matrix(df, "top1_drop_vs_random")
    _, _, raw = cross_seed_matrix(df, "top1_drop")
    _, _, jac = cross_seed_matrix(df, "jaccard")
    fig, axes = plt.subplots(1, 2, figsize=(4.2 + 1.6 * len(cols), 3 + 0.5 * len(rows)))
    lim = max(1e-3, float(np.nanmax(np.abs(m))) if np.isfinite(m).any() else 1e-3)
    im = axes[0].imshow(100 * m, cmap="RdBu_r", vmin=-100 * lim, vmax=100 * lim)
    for a, b in np.ndindex(m.shape):
        axes[0].text(b, a, f"{100 * m[a, b]:+.1f}\n({100 * raw[a, b]:+.1f})", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=axes[0], label="top-1 drop beyond matched random (pp)")
    axes[0].set_title("seed i's circuit ablated in model j", fontsize=9)
    im2 = axes[1].imshow(jac, cmap="viridis", vmin=0, vmax=1)
    for a, b in np.ndindex(jac.shape):
        axes[1].text(b, a, "n/a" if np.isnan(jac[a, b]) else f"{jac[a, b]:.2f}", ha="center", va="center",
                     color="w" if (np.isnan(jac[a, b]) or jac[a, b] < 0.6) else "k", fontsize=9)
    fig.colorbar(im2, ax=axes[1], label="Jaccard(circuit i, circuit j)")
    axes[1].set_title("circuit overlap (Jaccard)", fontsize=9)
    for ax in axes:
        ax.set_xticks(range(len(cols)), [f"seed {c}" for c in cols])
        ax.set_yticks(range(len(rows)), [f"seed {r}" for r in rows])
        ax.set_xlabel("model seed j")
        ax.set_ylabel("circuit seed i")
    fig.tight_layout()
    _save(fig, path)


def plot_data_shift(heads: pl.DataFrame, table: pl.DataFrame, path) -> None:
    """Induction selectivity and PR of every head across the shift (pre-shift circuit heads bold),
    and the circuit's Jaccard to the pre-shift circuit; x = checkpoints in order (evenly spaced)."""
    if heads.height == 0:
        return _empty(path, "no data-shift experiment")
    plt = _plt()
    order = table.with_row_index("x").select("x", "phase", "revision", "tokens")
    heads = heads.join(order, on=["phase", "revision"], how="left", suffix="_o")
    labels = [f"{'+' if ph == 'after' else ''}{rev}\n{_fmt_tok(tok)}" for _, ph, rev, tok in order.iter_rows()]
    n_before = order.filter(pl.col("phase") == "before").height
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, ((layer, head), g) in enumerate(heads.sort("x").group_by("layer", "head", maintain_order=True)):
        pre = bool(g["in_pre_shift_circuit"][0])
        style = dict(lw=2.4 if pre else 0.9, alpha=1 if pre else 0.5, color=colors[k % len(colors)],
                     label=head_name(layer, head) + (" (pre-shift circuit)" if pre else ""))
        for phase, ls in (("before", "-"), ("after", "-")):
            gp = g.filter(pl.col("phase") == phase)
            axes[0].plot(gp["x"].to_numpy(), gp["sel_induction"].clip(lower_bound=1e-2).to_numpy(), "o" + ls, ms=3,
                         **(style if phase == "before" else {**style, "label": None}))
            axes[1].plot(gp["x"].to_numpy(), gp["pr"].to_numpy(), "o" + ls, ms=3,
                         **(style if phase == "before" else {**style, "label": None}))
    axes[2].plot(order["x"].to_numpy(), table["jaccard_to_pre_shift"].to_numpy(), "ko-")
    axes[2].set_ylim(-0.05, 1.05)
    axes[0].set_yscale("log")
    axes[0].axhline(50, color="k", ls=":", lw=0.8)
    for ax, lab in zip(axes, ["induction selectivity (×, dotted: 50×)", "participation ratio",
                              "Jaccard to pre-shift circuit"]):
        ax.set_xticks(order["x"].to_list(), labels, fontsize=6, rotation=90)
        ax.set_ylabel(lab)
        ax.axvline(n_before - 0.5, color="grey", ls="--", lw=1)
        ax.set_xlabel("checkpoint (before | + after the shift), tokens")
    axes[0].legend(fontsize=7, ncol=2)
    after = table.filter(pl.col("phase") == "after")
    fig.suptitle(f"data shift: {table['model'][0]} → {after['model'][0] if after.height else '?'} (dashed: the shift)")
    fig.tight_layout()
    _save(fig, path)


def plot_composition(comp: pl.DataFrame, path) -> None:
    """Per model: baseline top-1, previous-token-circuit ablated top-1, matched-random mean."""
    if comp.height == 0:
        return _empty(path, "no ablation tables")
    plt = _plt()
    models = comp["model"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False)
    x_all, f = _xtok(comp["tokens"].to_list())
    for ax, m in zip(axes[0], models):
        g = comp.filter(pl.col("model") == m).sort("tokens")
        x, _ = _xtok(g["tokens"].to_list(), f)
        ax.plot(x, g["baseline_top1"].to_numpy(), "k-o", ms=3, label="baseline")
        ax.plot(x, g["ablated_top1"].to_numpy(), "r-o", ms=3, label="prev-token circuit ablated")
        ax.plot(x, g["random_top1_mean"].to_numpy(), "b--o", ms=3, label="matched random (mean)")
        d = g["destroys_induction"].to_numpy()
        ax.scatter(x[d], g["ablated_top1"].to_numpy()[d], s=70, facecolors="none", edgecolors="r")
        on = g["onset_tokens"][0]
        if on is not None:
            ax.axvline(f if on == 0 else on, color="r", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("top-1(B) at the query")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)


def plot_noise_floor(nf: pl.DataFrame, path) -> None:
    """Specialized-head fraction (heads above the noise floor of any class) vs the 30x count."""
    if nf.height == 0:
        return _empty(path, "no noise-floor models")
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x_all, f = _xtok(nf["tokens"].to_list())
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, m in enumerate(nf["model"].unique(maintain_order=True).to_list()):
        c = colors[k % len(colors)]
        g = nf.filter((pl.col("model") == m) & (pl.col("class") == "any")).sort("tokens")
        x, _ = _xtok(g["tokens"].to_list(), f)
        axes[0].plot(x, 100 * g["fraction_above"].to_numpy(), "o-", color=c, label=f"{m}: above floor")
        axes[0].plot(x, 100 * g["fraction_classified"].to_numpy(), "s--", color=c, alpha=0.7, label=f"{m}: ≥ 30×")
        gi = nf.filter((pl.col("model") == m) & (pl.col("class") == "induction")).sort("tokens")
        axes[1].plot(x, 100 * gi["fraction_above"].to_numpy(), "o-", color=c, label=f"{m}: above floor")
        axes[1].plot(x, 100 * gi["fraction_classified"].to_numpy(), "s--", color=c, alpha=0.7, label=f"{m}: ≥ 30×")
    axes[0].set_title("specialized heads (any class above its floor)")
    axes[1].set_title("induction: above floor vs classified")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"training tokens (0 drawn at {f:.0e})")
        ax.set_ylabel("% of heads")
        ax.set_ylim(-3, 103)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    _save(fig, path)


# --------------------------------------------------------------------------------------------
# Summary


def _fmt_tok(t) -> str:
    if t is None:
        return "n/a"
    for unit, div in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if t >= div:
            return f"{t / div:.3g}{unit}"
    return str(int(t))


def summary_markdown(cross_seed: pl.DataFrame | None = None, data_shift: pl.DataFrame | None = None,
                     composition: pl.DataFrame | None = None, noise_floor: pl.DataFrame | None = None,
                     floor_table: pl.DataFrame | None = None) -> str:
    """One paragraph per experiment, stating what this panel shows (markdown)."""
    out = ["## Method experiments (paper A)", ""]
    # seed specificity
    if cross_seed is not None and cross_seed.height:
        own = cross_seed.filter(pl.col("same_seed"))
        other = cross_seed.filter(~pl.col("same_seed"))
        seeds = sorted(set(cross_seed["model_seed"].to_list()))
        circ = {r["circuit_seed"]: ",".join(r["circuit"]) or "∅" for r in own.iter_rows(named=True)}
        jac = other["jaccard"].drop_nans().drop_nulls()
        if own["n_heads"].sum() == 0:
            verdict = "No seed has an induction circuit at its final revision, so there is nothing to compare. "
        else:
            specific = (jac.len() > 0 and jac.mean() < 1
                        and other["top1_drop_vs_random"].mean() < 0.5 * own["top1_drop_vs_random"].mean())
            verdict = ("Circuits differ by seed and a foreign circuit hurts far less than the own one, as in the paper. "
                       if specific else
                       "Unlike the paper's 51M models, the circuits here are not clearly seed-specific (with few heads "
                       "per layer, seeds can land on the same heads), so a foreign circuit can hurt like the own one. ")
        out.append(
            f"**Seed specificity.** {len(seeds)} seeds of `{own['model'][0]}`; final induction "
            f"circuits: " + "; ".join(f"seed {s}: {circ.get(s, '?')}" for s in seeds) + ". "
            f"Ablating a model's own circuit drops top-1(B) by "
            f"{100 * own['top1_drop'].mean():.1f} pp on average ({100 * own['top1_drop_vs_random'].mean():+.1f} pp "
            f"beyond matched random); another seed's circuit drops it by {100 * other['top1_drop'].mean():.1f} pp "
            f"({100 * other['top1_drop_vs_random'].mean():+.1f} pp beyond matched random). Mean cross-seed Jaccard "
            f"{jac.mean() if jac.len() else float('nan'):.2f}. " + verdict
            + "(`results/experiments/cross_seed_ablation.parquet`)")
        out.append("")
    # data shift
    if data_shift is not None and data_shift.height:
        after = data_shift.filter(pl.col("phase") == "after").sort("tokens")
        pre = data_shift["pre_shift_circuit"][0].to_list()
        j_end = after["jaccard_to_pre_shift"][-1] if after.height else float("nan")
        j_min = after["jaccard_to_pre_shift"].drop_nans().min() if after.height else float("nan")
        out.append(
            f"**Data shift.** `{after['model'][0] if after.height else '?'}` continues the final checkpoint of "
            f"`{data_shift.filter(pl.col('phase') == 'before')['model'][0]}` on a second corpus for "
            f"{_fmt_tok(after['tokens_since_shift'].max() if after.height else None)} tokens. Pre-shift induction circuit: "
            f"{', '.join(pre) or '∅'}; after the shift: {', '.join(after['circuit'][-1].to_list()) or '∅'} "
            f"(Jaccard {j_end:.2f} at the end, minimum {j_min if j_min is not None else float('nan'):.2f} over the "
            f"{after.height} post-shift checkpoints; paper: 1.00, FineWeb → OpenWebText). "
            + (f"The pre-shift heads' mean induction selectivity goes from "
               f"{data_shift.filter(pl.col('phase') == 'before')['pre_shift_heads_sel_induction'][-1]:.3g}× before the "
               f"shift to {after['pre_shift_heads_sel_induction'][-1]:.3g}× at the end (circuit threshold: "
               f"induction selectivity ≥ 50×). " if pre and after.height else "")
            + ("There was no pre-shift circuit to track. " if not pre else
               "The circuit survives the shift. " if j_end == 1 else "The circuit does not fully survive the shift. ")
            + "(`results/experiments/data_shift.parquet`)")
        out.append("")
    # composition
    if composition is not None and composition.height:
        parts = []
        for (m,), g in composition.group_by("model", maintain_order=True):
            on = g["onset_revision"][0]
            sus = g["sustained_onset_revision"][0]
            parts.append(f"`{m}`: " + ("never" if on is None else
                         f"from {on} ({_fmt_tok(g['onset_tokens'][0])} tokens)"
                         + ("" if sus == on else f", for good from {sus or 'never'}")))
        out.append(
            "**Composition.** Revisions at which ablating the previous-token circuit (best class previous-token "
            "≥ 100×) destroys induction (causal against its matched-random control, baseline top-1 ≥ threshold): "
            + "; ".join(parts) + ". (`results/experiments/composition.parquet`)")
        out.append("")
    # noise floor
    if noise_floor is not None and noise_floor.height:
        parts = []
        for (m,), g in noise_floor.filter(pl.col("class") == "any").group_by("model", maintain_order=True):
            g = g.sort("tokens")
            gi = noise_floor.filter((pl.col("model") == m) & (pl.col("class") == "induction")).sort("tokens")
            parts.append(f"`{m}` {100 * g['fraction_above'][-1]:.1f}% of heads above the floor of some class vs "
                         f"{100 * g['fraction_classified'][-1]:.1f}% classified at ≥ 30×; induction alone "
                         f"{100 * gi['fraction_above'][-1]:.1f}% above its floor ({gi['floor'][-1]:.3g}×) vs "
                         f"{100 * gi['fraction_classified'][-1]:.1f}% at ≥ 30×")
        narrow = ("Random-init heads attend almost uniformly, so the init null is narrow (floors near 1×) and "
                  "any trained head that departs from uniform attention crosses it: the above-floor fraction is an "
                  "upper bound, the 30× count a lower one. ")
        q = floor_table["quantile"][0] if floor_table is not None and floor_table.height else 0.99
        out.append(
            f"**Specialized fraction and noise floor.** Floor = the {100 * q:g}th percentile of a null of "
            "selectivities (random-init heads; position-shuffled probe for the content classes). At the final "
            "revision: " + "; ".join(parts) + ". Paper: ~17–19% over 124M–410M, 4.7–27.3% at 1B. "
            + (narrow if (floor_table is not None and floor_table.height and float(
                floor_table.filter(pl.col("null") == "init")["floor"].median() or 0) < 2) else "")
            + "(`results/experiments/noise_floor.parquet`)")
        out.append("")
    return "\n".join(out) + "\n"
