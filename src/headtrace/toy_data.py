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
    sequence has no repeat (all random) with probability ``1 - repeat_prob``. With
    ``reverse: true`` every later copy is R reversed: there a recurring token is followed by the
    token *before* its first occurrence, a job that fires at a repeat (as the probe's query is
    one) with another answer than induction's. With ``separator: TOKEN`` that token stands before
    every later copy (so the context marks where a copy starts).
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
``markov``
    A fixed first-order Markov chain over ``[token_low, token_high)``: every token has ``n_next``
    successors (drawn once from ``vocab_seed``), and each next token is one of its predecessor's
    successors (uniformly) with probability ``follow``, otherwise uniform. The current token alone
    predicts the next: a stream on which attention has nothing to add (a head can only stay out of
    the way).
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
    trigger: README, "The toy panel".) The trigger tokens must lie outside the content range and
    the probe's token range. With ``permute: true`` the token after the trigger is not a copy but
    ``sigma(x)`` of the source token ``x``, for a fixed permutation ``sigma`` of the content range
    (drawn once from ``vocab_seed``; a trigger token as source is passed through unchanged): the
    source token itself is never the answer, so a head that writes the answer (rather than
    copying the source for a later MLP to map) cannot double as a copy head at content tokens.
``skip``
    Uniform random tokens from ``[token_low, token_high)`` in which ``n_pairs`` trigger tokens
    (distinct per sequence) recur once, ``distance_min``..``distance_max`` positions later.
    Trigger ``k`` is the token ``trigger_low + k``, one per entry of ``skips``; at its recurrence
    it is followed by the token that stood ``skips[k]`` positions after its first occurrence
    (``skips`` >= 2: not the token right after it, which recurring bigrams teach). Recall gated
    by the trigger: a head that serves it attends, at a trigger, to the key ``skips[k]`` after an
    earlier occurrence of the query's token — the wrong key at a content token, as on the probe,
    so it has a reason to be dormant at content tokens. The trigger tokens must lie outside the
    content range and the probe's token range.
``hop2``
    Uniform random tokens from ``[token_low, token_high)`` holding ``n_chains`` two-hop chains:
    ``A B`` somewhere, ``B C`` later, and later still the trigger ``trigger_low`` followed by
    ``A``, then ``C``. After the trigger the answer is two induction hops away (A -> B -> C): a
    layer-1 induction head finds B, and a head above it must look B up again. At a content
    token (no trigger before it, as on the probe) that second hop gives the wrong token, so a
    head serving it has a reason to be dormant there. Chains never share a position.
``modemap``
    A dense job gated by the whole sequence: position 0 holds a mode token ``trigger_low + k``
    (``k`` uniform over the entries of ``offsets``), and from then on every token is
    ``sigma_k(x)`` of the token ``offsets[k]`` positions before it (the first ``offsets[k]`` after
    the mode token are uniform random), ``sigma_k`` being the ``backcopy_permutation`` of seed
    ``vocab_seed + 1 + k``. A head serving mode ``k`` fetches the token at its offset and writes
    its image: a prediction that is wrong in any other mode and without a mode token (as on the
    probe), so it has a reason to be dormant there; an induction head is wrong here too (a
    recurring token's earlier successor is not its successor now). The mode tokens must lie
    outside the content range and the probe's token range.
``mixture``
    Each sequence drawn from one of ``components`` (data dicts with a ``weight``).

The non-mixture kinds optionally put ``bos_token_id`` at position 0 (``bos: true``).
``repeat`` and ``pairs`` optionally draw their background without replacement (``distinct: true``;
the token range must hold a sequence's length): then no token recurs except by design (the copy,
the recurring pairs), so a token seen once before predicts its earlier successor (except at the
end of a copied span), and a coincidental repeat never misleads a copy head.
"""
from __future__ import annotations

import numpy as np

VOCAB_SIZE = 258
BOS_TOKEN_ID = 256
EOS_TOKEN_ID = 257


def markov_successors(token_low: int, token_high: int, n_next: int, vocab_seed: int = 0) -> np.ndarray:
    """The ``markov`` kind's table: row ``i`` holds the ``n_next`` distinct successors of token
    ``token_low + i`` (a fixed draw from ``vocab_seed``)."""
    v = token_high - token_low
    g = np.random.default_rng(vocab_seed)
    return token_low + np.argsort(g.random((v, v)), axis=1)[:, :n_next].astype(np.int64)


def backcopy_permutation(token_low: int, token_high: int, vocab_seed: int = 0) -> np.ndarray:
    """The ``backcopy`` kind's ``permute`` map: entry ``i`` is the image of token ``token_low + i``,
    a fixed permutation of ``[token_low, token_high)`` drawn from ``vocab_seed`` with no fixed
    point (so no content token is ever its own image, and a copy is always wrong)."""
    v = token_high - token_low
    g = np.random.default_rng(vocab_seed)
    shift = np.roll(np.arange(v), 1)  # a v-cycle: no fixed point
    order = g.permutation(v)
    perm = np.empty(v, np.int64)
    perm[order] = order[shift]
    return token_low + perm


def _image_table(lo: int, hi: int, vocab_seed: int) -> np.ndarray:
    """A 256-entry lookup table: ``backcopy_permutation(lo, hi, vocab_seed)`` on the content range,
    the identity elsewhere (so a trigger or mode token maps to itself)."""
    table = np.arange(256)
    table[lo:hi] = backcopy_permutation(lo, hi, vocab_seed)
    return table


def _check_triggers(kind: str, t_low: int, n: int, lo: int, hi: int) -> None:
    """A trigger kind's tokens ``[t_low, t_low + n)`` must miss the content range and stay below 256."""
    if t_low < hi and t_low + n > lo or t_low + n > 256:
        raise ValueError(f"{kind} trigger tokens [{t_low}, {t_low + n}) must lie outside the "
                         f"content range [{lo}, {hi}) and below 256")


def _place(taken: np.ndarray, draw, what: str) -> list[int]:
    """Positions for one planted pattern: ``draw()`` proposes a list of positions (or None), and
    the first proposal that touches no ``taken`` position is marked taken and returned, so
    patterns never share a position (written or read). Refused by name after 1000 proposals."""
    for _ in range(1000):
        spots = draw()
        if spots is not None and not taken[spots].any():
            taken[spots] = True
            return spots
    raise ValueError(f"{what} do not fit in {taken.size} tokens")


def _fill(data: dict, rng: np.random.Generator, lo: int, hi: int, batch_size: int, body: int) -> np.ndarray:
    """A ``repeat`` / ``pairs`` sequence's background: uniform tokens from ``[lo, hi)``, or with
    ``distinct: true`` tokens drawn without replacement (no token recurs except by design)."""
    if not data.get("distinct"):
        return rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)
    if hi - lo < body:
        raise ValueError(f"distinct: the token range [{lo}, {hi}) has fewer tokens than a sequence's {body} positions")
    return lo + np.argsort(rng.random((batch_size, hi - lo)), axis=1)[:, :body].astype(np.int64)


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
        sep = data.get("separator")
        if sep is not None and not (0 <= int(sep) < VOCAB_SIZE and not lo <= int(sep) < hi):
            raise ValueError(f"repeat separator {sep} must be a token id outside the content range [{lo}, {hi})")
        width = rmax + (sep is not None)  # a later copy and the separator before it
        if not 1 <= rmin <= rmax or copies < 2 or rmax + (copies - 1) * width > body:
            raise ValueError(f"repeat span {rmin}..{rmax} does not fit {copies} times in {body} tokens")
        placement = data.get("placement", "start")
        if placement not in ("start", "random"):
            raise ValueError(f"unknown repeat placement '{placement}' (start, random)")
        p = float(data.get("repeat_prob", 1.0))
        reverse = bool(data.get("reverse", False))
        out = _fill(data, rng, lo, hi, batch_size, body)
        lens = rng.integers(rmin, rmax + 1, size=batch_size)
        has = rng.random(batch_size) < p
        offs = rng.random(batch_size)
        for i in range(batch_size):
            if not has[i]:
                continue
            n = int(lens[i])
            w = n + (sep is not None)
            o = int(offs[i] * (body - n - (copies - 1) * w + 1)) if placement == "random" else 0
            end = body if fill else o + n + (copies - 1) * w
            span = out[i, o:o + n][::-1].copy() if reverse else out[i, o:o + n].copy()
            if sep is not None:
                span = np.concatenate([[int(sep)], span])
            for k in range(o + n, end, w):
                m = min(w, end - k)
                out[i, k:k + m] = span[:m]
    elif kind == "pairs":
        k_pairs = int(data.get("n_pairs", 8))
        dmin, dmax = int(data.get("distance_min", 20)), int(data.get("distance_max", 63))
        if dmax + 2 > body or dmin < 2:
            raise ValueError(f"pair distances {dmin}..{dmax} do not fit in {body} tokens")
        out = _fill(data, rng, lo, hi, batch_size, body)
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
    elif kind == "markov":
        n_next, follow = int(data.get("n_next", 2)), float(data.get("follow", 0.9))
        if not 1 <= n_next <= hi - lo or not 0.0 <= follow <= 1.0:
            raise ValueError(f"markov needs 1 <= n_next <= {hi - lo} and 0 <= follow <= 1, got {n_next}, {follow}")
        succ = markov_successors(lo, hi, n_next, int(data.get("vocab_seed", 0)))
        out = np.empty((batch_size, body), dtype=np.int64)
        out[:, 0] = rng.integers(lo, hi, size=batch_size)
        follows = rng.random((batch_size, body)) < follow
        pick = rng.integers(0, n_next, size=(batch_size, body))
        free = rng.integers(lo, hi, size=(batch_size, body))
        for t in range(1, body):
            nxt = succ[out[:, t - 1] - lo, pick[:, t]]
            out[:, t] = np.where(follows[:, t], nxt, free[:, t])
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
        # the successor of a source token: itself, or with permute its sigma
        image = _image_table(lo, hi, int(data.get("vocab_seed", 0))) if data.get("permute") else np.arange(256)
        for j in range(n_trig):  # in position order: a copy may read an earlier trigger's pair
            p, k = pos[:, j], which[:, j]
            out[rows, p] = t_low + k
            out[rows, p + 1] = image[out[rows, p - offsets[k]]]
    elif kind == "skip":
        skips = np.asarray(data.get("skips", [2, 3, 4, 5, 6, 7]), np.int64)
        t_low, k_pairs = int(data.get("trigger_low", 128)), int(data.get("n_pairs", 4))
        dmin, dmax = int(data.get("distance_min", 20)), int(data.get("distance_max", 63))
        if skips.size == 0 or skips.min() < 2:
            raise ValueError(f"skip offsets must be >= 2, got {skips.tolist()}")
        _check_triggers("skip", t_low, skips.size, lo, hi)
        if not 1 <= k_pairs <= skips.size:
            raise ValueError(f"{k_pairs} skip pairs need as many distinct triggers, and there are {skips.size}")
        if dmin <= skips.max() or dmax + 2 > body:
            raise ValueError(f"skip distances {dmin}..{dmax} must exceed the largest skip ({skips.max()}) "
                             f"and fit in {body} tokens")
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)

        def draw_pair(k):
            d = int(rng.integers(dmin, dmax + 1))
            p0 = int(rng.integers(0, body - d - 1))
            return [p0, p0 + int(skips[k]), p0 + d, p0 + d + 1]

        for i in range(batch_size):
            taken = np.zeros(body, bool)
            for k in rng.permutation(skips.size)[:k_pairs]:
                first, source, again, after = _place(taken, lambda: draw_pair(k),
                                                     f"{k_pairs} skip pairs at distances {dmin}..{dmax}")
                out[i, first] = out[i, again] = t_low + k
                out[i, after] = out[i, source]
    elif kind == "hop2":
        n_chains, t_low = int(data.get("n_chains", 2)), int(data.get("trigger_low", 128))
        _check_triggers("hop2", t_low, 1, lo, hi)
        if n_chains < 1 or 7 * n_chains > body:
            raise ValueError(f"{n_chains} hop2 chains (7 positions each) do not fit in {body} tokens")
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)

        def draw_chain():
            p1, p2, p3 = np.sort(rng.choice(body - 2, size=3, replace=False))
            return [p1, p1 + 1, p2, p2 + 1, p3, p3 + 1, p3 + 2] if p2 > p1 + 1 and p3 > p2 + 1 else None

        for i in range(batch_size):
            taken = np.zeros(body, bool)
            for _ in range(n_chains):
                spots = _place(taken, draw_chain, f"{n_chains} hop2 chains")
                a_, b_, c_ = lo + rng.choice(hi - lo, size=3, replace=False)
                out[i, spots] = [a_, b_, b_, c_, t_low, a_, c_]
    elif kind == "modemap":
        offsets = np.asarray(data.get("offsets", [3, 5, 7, 9]), np.int64)
        t_low = int(data.get("trigger_low", 128))
        if offsets.size == 0 or offsets.min() < 1 or offsets.max() >= body - 1:
            raise ValueError(f"modemap offsets must lie in [1, {body - 1}), got {offsets.tolist()}")
        _check_triggers("modemap", t_low, offsets.size, lo, hi)
        seed = int(data.get("vocab_seed", 0))
        images = np.stack([_image_table(lo, hi, seed + 1 + k) for k in range(offsets.size)])
        mode = rng.integers(0, offsets.size, size=batch_size)
        out = rng.integers(lo, hi, size=(batch_size, body), dtype=np.int64)
        out[:, 0] = t_low + mode
        d = offsets[mode]
        rows = np.arange(batch_size)
        for t in range(2, body):  # the mode token at 0 is never a source
            src = t - d
            ok = src >= 1
            out[rows[ok], t] = images[mode[ok], out[rows[ok], src[ok]]]
    else:
        raise ValueError(f"unknown toy data kind '{kind}' (known: repeat, pairs, topic, zipf, markov, backcopy, "
                         "skip, hop2, modemap, mixture)")
    if bos:
        out = np.concatenate([np.full((batch_size, 1), int(data.get("bos_token_id", BOS_TOKEN_ID)), np.int64), out], 1)
    return out
