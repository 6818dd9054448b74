"""The repeated-random probe (the config's ``repeated_probe`` block): Olsson et al. (2022)'s sequences of
distinct random tokens repeated, on which :mod:`headtrace.cell.patterns` scores prefix matching. Its keys,
and how a null one follows the synthetic probe, are :func:`headtrace.probe.spec.repeated`'s."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def repeated_random(n_sequences: int = 50, length: int = 32, repeats: int = 2,
                    token_range: Sequence[int] = (100, 10000), seed: int = 0, prepend_bos: bool = False,
                    bos_token_id: int | None = None) -> np.ndarray:
    """``(n_sequences, repeats * length [+ 1])`` int64 token ids: per sequence ``length`` distinct tokens
    drawn uniformly without replacement from ``token_range`` ``[low, high)`` (``numpy.random.default_rng([seed,
    i])`` for sequence i: a sequence keeps its tokens whatever the batch size), repeated ``repeats`` times,
    with a BOS in front when ``prepend_bos``. Distinct tokens give every query of a later repeat exactly one
    earlier occurrence per repeat before it, so the prefix-matching targets are unambiguous."""
    token_low, token_high = (int(v) for v in token_range)
    if n_sequences < 1:
        raise ValueError(f"repeated_probe.n_sequences must be >= 1, got {n_sequences}")
    if length < 1 or repeats < 2:
        raise ValueError(f"repeated_probe needs length >= 1 and repeats >= 2, got length {length}, repeats {repeats}")
    if token_high - token_low < length:
        raise ValueError(f"repeated_probe: [{token_low}, {token_high}) holds fewer than length = {length} distinct "
                         "tokens")
    if prepend_bos and bos_token_id is None:
        raise ValueError("repeated_probe: prepend_bos is true but the model has no bos_token_id")
    rows = []
    for i in range(n_sequences):
        seg = np.random.default_rng([seed, i]).choice(np.arange(token_low, token_high), size=length, replace=False)
        rows.append(np.tile(seg.astype(np.int64), repeats))
    tokens = np.stack(rows)
    if prepend_bos:
        tokens = np.concatenate([np.full((n_sequences, 1), bos_token_id, np.int64), tokens], axis=1)
    return tokens
