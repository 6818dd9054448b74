"""A ready ``models:`` block for checkpoints of one's own run on disk (``headtrace revisions FOLDER``):
``source: local``, the path template, the revisions in training order (log-spaced picks with
``--log-spaced N``) and the token axis, as ``config/examples/local.yaml`` writes them. No network."""
from __future__ import annotations

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
    if tokens_per_step is not None:
        lines.append(f"    tokens_per_step: {rv.parse_count(tokens_per_step)}  # tokens = step x this")
    elif any(rv.parse_step(r) is not None for r in revisions):
        lines.append("    # tokens unknown: set tokens_per_step (tokens = step x it; --tokens-per-step N writes it)")
    if stepless:
        lines.append("    tokens: {" + ", ".join(f"{rv._scalar(r)}: N" for r in stepless)
                     + "}  # a revision without a step: set the tokens it has seen")
    lines += [f"    # {n}" for n in notes]
    if derive_probe:  # a model smaller than the paper's probe (256 tokens, ids 100-9999)
        lines += ["probe:", "  derive: true  # smaller than the paper's probe: seq_len, ab_range, token_range "
                  "from each checkpoint's config.json"]
    return "\n".join(lines) + "\n"
