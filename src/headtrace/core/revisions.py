"""Checkpoint (revision) names, their training-token counts, and picking a log-spaced panel.

Pure functions (no network) except :func:`list_hub_revisions`. Revision names seen in practice:

* Pythia: ``step0``, ``step1``, ``step2``, ``step4`` … ``step512``, ``step1000`` … ``step143000``;
  tokens are not in the name (2,097,152 tokens per step: 1024 sequences × 2048 tokens).
* OLMo / OLMoE / OLMo-2: ``step126000-tokens264B``, ``stage1-step1000-tokens5B``; tokens in the name.
* OLMo-2 / Olmo 3 stages: ``stage2-ingredient1-step11931-tokens50B`` (stage 2, the annealing /
  mid-training mix; its steps and tokens restart), ``stage1-step1000`` (Olmo 3, no tokens).
* ``main``: the final model; no step.
* Hugging Face Trainer output folders: ``checkpoint-500`` (step 500; Stanford CRFM GPT-2).
* BLOOM ``global_step1000``; SmolLM2 ``step-240000``; SmolLM3 ``stage1-step-40000`` …
  ``stage3-step-4720000`` (global steps), then ``lc-4k-to-32k-step-4000`` (long context, steps
  restart) and ``it-SFT`` (post-training, no step).
* TinyLlama ``step-480k-token-1007B`` (branches) and repositories named after the checkpoint,
  ``TinyLlama/TinyLlama-1.1B-intermediate-step-480k-1T`` (step 480,000, 1T tokens).
* LLM360 Amber ``ckpt_000`` … ``ckpt_358``: a checkpoint index (read as the step; Amber publishes
  no step or token count per checkpoint).

Stages (:func:`stage_of`) order before steps and tokens (:func:`training_order_key`,
:func:`sort_revisions`): every stage-2 name follows every stage-1 name, whatever its counts.

A model's config entry says how to get tokens (see :func:`tokens_for`)::

    tokens_per_step: 2097152           # tokens = step × tokens_per_step
    tokens_schedule:                   # or a batch that changes: tokens a step, phase by phase
      - {until: 400, tokens_per_step: 512}    # steps [0, 400): 512 tokens each
      - {tokens_per_step: 2048}               # from step 400 on
    tokens_from_name: true             # "…-tokens264B" → 264e9
    tokens: {main: 300000000000}       # explicit map, wins over everything
"""
from __future__ import annotations

import json
import math
import numbers
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterable

__all__ = [
    "parse_step", "parse_tokens", "parse_count", "stage_of", "stage_label", "training_positions",
    "choose_log_spaced", "tokens_for", "schedule_tokens", "log_spaced", "sort_revisions",
    "list_hub_revisions", "list_checkpoints", "config_block", "KNOWN_TOKENS_PER_STEP", "TOKEN_KEYS",
]

# ``step<N>`` / ``step-<N>`` / ``step-<N>k`` anywhere between separators, HF Trainer's
# ``checkpoint-<N>`` folders, Amber's ``ckpt_<N>``.
_STEP_RE = re.compile(r"(?:^|[-_/])(?:step[-_]?|checkpoint[-_]?|ckpt[-_]?)(\d+)(k?)(?=$|[-_/])", re.IGNORECASE)
_TOKENS_RE = re.compile(r"(?:^|[-_/])tokens?[-_]?(\d+(?:\.\d+)?)([KMBT]?)(?=$|[-_/])", re.IGNORECASE)
# TinyLlama's checkpoint repositories: ``…-step-480k-1T``, ``…-step-50K-105b`` (tokens right after the step).
_STEP_THEN_TOKENS_RE = re.compile(r"(?:^|[-_/])step[-_]?\d+k?[-_](\d+(?:\.\d+)?)([BT])(?=$|[-_/])", re.IGNORECASE)
_STAGE_RE = re.compile(r"(?:^|[-_/])stage[-_]?(\d+)(?=$|[-_/])", re.IGNORECASE)
_LONG_CONTEXT_RE = re.compile(r"(?:^|/)lc[-_](?:(\d+)k[-_]to[-_])?(\d+)k(?=$|[-_/])", re.IGNORECASE)
_POST_TRAINING_RE = re.compile(r"(?:^|/)it[-_]", re.IGNORECASE)
_ANNEAL_RE = re.compile(r"(?:^|[-_/])(?:anneal(?:ing|ed)?|ingredient\d+)(?=$|[-_/])", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}

# Tokens per optimizer step for well-known suites whose revision names carry no token count.
# Pythia (all sizes, deduped or not): batch 1024 sequences × 2048 tokens.
KNOWN_TOKENS_PER_STEP = {"EleutherAI/pythia-": 1024 * 2048}


def parse_step(revision: str) -> int | None:
    """Training step in a revision name: ``"step126000-tokens264B"`` → 126000, ``"step-480k-token-1007B"``
    → 480000, ``"global_step1000"`` → 1000, ``"ckpt_042"`` → 42 (Amber's index), ``"main"`` → None."""
    m = _STEP_RE.search(revision)
    if not m:
        return None
    return int(m.group(1)) * (1000 if m.group(2) else 1)


def stage_of(revision: str) -> tuple[int, int]:
    """Where a revision's stage sits in training, a sort key: ``(0, 0)`` for pretraining (no stage,
    ``stage1-…``), ``(k - 1, 0)`` for ``stage<k>-…`` (OLMo-2/Olmo 3 stage 2 = annealing,
    SmolLM3 stages 2 and 3), ``(10, context_k)`` for long-context extension ``lc-4k-to-32k-…``,
    ``(20, 0)`` for post-training ``it-…`` (SmolLM3); a name marking annealing without a stage
    number (``…-anneal-…``, ``ingredient<K>``) is stage 2."""
    name = revision or ""
    if _POST_TRAINING_RE.search(name):
        return (20, 0)
    m = _LONG_CONTEXT_RE.search(name)
    if m:
        return (10, int(m.group(2)))
    m = _STAGE_RE.search(name)
    if m:
        return (max(int(m.group(1)) - 1, 0), 0)
    if _ANNEAL_RE.search(name):
        return (1, 0)
    return (0, 0)


def stage_label(revision: str) -> str | None:
    """A short mark for a revision after pretraining, for comments and tables: ``"stage 2
    (annealing)"`` for OLMo-2/Olmo 3 ``stage2-…`` or ``…ingredient<K>…``, ``"stage 3"``,
    ``"long context 32k"``, ``"post-training"``; None for pretraining (stage 1 or no stage)."""
    major, minor = stage_of(revision)
    if major == 0:
        return None
    if major == 20:
        return "post-training"
    if major == 10:
        return f"long context {minor}k"
    anneal = major == 1 and _ANNEAL_RE.search(revision) is not None
    return f"stage {major + 1}" + (" (annealing)" if anneal else "")


def toy_revision(step: int) -> str:
    """The name of a toy checkpoint: ``step{N}`` (the inverse of :func:`toy_step`)."""
    return f"step{int(step)}"


def toy_step(revision) -> int:
    """The step of a toy revision: an int, or a name ``step<N>`` exactly (a toy checkpoint folder is
    ``step{N}``, so no other spelling can name one). Raises ``ValueError`` naming the revision."""
    if isinstance(revision, bool):
        raise ValueError(f"toy revision {revision!r} must be named step<N>")
    if isinstance(revision, numbers.Integral):
        return int(revision)
    m = re.fullmatch(r"step(\d+)", str(revision))
    if m is None:
        raise ValueError(f"toy revision '{revision}' must be named step<N>")
    return int(m.group(1))


def parse_name_list(text: str) -> list[str]:
    """Revision names from a list file's text: one name per line, blank lines skipped, ``#``
    starting a comment (as ``headtrace revisions HF_ID --list`` prints the file)."""
    lines = (ln.split("#", 1)[0].strip() for ln in text.splitlines())
    return [ln for ln in lines if ln]


def training_order_key(revision: str, tokens: int | None = None) -> tuple:
    """Sort key of a revision in training order: stage (:func:`stage_of`; stage 2 after stage 1,
    whose counts restart), then tokens, then step number, then name; a missing tokens count or
    step sorts last within its stage (the order of ``trajectories.revision_order``)."""
    step = parse_step(revision or "")
    return (stage_of(revision or ""), math.inf if tokens is None else tokens, math.inf if step is None else step,
            revision or "")


def parse_count(text: str | int | float) -> int:
    """An integer count with an optional K/M/B/T suffix: ``"264B"``, ``"1.5T"``, ``"2097152"``, 2e6.

    Decimals are exact (``"0.5B"`` → 500_000_000); a result that is not a whole number is an error.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a count: {text!r}")
    if isinstance(text, int):
        return text
    if isinstance(text, float):
        if not text.is_integer():
            raise ValueError(f"not a whole count: {text!r}")
        return int(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:[eE]\d+)?)\s*([KMBTGkmbtg]?)\s*", str(text).replace("_", ""))
    if not m:
        raise ValueError(f"not a count: {text!r} (expected e.g. 2097152, 264B, 1.5T)")
    try:
        value = Decimal(m.group(1)) * _SUFFIX[m.group(2).upper()]
    except InvalidOperation:  # pragma: no cover - regex guards this
        raise ValueError(f"not a count: {text!r}") from None
    if value != value.to_integral_value():
        raise ValueError(f"not a whole count: {text!r}")
    return int(value)


def parse_tokens(revision: str) -> int | None:
    """Training tokens in a revision name: ``"step126000-tokens264B"`` → 264_000_000_000.

    Suffixes K/M/B/T (case-insensitive), integers or decimals (``tokens1.5T``), TinyLlama's
    ``token-1007B`` and ``…-step-480k-1T``; None if absent. In a stage-2 name the count is the
    stage's own (``stage2-ingredient1-step11931-tokens50B``: 50B tokens into stage 2).
    """
    m = _TOKENS_RE.search(revision) or _STEP_THEN_TOKENS_RE.search(revision)
    if not m:
        return None
    return parse_count(m.group(1) + m.group(2))


TOKEN_KEYS = ("tokens", "tokens_from_name", "tokens_per_step", "tokens_schedule")


def schedule_tokens(step: int, schedule: list[dict]) -> int:
    """Tokens seen after ``step`` optimizer steps of a schedule whose tokens a step change.

    ``schedule``: phases in step order, ``{until: N, tokens_per_step: T}`` (steps ``[previous
    until, N)`` train on ``T`` tokens each); the last phase may omit ``until`` (it runs on). Step N
    has seen the tokens of steps ``0 … N-1``. Raises ``ValueError`` naming the phase when the
    ``until`` steps do not increase, a phase before the last has no ``until``, or ``step`` lies
    beyond a closed schedule's last ``until``."""
    phases, prev = [], 0
    for k, ph in enumerate(schedule):  # the whole schedule is checked, whatever the step
        if not isinstance(ph, dict) or "tokens_per_step" not in ph or set(ph) - {"until", "tokens_per_step"}:
            raise ValueError(f"tokens_schedule[{k}]: needs tokens_per_step (and until, except the last phase); "
                             f"got {ph!r}")
        until = ph.get("until")
        if until is None and k != len(schedule) - 1:
            raise ValueError(f"tokens_schedule[{k}]: only the last phase may omit 'until'")
        if until is not None and int(until) <= prev:
            raise ValueError(f"tokens_schedule[{k}].until = {until} must be larger than {prev}")
        prev = None if until is None else int(until)
        phases.append((prev, parse_count(ph["tokens_per_step"])))
    if prev is not None and step > prev:
        raise ValueError(f"step {step} lies beyond the tokens_schedule, which ends at step {prev}")
    total, start = 0, 0
    for until, per_step in phases:
        end = step if until is None else min(step, until)
        if end <= start:
            break
        total, start = total + (end - start) * per_step, end
    return total


def tokens_for(revision: str, spec: dict) -> int | None:
    """Training tokens seen at ``revision`` of a model whose config entry is ``spec``.

    Precedence: (1) the explicit map ``spec["tokens"][revision]``; (2) the count parsed from the
    name (``…-tokens264B``) unless ``tokens_from_name: false``; (3) ``tokens_per_step × step``, or
    the sum over the ``tokens_schedule`` phases (:func:`schedule_tokens`; one of the two, not both).
    Returns None when ``spec`` has none of the keys ``tokens``, ``tokens_from_name``,
    ``tokens_per_step``, ``tokens_schedule`` (tokens unknown; a workflow may then fall back to steps). Raises
    ``ValueError`` naming the revision when the spec asks for tokens but none of the rules applies
    (e.g. ``main`` with only ``tokens_per_step``, or ``tokens_from_name: true`` and no count in the name).
    """
    if not any(k in spec and spec[k] is not None for k in TOKEN_KEYS):
        return None
    explicit = spec.get("tokens") or {}
    if not isinstance(explicit, dict):
        raise ValueError(f"'tokens' must be a map revision -> count, got {type(explicit).__name__}")
    if revision in explicit:
        return parse_count(explicit[revision])
    from_name = spec.get("tokens_from_name")
    if from_name is None or from_name:
        parsed = parse_tokens(revision)
        if parsed is not None:
            return parsed
    per_step, schedule = spec.get("tokens_per_step"), spec.get("tokens_schedule")
    if per_step is not None and schedule is not None:
        raise ValueError("set tokens_per_step or tokens_schedule, not both")
    step = parse_step(revision)
    if per_step is not None and step is not None:
        return step * parse_count(per_step)
    if schedule is not None and step is not None:
        return schedule_tokens(step, schedule)
    tried = []
    if explicit:
        tried.append("not in the 'tokens' map")
    if from_name is None or from_name:
        tried.append("no '-tokens<N>[KMBT]' in the name")
    if per_step is not None or schedule is not None:
        tried.append(f"no 'step<N>' in the name for {'tokens_per_step' if per_step is not None else 'tokens_schedule'}")
    raise ValueError(
        f"cannot determine training tokens for revision '{revision}': {'; '.join(tried)}. "
        f"Add it to the model's 'tokens:' map: tokens: {{{revision}: N}}, N the training tokens it has seen"
        + (" (tokens_per_step and tokens_schedule apply only to names with a step; both keys can stay)"
           if per_step is not None or schedule is not None else "")
    )


def sort_revisions(revisions: Iterable[str]) -> list[str]:
    """Revisions with a step in training order: stage (:func:`stage_of`), then step (ties by
    tokens, then name); others (``main``, ``it-SFT``) last."""
    def key(r: str):
        s = parse_step(r)
        t = parse_tokens(r)
        return (s is None, stage_of(r), s if s is not None else 0, t if t is not None else -1, r)
    return sorted(dict.fromkeys(revisions), key=key)


def log_spaced(items: list[tuple[str, int | None]], n: int, unit: float = 1) -> list[str]:
    """Pick ``n`` approximately log-spaced revisions from ``(revision, step_or_tokens)`` pairs.

    * Pairs whose value is None or negative (non-parsable, e.g. ``main``) are skipped; duplicate
      revisions and duplicate values are dropped (first occurrence wins).
    * Spacing is geometric in ``log(1 + value / unit)``, so a step-0 checkpoint can be the first one
      (``unit``: the smallest step that matters, e.g. 1e9 for token counts named in billions, so that
      no target falls among the counts below it where no checkpoint can be).
    * The first (smallest) and last (largest) values are always included; the other ``n - 2``
      targets ``exp(linspace(log1p(first), log1p(last), n)) - 1`` each take the nearest unused
      revision (nearest in log1p). Dense regions are therefore thinned, sparse regions kept.
    * If ``n`` ≥ the number of usable revisions, all of them are returned.

    Returns the chosen revision names ordered by value.
    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    seen_rev: set[str] = set()
    seen_val: set[int] = set()
    pts: list[tuple[int, str]] = []
    for rev, val in items:
        if val is None or rev in seen_rev:
            continue
        val = int(val)
        if val < 0 or val in seen_val:
            continue
        seen_rev.add(rev)
        seen_val.add(val)
        pts.append((val, rev))
    pts.sort()
    if not pts:
        return []
    if n >= len(pts):
        return [r for _, r in pts]
    if n == 1:
        return [pts[-1][1]]
    logs = [math.log1p(v / unit) for v, _ in pts]
    lo, hi = logs[0], logs[-1]
    chosen = {0, len(pts) - 1}
    for k in range(1, n - 1):
        target = lo + (hi - lo) * k / (n - 1)
        free = [i for i in range(len(pts)) if i not in chosen]
        chosen.add(min(free, key=lambda i: (abs(logs[i] - target), i)))
    return [pts[i][1] for i in sorted(chosen)]


def training_positions(items: Iterable[tuple[str, int | None]]) -> dict[str, int]:
    """Each revision's position along the whole of training from ``(revision, step_or_tokens)``
    pairs: within a stage its value; a later stage (:func:`stage_of`) whose counts restart
    (its smallest value not above the previous stage's largest) is shifted past that largest
    value, so stage 2 lies after stage 1 on one axis (for :func:`log_spaced`). Pairs whose value
    is None are left out."""
    by_stage: dict[tuple, list[tuple[str, int]]] = {}
    for rev, val in items:
        if val is not None:
            by_stage.setdefault(stage_of(rev), []).append((rev, int(val)))
    out: dict[str, int] = {}
    end = None  # the largest position so far
    for stage in sorted(by_stage):
        pairs = by_stage[stage]
        lo = min(v for _, v in pairs)
        shift = 0 if end is None or lo > end else end - lo + 1
        for rev, val in pairs:
            out.setdefault(rev, val + shift)
        end = max(out[r] for r, _ in pairs)
    return out


def choose_log_spaced(names: Iterable[str], n: int, *, by: str = "auto",
                      tokens_per_step: int | None = None) -> list[str]:
    """``n`` log-spaced revisions of a branch list (``headtrace revisions --log-spaced``), in
    training order, the earliest and the latest always included.

    ``by``: ``"tokens"`` (the count in the name, else step × ``tokens_per_step``), ``"step"``, or
    ``"auto"`` (tokens when every name with a step carries a count). Later stages lie after
    earlier ones (:func:`training_positions`); names without a step (``main``) are never chosen."""
    names = sort_revisions(names)
    if by == "auto":
        stepped = [r for r in names if parse_step(r) is not None]
        by = "tokens" if stepped and all(parse_tokens(r) is not None for r in stepped) else "step"
    if by not in ("tokens", "step"):
        raise ValueError(f"by must be 'auto', 'tokens' or 'step', got {by!r}")

    def value(r: str) -> int | None:
        s = parse_step(r)
        if s is None:
            return None
        if by == "step":
            return s
        t = parse_tokens(r)
        return s * tokens_per_step if t is None and tokens_per_step else t

    pos = training_positions((r, value(r)) for r in names)
    unit = min((v for v in pos.values() if v > 0), default=1)  # the first checkpoint after 0 is one unit
    chosen = log_spaced([(r, pos.get(r)) for r in names], n, unit=unit)
    return sorted(chosen, key=lambda r: pos[r])


def list_hub_revisions(hf_id: str, token: str | bool | None = None) -> list[str]:
    """Branch names of a Hub model repo (network), sorted with :func:`sort_revisions`."""
    from huggingface_hub import list_repo_refs  # network client: only `headtrace revisions` without --from-file

    refs = list_repo_refs(hf_id, token=token)
    return sort_revisions(b.name for b in refs.branches)


def list_checkpoints(path, pattern: str = "*") -> list[str]:
    """Checkpoint folders under ``path`` whose names match the glob ``pattern`` (``checkpoint-*``,
    ``step*``) and have a step in the name, ordered by step (:func:`sort_revisions`).

    A folder counts once it holds a ``config.json`` that parses and a ``*.safetensors`` file, so a
    checkpoint still being written (without its weights yet, or its configuration cut short) is not
    picked up; names a revision cannot have (outside ``[A-Za-z0-9._-]``) are skipped."""

    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"checkpoint folder '{root}' does not exist")
    found = []
    for d in root.glob(pattern):
        if (d.is_dir() and re.fullmatch(r"[A-Za-z0-9._-]+", d.name) and parse_step(d.name) is not None
                and config_json_problem(d) is None and any(d.glob("*.safetensors"))):
            found.append(d.name)
    return sort_revisions(found)


def config_json_problem(folder) -> str | None:
    """What is wrong with a checkpoint folder's ``config.json`` (not there, unreadable, not valid JSON,
    with "cut short?" when it stops before its closing brace, not an object), in a few words; None
    when it parses to an object."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return f"no config.json in {folder}"
    try:
        parsed = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        cut = "" if err.doc.rstrip().endswith("}") else " (cut short?)"  # a copy or a save that stopped
        return f"{path} is not valid JSON at line {err.lineno}, column {err.colno}{cut}"
    except (OSError, UnicodeDecodeError) as err:
        return f"{path} cannot be read ({err})"
    return None if isinstance(parsed, dict) else f"{path} is not a JSON object"


_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
_YAML_SPECIAL = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}


def _scalar(s: str) -> str:
    """A YAML scalar for a string: plain when unambiguous, double-quoted otherwise."""
    if _PLAIN.match(s) and s.lower() not in _YAML_SPECIAL and not re.fullmatch(r"[\d._eE+-]+", s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_block(
    hf_id: str,
    model_name: str | None,
    revisions: list[str],
    *,
    family: str = "auto",
    tokens_per_step: int | str | None = None,
    tokens_from_name: bool | None = None,
    tokens: dict[str, int] | None = None,
    notes: dict[str, str] | None = None,
) -> str:
    """A YAML block for the ``models:`` section of a headtrace config (indented under ``models:``).

    Tokens: ``tokens_from_name: true`` when every revision that has a step carries a token count
    in its name (OLMo style) or when asked; else ``tokens_per_step`` when given or known for the
    suite (:data:`KNOWN_TOKENS_PER_STEP`, e.g. Pythia); an explicit ``tokens`` map is written as
    given. Otherwise a comment says what to fill in. ``notes``: revision -> a comment written after
    it (``headtrace revisions`` marks the branches the audit flags, :mod:`headtrace.models.audit`).
    """
    name = model_name or hf_id.rsplit("/", 1)[-1].lower().replace(".", "_")
    revisions = list(dict.fromkeys(revisions))
    if tokens_from_name is None:
        stepped = [r for r in revisions if parse_step(r) is not None]
        tokens_from_name = bool(stepped) and all(parse_tokens(r) is not None for r in stepped)
    if tokens_per_step is None and not tokens_from_name and not tokens:
        for prefix, tps in KNOWN_TOKENS_PER_STEP.items():
            if hf_id.startswith(prefix):
                tokens_per_step = tps
    lines = [
        "models:",
        f"  {_scalar(name)}:",
        "    source: hub",
        f"    hf_id: {_scalar(hf_id)}",
        f"    family: {_scalar(family)}",
        "    revisions:",
    ]
    notes = notes or {}

    def comment(r: str) -> str:
        parts = [p for p in (stage_label(r), notes.get(r)) if p]
        return f"  # {'; '.join(parts)}" if parts else ""

    lines += [f"      - {_scalar(r)}" + comment(r) for r in revisions]
    if tokens_from_name:
        lines.append("    tokens_from_name: true")
    if tokens_per_step is not None:
        lines.append(f"    tokens_per_step: {parse_count(tokens_per_step)}")
    if tokens:
        lines.append("    tokens:")
        lines += [f"      {_scalar(r)}: {parse_count(v)}" for r, v in tokens.items()]
    if not (tokens_from_name or tokens_per_step is not None or tokens):
        lines.append("    # tokens unknown: set tokens_per_step (tokens = step × it) or a tokens: map")
    return "\n".join(lines) + "\n"
