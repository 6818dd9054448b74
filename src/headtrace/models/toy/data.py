"""The toy panel's synthetic training streams: one batch of token ids per call, from a data spec.

Vocabulary: byte-level, 256 content tokens (0..255) plus BOS (256) and EOS/PAD (257); the default
data and probe use the 95 printable bytes [32, 127). Pure numpy (a seeded ``Generator`` in, an
int64 array out), so a stream can be inspected without torch.

Data kinds (``make_data``):

``repeat``
    Every sequence holds a span R of ``repeat_min``..``repeat_max`` (inclusive) uniform random
    tokens from ``[token_low, token_high)``, immediately repeated (``R R``; ``n_copies`` copies in
    all, or periodically to the end of the sequence with ``n_copies: fill``), the rest fresh
    uniform random tokens. The span starts at position 0 (``placement: start``) or at a uniform
    offset (``placement: random``). Every copy after the first is perfectly predictable by
    induction at copy distance ``len(R)``; the rest is unpredictable. With ``repeat_prob < 1`` a
    sequence has no repeat (all random) with probability ``1 - repeat_prob``.
``zipf``
    A text-like stream: tokens drawn from a Zipf(``zipf_a``) distribution over
    ``[token_low, token_high)`` (randomly permuted ranks, fixed by ``vocab_seed``), with
    ``n_spans`` earlier spans of ``span_min``..``span_max`` tokens copied to later positions (copy
    distance at least ``min_distance``). Meant for a data-shift continuation (``init_from``).
``pairs``
    Uniform random tokens in which ``n_pairs`` bigrams (A B) recur once, ``distance_min``..
    ``distance_max`` positions later: in-context recall of a single token pair, like the probe.
``topic``
    Each sequence draws ``n_topic`` distinct tokens from ``[token_low, token_high)`` and is a
    uniform stream over them: in-context unigram statistics, which a head with broad attention
    over the context predicts (a job for heads other than induction's).
``backcopy``
    Uniform random tokens from ``[token_low, token_high)`` with ``n_triggers`` trigger tokens per
    sequence (at distinct positions, never adjacent). Trigger ``k`` is the token
    ``trigger_low + k``, one per entry of ``offsets``; the token after it is a copy of the token
    ``offsets[k]`` positions before it (with an even offset that may be an earlier trigger or
    its copy). After the bigram-backcopy task of Guo et al. 2024 (arXiv:2410.13835): a job at
    trigger positions only, so a head that serves it has work there and none at content tokens,
    as on the probe (no trigger tokens) — the active-dormant heads the paper relates to attention
    sinks. (In the 4 x 12-head toy the copy itself went to layer-0 heads that stay busy
    everywhere; the heads that became first-token sinks were layer-3 heads that switch on at a
    trigger: docs/toy-panel.md.) The trigger tokens must lie outside the content range and
    the probe's token range.
``mixture``
    Each sequence drawn from one of ``components`` (data dicts with a ``weight``).

The non-mixture kinds optionally put ``bos_token_id`` at position 0 (``bos: true``).
"""
from __future__ import annotations

import numpy as np

VOCAB_SIZE = 258
BOS_TOKEN_ID = 256
EOS_TOKEN_ID = 257


def make_data(data: dict, batch_size: int, seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """One training batch ``(batch_size, seq_len)`` int64 drawn from ``rng`` (see module docstring)."""
    kind = data.get("kind", "repeat")
    if kind == "mixture":
        comps = data["components"]
        w = np.array([float(c.get("weight", 1.0)) for c in comps])
        which = rng.choice(len(comps), size=batch_size, p=w / w.sum())
        out = np.empty((batch_size, seq_len), dtype=np.int64)
        for k, comp in enumerate(comps):
            idx = np.flatnonzero(which == k)
            if idx.size:
                out[idx] = make_data(comp, int(idx.size), seq_len, rng)
        return out
    lo, hi = int(data.get("token_low", 0)), int(data.get("token_high", 256))
    if hi - lo < 2:
        raise ValueError(f"data token range [{lo}, {hi}) needs at least two tokens")
    bos = bool(data.get("bos", False))
    body = seq_len - 1 if bos else seq_len
    if kind == "repeat":
        rmin, rmax = int(data.get("repeat_min", 20)), int(data.get("repeat_max", 63))
        copies = data.get("n_copies", 2)
        fill = copies in ("fill", 0, None)
        copies = 2 if fill else int(copies)
        if not 1 <= rmin <= rmax or copies < 2 or copies * rmax > body:
            raise ValueError(f"repeat span {rmin}..{rmax} does not fit {copies} times in {body} tokens")
        placement = data.get("placement", "start")
        if placement not in ("start", "random"):
            raise ValueError(f"unknown repeat placement '{placement}' (start, random)")
        p = float(data.get("repeat_prob", 1.0))
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)
        lens = rng.integers(rmin, rmax + 1, size=batch_size)
        has = rng.random(batch_size) < p
        offs = rng.random(batch_size)
        for i in range(batch_size):
            if not has[i]:
                continue
            n = int(lens[i])
            o = int(offs[i] * (body - copies * n + 1)) if placement == "random" else 0
            end = body if fill else o + copies * n
            span = out[i, o:o + n].copy()
            for k in range(o + n, end, n):
                m = min(n, end - k)
                out[i, k:k + m] = span[:m]
    elif kind == "pairs":
        k_pairs = int(data.get("n_pairs", 8))
        dmin, dmax = int(data.get("distance_min", 20)), int(data.get("distance_max", 63))
        if dmax + 2 > body or dmin < 2:
            raise ValueError(f"pair distances {dmin}..{dmax} do not fit in {body} tokens")
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)
        for i in range(batch_size):
            for _ in range(k_pairs):
                d = int(rng.integers(dmin, dmax + 1))
                p0 = int(rng.integers(0, body - d - 1))
                out[i, p0 + d:p0 + d + 2] = out[i, p0:p0 + 2]
    elif kind == "topic":
        k = int(data.get("n_topic", 8))
        if not 1 <= k <= hi - lo:
            raise ValueError(f"topic size {k} must lie in [1, {hi - lo}] (the token range)")
        topics = np.argsort(rng.random((batch_size, hi - lo)), axis=1)[:, :k] + lo
        out = np.take_along_axis(topics, rng.integers(0, k, size=(batch_size, body)), axis=1).astype(np.int64)
    elif kind == "zipf":
        a = float(data.get("zipf_a", 1.1))
        v = hi - lo
        probs = 1.0 / np.arange(1, v + 1) ** a
        probs /= probs.sum()
        perm = np.random.default_rng(int(data.get("vocab_seed", 0))).permutation(v)
        out = lo + perm[rng.choice(v, size=(batch_size, body), p=probs)].astype(np.int64)
        smin, smax = int(data.get("span_min", 8)), int(data.get("span_max", 32))
        dmin = int(data.get("min_distance", 20))
        for i in range(batch_size):
            for _ in range(int(data.get("n_spans", 2))):
                n = int(rng.integers(smin, smax + 1))
                if 2 * n + dmin > body:
                    continue
                src = int(rng.integers(0, body - n - max(n, dmin) + 1))
                dst = int(rng.integers(src + max(n, dmin), body - n + 1))
                out[i, dst:dst + n] = out[i, src:src + n]
    elif kind == "backcopy":
        offsets = np.asarray(data.get("offsets", list(range(1, 13))), np.int64)
        t_low, n_trig = int(data.get("trigger_low", 128)), int(data.get("n_triggers", 12))
        if offsets.size == 0 or offsets.min() < 1:
            raise ValueError(f"backcopy offsets must be positive, got {offsets.tolist()}")
        _check_triggers("backcopy", t_low, offsets.size, lo, hi)
        slots = np.arange(int(offsets.max()), body - 1, 2)
        if not 0 <= n_trig <= slots.size:
            raise ValueError(f"{n_trig} backcopy triggers (offsets up to {offsets.max()}) do not fit in {body} tokens")
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)
        pos = np.sort(np.argsort(rng.random((batch_size, slots.size)), axis=1)[:, :n_trig], axis=1)
        pos = slots[pos]
        which = rng.integers(0, offsets.size, size=(batch_size, n_trig))
        rows = np.arange(batch_size)
        for j in range(n_trig):  # in position order: a copy may read an earlier trigger's pair
            p, k = pos[:, j], which[:, j]
            out[rows, p] = t_low + k
            out[rows, p + 1] = out[rows, p - offsets[k]]
    else:
        raise ValueError(f"unknown toy data kind '{kind}' (known: repeat, pairs, topic, zipf, backcopy, "
                         "mixture)")
    if bos:
        out = np.concatenate([np.full((batch_size, 1), int(data.get("bos_token_id", BOS_TOKEN_ID)), np.int64), out], 1)
    return out


def _check_triggers(kind: str, t_low: int, n: int, lo: int, hi: int) -> None:
    """A trigger kind's tokens ``[t_low, t_low + n)`` must miss the content range and stay below 256."""
    if t_low < hi and t_low + n > lo or t_low + n > 256:
        raise ValueError(f"{kind} trigger tokens [{t_low}, {t_low + n}) must lie outside the "
                         f"content range [{lo}, {hi}) and below 256")
