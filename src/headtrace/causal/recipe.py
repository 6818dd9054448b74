"""The causal step of one cell, as the workflow's jobs and the notebook API both run it.

:func:`ablate_cell` builds the cell's conditions (:mod:`headtrace.causal.conditions`), chooses the probe
sequences they run on (:func:`ablation_probe`), runs the engine (:mod:`headtrace.causal.ablation`) by
each ablation method, and writes the ablation and verdict tables (:mod:`headtrace.causal.verdict`). The
workflow's ``ablate`` job, ``cross_seed_ablation`` job (the sequences only), :func:`headtrace.analyze` and
``headtrace cell`` call these, with the config's ``ablation`` and ``screen`` blocks (the schema's defaults
for what they omit), so the workflow and a notebook cannot drift apart.
"""
from __future__ import annotations

from typing import Mapping

import polars as pl

from headtrace.causal import ablation as engine
from headtrace.causal import verdict as verdict_rules
from headtrace.core import schema, tables
from headtrace.probe import spec as probe_spec
from headtrace.probe import synthetic

DEFAULTS = {block: schema.defaults(block) for block in ("screen", "ablation")}
RECORD_COLUMNS = engine.PROBE_RECORD  # ablation_probe, _seed, _sha256, _redrawn


def ablate_cell(model, family, batch: synthetic.ProbeBatch, cell_screen: pl.DataFrame, final_circuit, *, n_random: int,
                batch_size: int, device, name: str, revision: str, tokens: int | None,
                ablation: Mapping | None = None, screen_opts: Mapping | None = None, progress: bool = True,
                probe_settings: Mapping | None = None):
    """Step 3 of one cell: ``(ablation table, verdict table)`` of ``cell_screen``'s circuits (and
    ``final_circuit``) against their controls. The workflow's ``ablate`` job and ``analyze`` both
    call this, with the ablation / screen config blocks (``DEFAULTS`` for what they omit).

    ``batch`` is the probe the screen read; the sequences ablated are :func:`ablation_probe`'s
    (``ablation.probe``: a held-out draw from ``probe_settings``, the probe's config keys, or
    ``batch`` itself), recorded in both tables' ``ablation_probe*`` columns."""

    a = {**DEFAULTS["ablation"], **dict(ablation or {})}
    sc = {**DEFAULTS["screen"], **dict(screen_opts or {})}
    conditions = engine.build_conditions(
        cell_screen, final_circuit=final_circuit, n_random=n_random, seed=a["seed"],
        final_controls=a["final_controls"], exact_max=a["exact_max"], class_matched=a["class_matched"],
        class_threshold=sc["class_threshold"], induction_threshold=sc["induction_threshold"],
        previous_token_threshold=sc["previous_token_threshold"], previous_token=a["previous_token"])
    ablated, record = ablation_probe(batch, probe_settings, a)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and int(ablated.tokens.max()) >= int(vocab):  # a held-out token the screen's never reached
        raise ValueError(f"the ablation's probe tokens reach {int(ablated.tokens.max())} but the model's vocabulary "
                         f"has {vocab} tokens: probe.token_range must end at most at {vocab}")
    methods = [a["method"]] + [m for m in [a["second_method"]] if m and m != a["method"]]
    results = engine.run(model, family, ablated, conditions, batch_size=batch_size, device=device, progress=progress,
                         methods=methods)
    table = engine.ablation_table(results, name, revision, tokens, n_boot=a["n_bootstrap"], seed=a["seed"],
                                  level=a["ci_level"], probe_record=record)
    verdict = engine.verdict(table, **verdict_rules.settings(a))
    return table, tables.conform(verdict.with_columns(_record_columns(record, verdict.height)), "verdict")


def ablation_probe(screen_batch: synthetic.ProbeBatch, probe_settings: Mapping | None,
                   ablation: Mapping | None = None) -> tuple[synthetic.ProbeBatch, dict]:
    """``(batch, record)``: the probe sequences the ablation runs on, and what the ablation and
    verdict tables record of them (``RECORD_COLUMNS``). The workflow's ``ablate`` and
    ``cross_seed_ablation`` jobs, :func:`analyze` and ``headtrace cell`` all choose them here.

    ``ablation.probe: held_out`` (the default): ``ablation.n_sequences`` (null: ``probe.n_sequences``)
    sequences drawn with the probe's settings ``probe_settings`` (the config's probe keys, schema
    defaults for those omitted) and the seed ``ablation.probe_seed`` (null: ``probe.seed + 1``),
    none of them a sequence of ``screen_batch`` (:func:`headtrace.probe.synthetic.held_out_batch`).
    ``same``: the first ``ablation.n_sequences`` sequences of ``screen_batch``, the batch the screen
    chose the circuits on (the paper's protocol)."""
    a = {**DEFAULTS["ablation"], **dict(ablation or {})}
    settings = None if probe_settings is None else {**probe_spec.SYNTHETIC, **dict(probe_settings)}
    n = a["n_sequences"]
    if a["probe"] == "same":
        batch, seed, redrawn = screen_batch.head(n), None if settings is None else int(settings["seed"]), None
    elif a["probe"] == "held_out":
        if settings is None:
            raise ValueError("ablation.probe is held_out, but the probe was given as a ProbeBatch, which does not "
                             "carry the settings to draw the held-out sequences from: pass the probe's keys "
                             "(probe={'n_sequences': ..., 'token_range': [...], ...}) or ablate on the screen's own "
                             "batch with settings={'ablation': {'probe': 'same'}}")
        kwargs = probe_spec.batch_arguments(settings)
        seed = synthetic.held_out_seed(kwargs["seed"], a["probe_seed"])
        if seed == kwargs["seed"]:
            raise ValueError(f"ablation.probe_seed {seed} is probe.seed: a held-out draw needs another seed "
                             "(null: probe.seed + 1), or set ablation.probe: same")
        size = n if n is not None else kwargs["n_sequences"]
        kwargs.pop("seed")
        kwargs.pop("n_sequences")
        batch, redrawn = synthetic.held_out_batch(screen_batch, size, seed=seed, **kwargs)
    else:
        raise ValueError(f"ablation.probe must be held_out or same, got {a['probe']!r}")
    return batch, {"ablation_probe": a["probe"], "ablation_probe_seed": seed,
                   "ablation_probe_sha256": synthetic.tokens_sha256(batch.tokens), "ablation_probe_redrawn": redrawn}


def _record_columns(record: Mapping, height: int) -> list[pl.Series]:
    return [pl.Series(c, [record.get(c)] * height, dtype=tables.SCHEMAS["verdict"][c]) for c in RECORD_COLUMNS]
