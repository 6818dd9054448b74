"""Adaptive refinement: narrow the bracket around each F3 milestone by screening more revisions.

After a model's configured revisions are screened, every milestone (``induction_3_heads``,
``first_token_50pct``, ... any F3 milestone name) is *first reached* at some revision ``hi``; the
revision just before it in training order is ``lo``. The onset lies in ``(lo, hi]``, and
``tokens(hi) / tokens(lo)`` is how sharply the panel can say *when*. A refinement round adds
revisions strictly between ``lo`` and ``hi`` from the model's *candidate pool* (hub branches,
checkpoint folders, the toy's denser pool), picked nearest the geometric midpoint of the bracket;
the next round looks again with the new revisions screened. A bracket stops when its ratio is at
most ``target_ratio``, when the pool has nothing left inside it, or after ``max_rounds`` rounds.

Everything here is a pure function over tables and lists; the workflow (``rules/refine.smk``)
only wires it: one Snakemake checkpoint per model and round writes a round record (JSON), and
``onsets`` turns the records and the trajectories into ``f3_onsets``.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import polars as pl

from headtrace.core import durable, milestones, schema
from headtrace.core import revisions as revs
from headtrace.core.errors import ConfigError
from headtrace.core.refinement import ADDED, AT_FIRST, EXHAUSTED, MAX_ROUNDS, NEVER, NO_POOL, OFF, TARGET_MET
from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings import trajectory as trajectories
from headtrace.findings.onsets import with_onset_columns

DEFAULTS = schema.defaults("refine")  # config/schema.yaml: the one source



# ---------------------------------------------------------------------------------------------
# settings


def parse_milestone(name: str) -> tuple[str, int]:
    """``"induction_3_heads"`` → ``("induction", 3)``; ``"first_token_50pct"`` → ``("first_token", 50)``.

    The names are those of ``trajectories.f3_milestones``: induction circuit of at least k heads,
    first-token (BOS) fraction of at least p percent. Raises ValueError for anything else."""
    m = milestones.parse(name)  # ValueError: not a milestone
    if m.kind not in ("induction", "first_token"):
        raise ValueError(f"unknown milestone '{name}' for refinement (expected induction_<k>_heads or "
                         "first_token_<p>pct, the F3 milestones, e.g. induction_3_heads, first_token_50pct)")
    return m.kind, m.level


def settings(config: dict, model: str) -> dict:
    """The refinement settings of one model: defaults < global ``refine`` < the model's ``refine``."""
    spec = config["models"][model]
    return {**DEFAULTS, **(config.get("refine") or {}), **(spec.get("refine") or {})}


def enabled(config: dict, model: str) -> bool:
    """Refinement runs for this model (on, and a source with a candidate pool: not ``reference``)."""
    return bool(settings(config, model)["enabled"]) and config["models"][model]["source"] != "reference"


def check(config: dict) -> None:
    """Cross-field checks of the refine blocks; raises ``panel.ConfigError`` naming the key."""
    for where, block in [("refine", config.get("refine") or {})] + [
            (f"models.{m}.refine", s.get("refine") or {}) for m, s in config["models"].items()]:
        for name in block.get("milestones", []):
            try:
                parse_milestone(name)
            except ValueError as err:
                raise ConfigError(f"{where}.milestones: {err}") from None
    for model, spec in config["models"].items():
        if not enabled(config, model):
            continue
        for r in spec["revisions"]:
            try:
                t = revs.tokens_for(r, spec)
            except ValueError as err:
                raise ConfigError(f"models.{model}.revisions: {err}") from None
            if t is None:
                raise ConfigError(f"models.{model}: refinement needs training tokens per revision "
                                  f"(set tokens_per_step, tokens_schedule, tokens_from_name or a tokens: map)")
        if spec["source"] == "hub" and not spec.get("hf_id"):
            raise ConfigError(f"models.{model}.refine: refinement adds branches of hf_id, and this model has "
                              f"none (its revisions are separate repositories, models.{model}.repos)")
        if spec["source"] == "hub" and spec.get("branch_list") and not Path(spec["branch_list"]).is_file():
            raise ConfigError(f"models.{model}.branch_list: no such file '{spec['branch_list']}'")


# ---------------------------------------------------------------------------------------------
# brackets


def _ratio(lo: int | None, hi: int | None) -> float | None:
    return hi / lo if lo is not None and hi is not None and lo > 0 else None


def brackets(traj: pl.DataFrame, milestones: list[str], class_threshold: float = 30.0,
             induction_threshold: float = 50.0) -> pl.DataFrame:
    """Per model x milestone: the first revision reaching it (``hi``) and the one before it (``lo``).

    Columns model, milestone, lo_revision, lo_tokens, hi_revision, hi_tokens, bracket_ratio
    (hi/lo tokens; null when lo is missing or has 0 tokens) and ``status``: ``"bracket"``,
    ``"never reached"`` or ``"reached at the first revision"``. Order and milestone definitions
    are those of :func:`trajectories.f3_milestones` (same thresholds)."""
    parsed = [parse_milestone(m) for m in milestones]
    ks = tuple(dict.fromkeys(v for kind, v in parsed if kind == "induction"))
    ps = tuple(dict.fromkeys(v / 100 for kind, v in parsed if kind == "first_token"))
    ms = trajectories.f3_milestones(traj, class_threshold, induction_threshold,
                                    induction_counts=ks, first_token_fractions=ps)
    order = trajectories.revision_order(traj)
    rows = []
    for model in traj["model"].unique(maintain_order=True).to_list():
        mo = order.filter(pl.col("model") == model).sort("rev_index")
        names, toks = mo["revision"].to_list(), mo["tokens"].to_list()
        for name in milestones:
            hit = ms.filter((pl.col("model") == model) & (pl.col("milestone") == name))
            hi = hit["revision"][0] if hit.height else None
            row = dict(model=model, milestone=name, lo_revision=None, lo_tokens=None, hi_revision=hi,
                       hi_tokens=None, bracket_ratio=None, status=NEVER)
            if hi is not None:
                i = names.index(hi)
                row["hi_tokens"] = toks[i]
                if i == 0:
                    row["status"] = AT_FIRST
                else:
                    row.update(lo_revision=names[i - 1], lo_tokens=toks[i - 1], status="bracket",
                               bracket_ratio=_ratio(toks[i - 1], toks[i]))
            rows.append(row)
    schema = {**{c: SCHEMAS["f3_onsets"][c] for c in ("model", "milestone", "lo_revision", "lo_tokens",
                                                      "hi_revision", "hi_tokens", "bracket_ratio")},
              "status": pl.String}
    return pl.DataFrame(rows, schema=schema)


def pick_between(lo_tokens: int, hi_tokens: int, candidates: list[tuple[str, int]], k: int = 1) -> list[str]:
    """Up to ``k`` candidate revisions with tokens strictly between ``lo_tokens`` and ``hi_tokens``.

    k = 1: the candidate nearest the geometric midpoint of the bracket; k > 1: the candidate nearest
    each of the k points that cut the bracket into k + 1 equal steps in log tokens (a k-section;
    each point takes the nearest candidate not yet taken). Distances are in log(1 + tokens), so a
    bracket starting at step 0 (0 tokens) has a midpoint too; ties go to the earlier candidate.
    Returned in token order."""
    if k < 1:
        raise ValueError(f"per_round must be >= 1, got {k}")
    inside = sorted({(t, r) for r, t in candidates if t is not None and lo_tokens < t < hi_tokens})
    a, b = math.log1p(lo_tokens), math.log1p(hi_tokens)
    chosen: list[tuple[int, str]] = []
    for j in range(1, k + 1):
        target = a + (b - a) * j / (k + 1)
        free = [c for c in inside if c not in chosen]
        if not free:
            break
        chosen.append(min(free, key=lambda c: (abs(math.log1p(c[0]) - target), c[0])))
    return [r for _, r in sorted(chosen, key=lambda c: revs.training_order_key(c[1], c[0]))]


def plan_round(brackets_df: pl.DataFrame, pool: list[tuple[str, int]], screened: list[str],
               target_ratio: float = 1.5, per_round: int = 1) -> list[dict]:
    """One refinement round for one model: per milestone its bracket, the action and the revisions
    it adds. ``pool`` holds the candidate ``(revision, tokens)`` pairs; revisions already
    ``screened`` are never added again. A milestone whose bracket ratio is <= ``target_ratio``
    adds nothing (``"target met"``), as does one without a bracket or without candidates inside."""
    done = set(screened)
    candidates = [(r, t) for r, t in pool if r not in done]
    out = []
    for row in brackets_df.iter_rows(named=True):
        rec = {k: row[k] for k in ("milestone", "lo_revision", "lo_tokens", "hi_revision", "hi_tokens",
                                   "bracket_ratio")}
        added: list[str] = []
        if row["status"] != "bracket":
            action = row["status"]
        elif row["bracket_ratio"] is not None and row["bracket_ratio"] <= target_ratio:
            action = TARGET_MET
        else:
            added = pick_between(row["lo_tokens"], row["hi_tokens"], candidates, per_round)
            action = ADDED if added else EXHAUSTED
        out.append({**rec, "action": action, "added": added})
    return out


def round_record(model: str, round_index: int, plans: list[dict], pool: list[tuple[str, int]],
                 tokens: dict[str, int]) -> dict:
    """The JSON record a refinement round writes: per-milestone plans and the union it adds."""
    union = sorted({r for p in plans for r in p["added"]}, key=lambda r: revs.training_order_key(r, tokens[r]))
    return {"model": model, "round": round_index, "pool_size": len(pool), "milestones": plans, "added": union}


def run_round(traj: pl.DataFrame, model: str, round_index: int, pool: list[tuple[str, int]], s: dict,
              class_threshold: float = 30.0, induction_threshold: float = 50.0) -> dict:
    """Round ``round_index`` for ``model`` whose screened revisions make up ``traj`` (screen rows of
    the configured revisions and those added by earlier rounds); ``s`` = :func:`settings`."""
    traj = traj.filter(pl.col("model") == model)
    b = brackets(traj, s["milestones"], class_threshold, induction_threshold)
    plans = plan_round(b, pool, traj["revision"].unique().to_list(), s["target_ratio"], s["per_round"])
    return round_record(model, round_index, plans, pool, dict(pool))


def write_record(record: dict, path: str | os.PathLike) -> None:
    """Write a round record atomically (a half-written record must never look like a finished round)."""
    durable.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", path)


def read_record(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text())


def read_added(path: str | os.PathLike) -> list[str]:
    """The revisions a round record adds."""
    return list(read_record(path)["added"])


# ---------------------------------------------------------------------------------------------
# candidate pools


def pool_pairs(names, spec: dict) -> list[tuple[str, int]]:
    """``(revision, tokens)`` for every name whose tokens the model's spec determines (others, such
    as ``main`` or names without a step, are left out), in token order."""
    out = {}
    for r in names:
        try:
            t = revs.tokens_for(r, spec)
        except ValueError:
            continue
        if t is not None and re.fullmatch(r"[A-Za-z0-9._-]+", r):
            out[r] = t
    return sorted(out.items(), key=lambda p: revs.training_order_key(p[0], p[1]))


def read_branch_list(path: str | os.PathLike) -> list[str]:
    """A branch list file: one name per line, as ``headtrace revisions HF_ID --list`` prints it
    ('#' starts a comment)."""
    return revs.parse_name_list(Path(path).read_text())


def write_branch_list(names: list[str], path: str | os.PathLike) -> None:
    durable.write_text("".join(f"{n}\n" for n in names), path)


# ---------------------------------------------------------------------------------------------
# the f3_onsets table


def onsets(traj: pl.DataFrame, info: dict[str, dict], records: dict[str, list[dict]],
           class_threshold: float = 30.0, induction_threshold: float = 50.0,
           intervals: pl.DataFrame | None = None) -> pl.DataFrame:
    """``f3_onsets``: per model x milestone, the bracket over *all* screened revisions, how many
    rounds added revisions to it, how many it got, whether ``tokens_hi / tokens_lo <= target_ratio``
    and why refinement stopped there (``stop``).

    ``info[model]``: ``milestones``, ``target_ratio``, ``refine`` (bool) and ``source``;
    ``records[model]``: that model's round records in round order (empty when not refined).
    ``onset_lo_revision``/``onset_hi_revision``: the bootstrap spread of the onset, from
    ``intervals`` (``f3_onset_bootstrap``, ``onsets.with_onset_columns``); null without it."""
    frames = []
    for model in traj["model"].unique(maintain_order=True).to_list():
        if model not in info:
            continue
        i = info[model]
        b = brackets(traj.filter(pl.col("model") == model), i["milestones"], class_threshold, induction_threshold)
        rows = []
        for row in b.iter_rows(named=True):
            plans = [p for rec in records.get(model, []) for p in rec["milestones"] if p["milestone"] == row["milestone"]]
            met = row["bracket_ratio"] is not None and row["bracket_ratio"] <= i["target_ratio"]
            if not i["refine"]:
                stop = NO_POOL if i["source"] == "reference" else OFF
            elif row["status"] != "bracket":
                stop = row["status"]
            elif met:
                stop = TARGET_MET
            elif plans and plans[-1]["action"] == ADDED:
                stop = MAX_ROUNDS
            else:
                stop = EXHAUSTED
            first = plans[0] if plans else row
            rows.append({**{k: v for k, v in row.items() if k != "status"},
                         "rounds": sum(1 for p in plans if p["added"]),
                         "n_added": sum(len(p["added"]) for p in plans),
                         "target_met": met, "stop": stop,
                         "unrefined_lo_revision": first["lo_revision"],
                         "unrefined_hi_revision": first["hi_revision"],
                         "unrefined_ratio": first["bracket_ratio"],
                         "onset_lo_revision": None, "onset_hi_revision": None})
        frames.append(pl.DataFrame(rows, schema=SCHEMAS["f3_onsets"]))
    if not frames:
        return pl.DataFrame(schema=SCHEMAS["f3_onsets"])
    return conform(with_onset_columns(pl.concat(frames), intervals), "f3_onsets")


__all__ = [
    "DEFAULTS", "parse_milestone", "settings", "enabled", "check", "brackets", "pick_between", "plan_round",
    "round_record", "run_round", "write_record", "read_record", "read_added", "pool_pairs", "read_branch_list",
    "write_branch_list", "onsets",
]
