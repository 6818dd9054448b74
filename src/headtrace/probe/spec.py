"""The probes a cell reads, under the config's own names: one spec for the three blocks.

* ``probe``: the synthetic induction batch the screen, the participation ratio and the ablation read
  (:mod:`headtrace.probe.synthetic`); :func:`synthetic` resolves its keys, :func:`batch` builds it;
* ``repeated_probe``: Olsson et al.'s repeated random tokens, for prefix matching
  (:mod:`headtrace.probe.repeated`); :func:`repeated` resolves its keys, a null one following the synthetic probe;
* ``text_probe``: documents of natural text (:mod:`headtrace.probe.texts`, tokenised by
  ``headtrace.models.tokenize``); :func:`text` resolves its keys.

Every key keeps the config's name on its way to the probe it builds (``token_range`` is ``token_range``
in the config, in ``headtrace.analyze(probe=...)``, in the probe job's params and in :func:`batch`), and its
default is ``config/schema.yaml``'s. Beside this module: :mod:`headtrace.probe.fit` (a probe against a
model: every misfit, a probe that fits, the derived probe) and :mod:`headtrace.probe.words` (a probe in
words).
"""
from __future__ import annotations

from typing import Mapping

from headtrace.core import schema
from headtrace.probe import synthetic

SYNTHETIC = schema.defaults("$defs", "probe")  # the config's probe keys and their defaults
REPEATED = schema.defaults("repeated_probe")
TEXT = schema.defaults("text_probe")
BATCH_KEYS = ("n_sequences", "seq_len", "token_range", "seed", "ab_range", "prepend_bos", "bos_token_id")
RANGES = ("token_range", "ab_range")


def synthetic_settings(given: Mapping | None = None) -> dict:
    """The ``probe`` keys of ``given`` with the schema's defaults for those omitted. An unknown key is
    refused naming the keys there are, and a range that is not ``[low, high)`` of two integers naming it."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(SYNTHETIC))
    if unknown:
        raise ValueError(f"probe: unknown key(s) {unknown}; the probe keys are those of the config's probe block: "
                         f"{', '.join(SYNTHETIC)} (e.g. probe={{'token_range': [2, 250], 'ab_range': [20, 60]}})")
    settings = {**SYNTHETIC, **given}
    for key in RANGES:
        value = settings[key]
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value)):
            raise ValueError(f"probe: {key} must be [low, high), two integers; got {value!r}")
    return settings


def batch(settings: Mapping) -> synthetic.ProbeBatch:
    """The synthetic induction batch of resolved ``probe`` keys (:func:`batch_arguments`)."""
    return synthetic.make_batch(**batch_arguments(settings))


def batch_arguments(settings: Mapping) -> dict:
    """The keys of ``settings`` that draw the batch (``derive`` and any other key left out), ranges as lists:
    the probe job's params, :func:`headtrace.probe.synthetic.make_batch`'s arguments, the draw a held-out
    batch repeats with another seed."""
    return {key: list(settings[key]) if key in RANGES else settings[key] for key in BATCH_KEYS}


def repeated(block: Mapping | None, token_range, prepend_bos: bool, bos_token_id: int | None) -> dict:
    """Arguments of :func:`headtrace.probe.repeated.repeated_random` from the ``repeated_probe`` keys (the
    schema's defaults for those omitted); a null ``token_range`` or ``prepend_bos`` follows the synthetic
    probe's (``token_range``, ``prepend_bos``)."""
    r = {**REPEATED, **dict(block or {})}
    low, high = r["token_range"] or token_range
    bos = prepend_bos if r["prepend_bos"] is None else r["prepend_bos"]
    return {"n_sequences": r["n_sequences"], "length": r["length"], "repeats": r["repeats"],
            "token_range": [int(low), int(high)], "seed": r["seed"], "prepend_bos": bool(bos),
            "bos_token_id": bos_token_id}


def text(given: Mapping) -> dict:
    """The ``text_probe`` keys of ``given`` with the schema's defaults for those omitted; an unknown key,
    or no ``file``, is refused."""
    unknown = sorted(set(given) - set(TEXT))
    if unknown:
        raise ValueError(f"text_probe: unknown key(s) {unknown}; the keys are {', '.join(TEXT)}")
    settings = {**TEXT, **dict(given)}
    if not settings["file"]:
        raise ValueError("text_probe: give a file (a path or glob of .txt/.md, .jsonl or .parquet files)")
    return settings
