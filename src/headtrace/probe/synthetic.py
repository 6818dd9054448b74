"""The synthetic induction batch (the config's ``probe`` block) and the positions the screen reads.

Protocol (paper A, Xu 2026, arXiv:2605.24059, and the author's ``build_induction_batch``): every sequence is uniform random
tokens from ``token_range`` ``[low, high)``; two distinct tokens A, B; ``ab`` drawn from
``ab_range``; ``seq[ab] = A``, ``seq[ab + 1] = B``; every other occurrence of A, then of B,
is resampled; the last token is A. The query is the last position, the target is B.

The random draws happen in exactly the author's order (numpy ``RandomState(seed)``), so with the
default arguments the batch is the author's batch token for token. A sequence is *valid* when B
occurs exactly once before the query (the resampling can, rarely, re-create a B); the author
scores induction and duplicate-token attention over valid sequences only, and so do we.

With ``prepend_bos`` a BOS token is put in front of every sequence; every position below (and
``ab`` in the stored batch) refers to the tokens as fed to the model, BOS included.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import polars as pl

from headtrace.core.classes import CLASSES

N_BASELINE_POSITIONS = 50
BASELINE_SEED = 0
CONTROL_SEED = 0
CONTROL_WINDOW = 16  # the shuffled-B control stands within this many positions of B


@dataclass(frozen=True)
class ProbeBatch:
    tokens: np.ndarray  # (n, seq_len) int64, exactly as fed to the model
    ab: np.ndarray  # (n,) index of the first A in ``tokens``
    target: np.ndarray  # (n,) token B, the prediction target at the query
    valid: np.ndarray  # (n,) bool: B occurs once before the query

    @property
    def seq_len(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def token_span(self) -> tuple[int, int]:
        """``[low, high)`` of the token ids fed (BOS included): what the model's vocabulary must hold."""
        return int(self.tokens.min()), int(self.tokens.max()) + 1

    @property
    def query_pos(self) -> int:
        return self.seq_len - 1

    def head(self, n: int | None) -> "ProbeBatch":
        """The first ``n`` sequences (all of them when ``n`` is None or >= the batch size)."""
        if n is None or n >= len(self.tokens):
            return self
        return ProbeBatch(self.tokens[:n], self.ab[:n], self.target[:n], self.valid[:n])


def make_batch(
    n_sequences: int = 2000,
    seq_len: int = 256,
    token_range: Sequence[int] = (100, 10000),
    seed: int = 42,
    ab_range: Sequence[int] = (20, 128),
    prepend_bos: bool = False,
    bos_token_id: int | None = None,
) -> ProbeBatch:
    """Build the synthetic induction batch (see the module docstring), under the config's ``probe`` keys:
    ``token_range`` and ``ab_range`` are half-open ``[low, high)``."""
    body_len = seq_len - 1 if prepend_bos else seq_len
    token_low, token_high = (int(v) for v in token_range)
    ab_low, ab_high = (int(v) for v in ab_range)
    _check_batch_args(n_sequences, body_len, token_low, token_high, ab_low, ab_high)
    if prepend_bos and bos_token_id is None:
        raise ValueError("probe.prepend_bos is true but the model has no bos_token_id")
    rng = np.random.RandomState(seed)
    tokens = np.zeros((n_sequences, body_len), dtype=np.int64)
    ab = np.zeros(n_sequences, dtype=np.int64)
    target = np.zeros(n_sequences, dtype=np.int64)
    vocab = np.arange(token_low, token_high)
    for i in range(n_sequences):
        seq = rng.randint(token_low, token_high, size=body_len).astype(np.int64)
        a, b = rng.choice(vocab, size=2, replace=False)
        pos = rng.randint(ab_low, ab_high)
        seq[pos], seq[pos + 1] = a, b
        for k in range(body_len):
            if seq[k] == a and k != pos:
                seq[k] = rng.randint(token_low, token_high)
        for k in range(body_len):
            if seq[k] == b and k != pos + 1:
                seq[k] = rng.randint(token_low, token_high)
        seq[-1] = a
        tokens[i], ab[i], target[i] = seq, pos, b
    if prepend_bos:
        tokens = np.concatenate([np.full((n_sequences, 1), bos_token_id, np.int64), tokens], axis=1)
        ab = ab + 1
    valid = (tokens[:, :-1] == target[:, None]).sum(axis=1) == 1
    return ProbeBatch(tokens=tokens, ab=ab, target=target, valid=valid)


def _check_batch_args(n, body_len, token_low, token_high, ab_low, ab_high) -> None:
    if n < 1:
        raise ValueError(f"probe.n_sequences must be >= 1, got {n}")
    if token_high - token_low < 2:
        raise ValueError(f"probe.token_range [{token_low}, {token_high}) needs at least two tokens")
    if not 0 <= ab_low < ab_high:
        raise ValueError(f"probe.ab_range [{ab_low}, {ab_high}) is empty or negative")
    # ab + 1 must stay before the local window and the query (T-6 .. T-1).
    if ab_high + 1 > body_len - 6:
        raise ValueError(
            f"probe.ab_range upper bound {ab_high} leaves no room before the query window "
            f"of a {body_len}-token sequence (need ab_high <= seq_len - 7)"
        )


MIN_SEQ_LEN = 64  # config/schema.yaml's minimum: 50 baseline positions + the query window, with room


def fixed_positions(seq_len: int) -> dict[str, np.ndarray]:
    """Key positions of the classes that do not depend on the sequence: (positions,) per class."""
    q = seq_len - 1
    return {
        "previous-token": np.array([q - 1]),
        "first-token": np.array([0]),
        "self": np.array([q]),
        "local": np.arange(q - 5, q - 1),  # T-6 .. T-3
    }


def baseline_positions(seq_len: int, n: int = N_BASELINE_POSITIONS, seed: int = BASELINE_SEED) -> np.ndarray:
    """The author's 50 fixed "other" key positions: drawn once with ``RandomState(seed)`` from
    ``[1, T-1)``, avoiding first-token, self, previous-token and local (the sequence-dependent
    induction/duplicate positions are not avoided, as in the author's code)."""
    q = seq_len - 1
    avoid = {0, q, q - 1, *range(q - 5, q - 1)}
    if q - 1 - len(avoid - {0, q}) < n:
        raise ValueError(f"a {seq_len}-token probe has fewer than {n} baseline positions")
    rng = np.random.RandomState(seed)
    sample: list[int] = []
    while len(sample) < n:
        p = int(rng.randint(1, q))
        if p not in avoid and p not in sample:
            sample.append(p)
    return np.array(sample, dtype=np.int64)


def key_positions(batch: ProbeBatch) -> dict[str, np.ndarray]:
    """Per-sequence key positions for every class: (n, k) int64 per class."""
    n = batch.tokens.shape[0]
    out = {name: np.broadcast_to(pos, (n, pos.size)).copy() for name, pos in fixed_positions(batch.seq_len).items()}
    out["induction"] = (batch.ab + 1)[:, None]
    out["duplicate-token"] = batch.ab[:, None].copy()
    return {name: out[name] for name in CLASSES}


def copy_null_tokens(batch: ProbeBatch, seed: int = CONTROL_SEED) -> np.ndarray:
    """The *copy-null* batch: every sequence with B (at ``ab + 1``) replaced by another token of the
    probe's range, so that nothing in the context points to B. Per sequence the token is drawn
    uniformly (``default_rng([seed, i])``: a sequence keeps its token whatever batch it is in) from the
    range of the batch's tokens after position 0 (position 0 may be a BOS), less the tokens the
    sequence holds (A, B and every other), so the replacement occurs once, as B did. The unablated
    model's metric on B here against the probe itself is the *in-context boost*: what the earlier
    A -> B adds (``headtrace.causal.verdict``)."""
    tokens = np.array(batch.tokens, dtype=np.int64, copy=True)
    low, high = int(tokens[:, 1:].min()), int(tokens[:, 1:].max()) + 1
    for i in range(tokens.shape[0]):
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, i])
        held = set(tokens[i].tolist())
        if high - low <= len(held):  # a small range: draw among the tokens the sequence lacks
            free = np.setdiff1d(np.arange(low, high), tokens[i])
            if not free.size:
                raise ValueError(f"copy-null: sequence {i} holds every token of [{low}, {high}); no token can replace B")
            tokens[i, int(batch.ab[i]) + 1] = int(rng.choice(free))
            continue
        while True:
            t = int(rng.integers(low, high))
            if t not in held:
                tokens[i, int(batch.ab[i]) + 1] = t
                break
    return tokens


def control_targets(batch: ProbeBatch, seed: int = CONTROL_SEED, window: int = CONTROL_WINDOW) -> np.ndarray:
    """Per sequence a *shuffled-B* control token: a token of the context that the sequence treats
    like B but that no A -> B rule points to, or -1 where there is none.

    B sits at ``ab + 1`` and occurs there only (in a valid sequence). The control is drawn
    uniformly, seeded per sequence (``default_rng([seed, i])``: a sequence keeps its control
    whatever batch it is in), from the tokens that (1) stand within ``window`` positions of B
    (not at B's own position, not at position 0, not at the query); (2) are neither A (the query
    token) nor B; (3) occur before the query exactly as often as B does. Where no token meets all
    three (a short toy vocabulary), (1) widens to positions 1..T-2 and (3) to the least frequent
    tokens. A model that copies context tokens without using A -> B predicts the control as often
    as B (``headtrace.experiments.composition``)."""
    tokens, n, q = batch.tokens, batch.tokens.shape[0], batch.query_pos
    out = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        ctx = tokens[i, :q]
        a, b, pb = int(tokens[i, q]), int(batch.target[i]), int(batch.ab[i]) + 1
        values, counts = np.unique(ctx, return_counts=True)
        count = dict(zip(values.tolist(), counts.tolist()))
        near = {int(ctx[p]) for p in range(max(1, pb - window), min(q, pb + window + 1)) if p != pb}
        cands = sorted(t for t in near if t not in (a, b) and count[t] == count.get(b, 0))
        if not cands:
            rest = {int(t) for t in ctx[1:].tolist()} - {a, b}
            least = min((count[t] for t in rest), default=None)
            cands = sorted(t for t in rest if count[t] == least)
        if cands:
            out[i] = cands[int(np.random.default_rng([seed, i]).integers(len(cands)))]
    return out


def batch_table(batch: ProbeBatch):
    """The batch as a table (schema ``probe``): seq, tokens (as fed), ab, target, valid."""

    return pl.DataFrame(
        {
            "seq": np.arange(batch.tokens.shape[0], dtype=np.int32),
            "tokens": batch.tokens.tolist(),
            "ab": batch.ab.astype(np.int32),
            "target": batch.target,
            "valid": batch.valid,
        }
    )


def batch_from_table(df) -> ProbeBatch:
    """Inverse of ``batch_table``."""
    df = df.sort("seq")
    tokens = np.asarray(df["tokens"].to_list(), dtype=np.int64)
    return ProbeBatch(
        tokens=tokens,
        ab=df["ab"].to_numpy().astype(np.int64),
        target=df["target"].to_numpy().astype(np.int64),
        valid=df["valid"].to_numpy().astype(bool),
    )


# ---- the held-out draw of the ablation (config ablation.probe: held_out) --------------------------
# The screen picks the circuits (and, by exclusion, the matched controls' pool) on the probe batch; the
# ablation then tests them on a fresh draw of the same probe (same settings, another seed) with no
# sequence the screen read, so its null and intervals are out of sample (docs/statistics.md).

HELD_OUT_SEED_OFFSET = 1  # ablation.probe_seed null: the held-out seed is probe.seed + 1 (mod 2**32)
_MAX_DRAW_FACTOR = 16  # give up after drawing 16 x n + 1024 candidates (a probe with too few distinct sequences)


def held_out_seed(probe_seed: int, seed: int | None = None) -> int:
    """The seed of the held-out draw: ``seed`` (``ablation.probe_seed``) when given, else
    ``(probe_seed + HELD_OUT_SEED_OFFSET) mod 2**32`` (numpy's ``RandomState`` takes seeds in [0, 2**32))."""
    if seed is not None:
        return int(seed)
    return (int(probe_seed) + HELD_OUT_SEED_OFFSET) % 2**32


def held_out_batch(screen: ProbeBatch, n_sequences: int, *, seed: int, **batch_kwargs) -> tuple[ProbeBatch, int]:
    """``(batch, n_redrawn)``: the first ``n_sequences`` sequences of ``make_batch(seed=seed,
    **batch_kwargs)`` (the screen's probe settings, another seed) that are not, token for token, a
    sequence of ``screen``; ``n_redrawn`` counts the draws skipped as exact duplicates of a screen
    sequence (0 but for a probe with very few distinct sequences). ``make_batch`` draws sequence by
    sequence, so the result is the same however many candidates are drawn, and its first ``k``
    sequences are the held-out batch of ``k``."""
    if n_sequences < 1:
        raise ValueError(f"ablation.n_sequences must be >= 1, got {n_sequences}")
    if batch_kwargs.pop("n_sequences", None) is not None:
        raise TypeError("held_out_batch: give the size as the n_sequences argument only")
    seen = {row.tobytes() for row in np.ascontiguousarray(screen.tokens, dtype=np.int64)}
    n_draw, limit = n_sequences, _MAX_DRAW_FACTOR * n_sequences + 1024
    while True:
        drawn = make_batch(n_sequences=n_draw, seed=seed, **batch_kwargs)
        if drawn.seq_len != screen.seq_len:
            raise ValueError(f"the held-out draw has {drawn.seq_len}-token sequences, the screen's probe "
                             f"{screen.seq_len}: they must share the probe settings")
        fresh = np.array([row.tobytes() not in seen for row in drawn.tokens], dtype=bool)
        keep = np.flatnonzero(fresh)[:n_sequences]
        if keep.size == n_sequences:
            redrawn = int(keep[-1] + 1 - n_sequences)
            batch = ProbeBatch(drawn.tokens[keep], drawn.ab[keep], drawn.target[keep], drawn.valid[keep])
            return batch, redrawn
        if n_draw >= limit:
            raise ValueError(
                f"the held-out probe (seed {seed}) found only {keep.size} of {n_sequences} sequences the screen "
                f"did not read in {n_draw} draws: the probe settings allow too few distinct sequences "
                "(widen probe.token_range or lengthen probe.seq_len, or set ablation.probe: same)")
        n_draw = min(2 * n_draw + (n_sequences - keep.size), limit)


def tokens_sha256(tokens: np.ndarray) -> str:
    """SHA-256 (hex) of a batch's token ids as fed to the model: the (n, seq_len) array as
    little-endian int64, row-major - ``hashlib.sha256(np.ascontiguousarray(tokens, '<i8').tobytes())``.
    Recorded with every ablation (``ablation_probe_sha256``) so a reader can check which sequences ran."""
    return hashlib.sha256(np.ascontiguousarray(tokens, dtype="<i8").tobytes()).hexdigest()
