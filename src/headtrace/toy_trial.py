"""A toy-recipe trial: train a toy model and screen every checkpoint as it is saved.

The search for a toy recipe (README, "The toy panel") asks the same questions at every checkpoint:
does the probe's top-1 on B move, which heads pass the induction threshold, how many heads attend
to the first token, in which layers. ``run`` trains a recipe (a config ``train:`` block, merged
into ``headtrace.toy.DEFAULTS`` as the ``train_toy`` rule merges it) and answers them live, one
row per checkpoint, through the same capture and screen the workflow's cells use, so a trial's
numbers are the numbers a panel built from its checkpoints would report. No ablation: a trial is
for finding where a transition happens; ``headtrace cell`` then judges a checkpoint causally.

Each row (schema ``toy_trial`` in :mod:`headtrace.tables`):

- ``top1``: fraction of the first ``n_top1`` probe sequences whose arg-max next token at the
  query is B (the unablated baseline of the ablation, which uses the same first sequences);
- ``induction_heads``: the screen's induction circuit (``sel_induction`` >= ``induction_threshold``);
  ``positional_heads``: those of them that :mod:`headtrace.positional` flags as fixed-offset heads;
- ``first_token_by_layer``: per layer, heads with ``sel_first_token`` >= ``class_threshold``
  (Finding 1's count), ``bos_fraction`` their share of all heads (Finding 2's).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import polars as pl
import torch

from headtrace import api, positional, tables, toy
from headtrace import probe as probe_mod
from headtrace import screen as screen_mod
from headtrace.heads import head_name


def probe_batch(bos: bool = False, **overrides) -> probe_mod.ProbeBatch:
    """The toy probe (``headtrace.toy.PROBE``, seed 42 as in the embedded config), optionally with
    the toy BOS prepended (``probe.prepend_bos``) and other ``make_batch`` arguments overridden."""
    kwargs = {**toy.PROBE, "seed": 42, **overrides}
    return probe_mod.make_batch(**kwargs, prepend_bos=bos, bos_token_id=toy.BOS_TOKEN_ID if bos else None)


def checkpoint_row(model: torch.nn.Module, batch: probe_mod.ProbeBatch, step: int, *, n_top1: int = 128,
                   settings: Mapping | None = None) -> dict:
    """One trial row for ``model`` at ``step`` (model in eval mode; nothing written)."""
    cell = api.analyze(model, probe=batch, ablate=False, progress=False, settings=settings)
    sc = {**api.DEFAULTS["screen"], **dict((settings or {}).get("screen") or {})}
    head = batch.head(n_top1)
    with torch.no_grad():
        dev = next(model.parameters()).device
        logits = model(input_ids=torch.from_numpy(head.tokens).to(dev)).logits[:, -1]  # (n, vocab)
    top1 = float((logits.argmax(-1).cpu().numpy() == head.target).mean())
    return summarize(cell.screen, cell.positional, step=step, top1=top1, class_threshold=sc["class_threshold"])


def summarize(screen: pl.DataFrame, positional_table: pl.DataFrame, *, step: int, top1: float,
              class_threshold: float = 30.0) -> dict:
    """The trial row of one checkpoint from its screen and positional tables (their schemas) and
    the probe's top-1: the screen's induction circuit (``in_induction_circuit``), the heads of it
    that :func:`headtrace.positional.circuit_flags` flags, and the first-token heads
    (``sel_first_token`` >= ``class_threshold``, Finding 1's count) per layer. A NaN selectivity
    counts as below every threshold."""
    s = screen.sort("layer", "head").with_columns(pl.col("sel_induction", "sel_first_token").fill_nan(None))
    n_layers = int(s["layer"].max()) + 1
    names = [head_name(l, h) for l, h in screen_mod.circuit_heads(s)]
    flags = positional.circuit_flags(positional_table, s).filter(pl.col("positional_induction"))
    flagged = {head_name(int(l), int(h)) for l, h in zip(flags["layer"], flags["head"])}
    first = s["sel_first_token"].fill_null(0.0).to_numpy() >= class_threshold
    by_layer = np.bincount(s["layer"].to_numpy()[first], minlength=n_layers).astype(np.int64)
    return {
        "step": int(step),
        "top1": float(top1),
        "max_induction": float(s["sel_induction"].max() or 0.0),
        "n_induction": len(names),
        "induction_heads": names,
        "positional_heads": [n for n in names if n in flagged],
        "max_first_token": float(s["sel_first_token"].max() or 0.0),
        "n_first_token": int(first.sum()),
        "first_token_by_layer": by_layer.tolist(),
        "bos_fraction": float(first.mean()),
    }


def format_row(row: Mapping) -> str:
    """One console line per checkpoint."""
    heads = " ".join(row["induction_heads"]) or "-"
    pos = f" (positional: {' '.join(row['positional_heads'])})" if row["positional_heads"] else ""
    return (f"step {row['step']:>6d}  top1 {row['top1']:6.1%}  induction max {row['max_induction']:8.1f}x "
            f"[{row['n_induction']}] {heads}{pos}  first-token by layer {row['first_token_by_layer']} "
            f"({row['bos_fraction']:.1%}, max {row['max_first_token']:.0f}x)")


def run(family: str, train: Mapping | None, out_dir, *, max_steps: int, every: int, init_from: str | None = None,
        probe: probe_mod.ProbeBatch | None = None, n_top1: int = 128, settings: Mapping | None = None,
        echo: Callable[[str], None] | None = None) -> pl.DataFrame:
    """Train ``family`` with the recipe ``train`` (a config ``train:`` block; ``max_steps`` here)
    and screen the checkpoints at steps 0, ``every``, 2 x ``every``, ..., ``max_steps``, saved
    under ``out_dir/step{N}/``. ``init_from``: continue from a checkpoint folder (steps count from
    it; its optimizer state is not kept). Returns the rows (schema ``toy_trial``); ``echo`` gets
    each row's line as it is measured."""
    if every < 1 or max_steps < 1:
        raise ValueError(f"toy trial: every ({every}) and max_steps ({max_steps}) must be >= 1")
    r = toy.recipe(family, dict(train or {}))
    if r["max_steps"] not in (None, max_steps):
        raise ValueError(f"toy trial: train.max_steps {r['max_steps']} differs from max_steps {max_steps}")
    batch = probe if probe is not None else probe_batch()
    rows: list[dict] = []

    def screen_checkpoint(model, step, _path):
        rows.append(checkpoint_row(model, batch, step, n_top1=n_top1, settings=settings))
        if echo is not None:
            echo(format_row(rows[-1]))

    steps = sorted(set(range(0, max_steps + 1, every)) | {max_steps})
    toy.train(family, Path(out_dir), arch=r["arch"], data=r["data"], optim=r["optim"], max_steps=max_steps,
              checkpoint_steps=steps, seed=r["seed"], curriculum=r["curriculum"], init_from=init_from,
              progress=False, on_checkpoint=screen_checkpoint)
    return pl.DataFrame(rows, schema=tables.SCHEMAS["toy_trial"])
