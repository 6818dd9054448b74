"""Experiment configuration: the ``experiments`` block, the models it derives, and what it asks for.

**Derived models** (``expand_models``). The config's ``experiments`` block names a *base* toy
model; the seed and data-shift models are added to ``config["models"]`` as ordinary ``source:
toy`` models (so every per-cell rule - capture, PR, screen, ablation - runs on them unchanged):

- ``experiments.seeds = {base: M, seeds: [1, 2], revisions: ends|all|[...]}`` adds ``M-seed1``,
  ``M-seed2``: M's spec with ``train.seed`` set (M itself is seed ``M.train.seed``, default 0);
  ``revisions: ends`` (default) keeps only M's first and final revision (training costs the same,
  the per-cell jobs do not); a list keeps those of M's revisions (in M's order, ending with M's
  final one, so the seeds' final circuits are compared at one step). Refinement stays off for the
  seed models unless ``all``.
- ``experiments.data_shift = {base: M, data: {...}, max_steps: N, n_checkpoints: n, optim: {...}}``
  adds ``M-shift``: trained by the ``train_shift`` rule from M's final checkpoint on the second
  corpus ``data`` (a ``toy.make_data`` spec, default the ``zipf`` kind) for N steps, checkpoints
  at ``toy.checkpoint_steps(N, n)``. Its ``train`` block carries ``shift_from: M``; its step
  counts from the shift; its ``tokens`` map is cumulative (the base's final tokens plus the
  continuation's batch_size x seq_len a step), so it sits after its base on every token axis.

A name already present in ``config["models"]`` is left alone (an explicit spec wins).
The workflow's output paths are not here: they live with every other path in ``common.smk``.
"""
from __future__ import annotations

import copy
from typing import Mapping, Sequence

from headtrace.core import revisions as _revs
from headtrace.core import schema
from headtrace.models.toy import recipe as toy

EXPERIMENTS = ("cross_seed", "data_shift", "composition", "noise_floor")

DEFAULTS = schema.defaults("experiments")  # config/schema.yaml: the one source


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
            chosen = seeds.get("revisions", "ends")
            if chosen == "ends" and len(spec["revisions"]) > 1:
                new["revisions"] = [spec["revisions"][0], spec["revisions"][-1]]
            elif isinstance(chosen, list):
                new["revisions"] = _chosen_revisions(chosen, list(spec["revisions"]), base)
            if chosen != "all" and len(spec["revisions"]) > 1:
                # a few revisions are for the cross-seed comparison and the group brackets, not a
                # trajectory: refining them would add cells the demo budget has no room for
                new["refine"] = {**(new.get("refine") or {}), "enabled": False}
            config["models"][name] = new
    shift = s["data_shift"]
    if shift.get("base"):
        base = shift["base"]
        spec = _base_spec(config, base, "data_shift")
        name = shift_model_name(base)
        if name not in config["models"]:
            steps = toy.checkpoint_steps(int(shift["max_steps"]), int(shift["n_checkpoints"]))
            new = {k: copy.deepcopy(v) for k, v in spec.items()
                   if k not in ("revisions", "train", "tokens", "tokens_per_step", "tokens_schedule")}
            new["revisions"] = [_revs.toy_revision(n) for n in steps]
            # Cumulative tokens (the base's final tokens + tokens since the shift), so the
            # continuation sits after its base on every token axis.
            # The continuation trains with the base's optimizer settings (its batch, so its tokens a
            # step) updated by the shift's; tokens a step follow from that batch.
            optim = {**copy.deepcopy((spec.get("train") or {}).get("optim") or {}),
                     **copy.deepcopy(shift.get("optim") or {})}
            merged = toy.recipe(spec["family"], {"optim": optim})["optim"]
            final_tokens = _revs.tokens_for(spec["revisions"][-1], spec)
            if final_tokens is not None:
                tps = int(merged["batch_size"]) * int(merged["seq_len"])
                new["tokens"] = {_revs.toy_revision(n): int(final_tokens) + n * tps for n in steps}
            train = {"shift_from": base, "max_steps": int(shift["max_steps"]), "seed": int(shift.get("seed", 1)),
                     "data": copy.deepcopy(shift.get("data") or {}), "optim": optim}
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


def wanted(config: Mapping, ablation_enabled: bool, run_models: Sequence[str]) -> list[str]:
    """The experiments the config asks for, in report order (names among ``EXPERIMENTS``)."""
    if not settings(config)["enabled"]:
        return []
    on = {"cross_seed": bool(seed_models(config)), "data_shift": bool(shift_pair(config)),
          "composition": composition_on(config, ablation_enabled, run_models),
          "noise_floor": bool(noise_floor_models(config, run_models))}
    return [name for name in EXPERIMENTS if on[name]]


def targets(config: Mapping, ablation_enabled: bool, run_models: Sequence[str], paths: Mapping[str, str]) -> list[str]:
    """Every experiment output the config asks for (for the workflow's ``all_targets()``):
    ``paths["exp_<name>"]`` and ``paths["exp_figure"]`` (with ``{name}``) per wanted experiment,
    then ``paths["exp_summary"]``. The paths themselves live with the workflow's (common.smk)."""
    out = []
    for name in wanted(config, ablation_enabled, run_models):
        out += [paths[f"exp_{name}"], paths["exp_figure"].format(name=name)]
    return out + [paths["exp_summary"]] if out else []


def resolve_revisions(spec: Sequence[str], revisions: Sequence[str]) -> list[str]:
    """``first``/``final`` -> the model's first/last revision; names not among ``revisions`` dropped."""
    out = []
    for r in spec:
        r = revisions[0] if r == "first" else revisions[-1] if r == "final" else r
        if r in revisions and r not in out:
            out.append(r)
    return out


def shift_train_kwargs(family: str, train: Mapping, revisions: Sequence[str], init_from: str,
                       defaults: Mapping | None = None) -> dict:
    """Keyword arguments of ``toy.train`` for a data-shift continuation from ``init_from``."""
    if defaults is None:
        defaults = toy.DEFAULTS[family]
    merged = _deep_merge(dict(defaults), {k: v for k, v in train.items() if k in ("arch", "optim", "max_steps")})
    data = {**(defaults.get("data") or {}), **(train.get("data") or {})} if train.get("data") else dict(defaults["data"])
    steps = []
    for r in revisions:
        steps.append(_revs.toy_step(r))
    max_steps = int(train.get("max_steps", max(steps)))
    return {"arch": merged["arch"], "data": data, "optim": merged["optim"], "max_steps": max_steps,
            "checkpoint_steps": steps, "seed": int(train.get("seed", 0)), "init_from": str(init_from)}


def _base_spec(config: Mapping, base: str, what: str) -> dict:
    spec = config["models"].get(base)
    if spec is None:
        raise ValueError(f"experiments.{what}.base: no model '{base}' in models")
    if spec.get("source") != "toy":
        raise ValueError(f"experiments.{what}.base: '{base}' is not a toy model (source {spec.get('source')})")
    return spec


def _chosen_revisions(chosen: Sequence[str], base_revisions: list[str], base: str) -> list[str]:
    """``experiments.seeds.revisions`` as a list: base's revisions, in its order, ending with its final one."""
    missing = [r for r in chosen if r not in base_revisions]
    if missing:
        raise ValueError(f"experiments.seeds.revisions: {missing} are not revisions of '{base}' "
                         f"({', '.join(base_revisions)})")
    idx = [base_revisions.index(r) for r in chosen]
    if idx != sorted(idx):
        raise ValueError(f"experiments.seeds.revisions: list them in the training order of '{base}'")
    if chosen[-1] != base_revisions[-1]:
        raise ValueError(f"experiments.seeds.revisions: end with the final revision of '{base}', '{base_revisions[-1]}' "
                         "(the seeds' final circuits are compared at one step)")
    return list(chosen)


def _deep_merge(a: dict, b: Mapping) -> dict:
    out = copy.deepcopy(a)
    for k, v in (b or {}).items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out
