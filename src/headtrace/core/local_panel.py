"""A ready ``models:`` block for checkpoints of one's own run on disk (``headtrace revisions FOLDER``):
``source: local``, the path template, the revisions in training order (log-spaced picks with
``--log-spaced N``) and the token axis, as ``config/examples/local.yaml`` writes them. No network."""
from __future__ import annotations

import json
import re
from pathlib import Path

from headtrace.core import revisions as rv


def is_checkpoint(folder: str | Path) -> bool:
    """A folder holding one checkpoint (its ``config.json``)."""
    return (Path(folder) / "config.json").is_file()


def root_of(folder: str | Path) -> tuple[Path, str | None]:
    """``(folder of the run, the one revision named)``: a checkpoint folder given itself stands for
    its revision of the run around it (``run/step1500`` -> ``(run, "step1500")``); a run folder, for
    all of its checkpoints (``(run, None)``)."""
    p = Path(folder).resolve()
    return (p.parent, p.name) if is_checkpoint(p) else (p, None)


def skipped(root: Path, names) -> list[str]:
    """Sub-folders of ``root`` that are not listed as revisions (no step in the name, no config.json
    or no safetensors weights), to say so instead of leaving them out silently."""
    chosen = set(names)
    return sorted(d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name not in chosen)


def config_block(root: str | Path, name: str | None, revisions: list[str], *, family: str = "auto",
                 tokens_per_step: int | None = None, notes: list[str] = (), derive_probe: bool = False) -> str:
    """The YAML block (under ``models:``) of a local run at ``root`` with ``revisions`` (training order);
    with ``derive_probe``, a top-level ``probe: {derive: true}`` after it."""
    root = Path(root)
    model = name or root.name
    lines = ["models:", f"  {rv._scalar(model)}:", "    source: local",
             f"    path: {rv._scalar(str(root / '{revision}'))}  # {{revision}} is replaced by each name below",
             f"    family: {rv._scalar(family)}", "    revisions:"]
    lines += [f"      - {rv._scalar(r)}" for r in revisions]
    stepless = [r for r in revisions if rv.parse_step(r) is None]
    proposal = proposed_tokens_per_step(root, revisions) if tokens_per_step is None else None
    if tokens_per_step is not None:
        lines.append(f"    tokens_per_step: {rv.parse_count(tokens_per_step)}  # tokens = step x this")
    elif proposal is not None:  # a proposal stays commented out: the user checks it and uncomments it
        lines.append(f"    # tokens_per_step: {proposal[0]}  # PROPOSAL, check it and uncomment: {proposal[1]}")
    elif any(rv.parse_step(r) is not None for r in revisions):
        lines.append("    # tokens unknown: set tokens_per_step (tokens = step x it; --tokens-per-step N writes it)")
    if stepless:
        lines.append("    tokens: {" + ", ".join(f"{rv._scalar(r)}: N" for r in stepless)
                     + "}  # a revision without a step: set the tokens it has seen")
    init = no_init_note(revisions)
    lines += [f"    # {n}" for n in list(notes) + ([init] if init else [])]
    if derive_probe:  # a model smaller than the paper's probe (256 tokens, ids 100-9999)
        lines += ["probe:", "  derive: true  # smaller than the paper's probe: seq_len, ab_range, token_range "
                  "from each checkpoint's config.json"]
    return "\n".join(lines) + "\n"


def skip_reason(folder: str | Path) -> str:
    """Why a sub-folder of a run is not a revision, the first reason that holds: a name that cannot be a
    revision, no step in the name, no or a broken ``config.json``, no ``*.safetensors`` (and what is there
    instead, e.g. only optimizer state or pickle weights)."""
    d = Path(folder)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", d.name):
        return "a name a revision cannot have (letters, digits, . _ - only)"
    if rv.parse_step(d.name) is None:
        return "no step in the name (step<N> or checkpoint-<N>; list it with tokens: {NAME: N} yourself)"
    problem = rv.config_json_problem(d)
    if problem:
        return problem
    if not any(d.glob("*.safetensors")):
        if any(d.glob("pytorch_model*.bin")):
            return "pickle weights only (pytorch_model*.bin): list it yourself, it is read through torch's weights-only unpickler"
        there = sorted(p.name for p in d.iterdir())[:4]
        return "no *.safetensors" + (f" (it holds {', '.join(there)})" if there else " (empty)")
    return "left out by the pattern"


# Where a checkpoint's config.json states its context length (GPT-2: n_positions; most others:
# max_position_embeddings), in the order read.
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def proposed_tokens_per_step(root: str | Path, revisions: list[str]) -> tuple[int, str] | None:
    """A **proposal** for ``tokens_per_step`` of a Hugging Face ``Trainer`` run: ``train_batch_size`` of the
    latest listed checkpoint's ``trainer_state.json`` (sequences per optimizer step on one process, before
    gradient accumulation) times the context length of its ``config.json``, with the words that say what it
    assumes; None where either is missing. It is exact only for sequences packed to the full context, one
    process and no gradient accumulation (``training_args.bin``, a pickle, is not read)."""
    root = Path(root)
    for name in reversed(revisions):
        try:
            state = json.loads((root / name / "trainer_state.json").read_text())
            config = json.loads((root / name / "config.json").read_text())
        except (OSError, ValueError):
            continue
        batch = state.get("train_batch_size") if isinstance(state, dict) else None
        key = next((k for k in _CONTEXT_KEYS if isinstance(config, dict) and isinstance(config.get(k), int)), None)
        if isinstance(batch, int) and batch > 0 and key:
            context = config[key]
            return batch * context, (f"proposed from {name}: train_batch_size {batch} (trainer_state.json) x context "
                                     f"{context} ({key}, config.json); multiply by gradient_accumulation_steps and "
                                     "the number of processes if the run used them, and use the real sequence "
                                     "length if its batches were shorter than the context")
    return None


def no_init_note(revisions: list[str]) -> str | None:
    """For a run whose earliest listed checkpoint is not step 0: what the lineage check loses without the
    init, and how a ``Trainer`` run gets one (it saves none itself); None where step 0 is listed."""
    steps = [s for s in (rv.parse_step(r) for r in revisions) if s is not None]
    if not steps or min(steps) == 0:
        return None
    return ("no step 0 listed: the lineage check then compares with the earliest revision and cannot see weights "
            "that are another init from it on (a Hugging Face Trainer saves no step 0: "
            "model.save_pretrained(f'{output_dir}/checkpoint-0') before trainer.train() saves the init; then add "
            "checkpoint-0 to the revisions)")
