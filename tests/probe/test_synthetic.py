import numpy as np
import pytest

from headtrace.core.classes import CLASSES
from headtrace.probe import synthetic


def test_batch_invariants():
    b = synthetic.make_batch(n_sequences=200, seq_len=64, token_range=(10, 60), ab_range=(5, 30))
    n, T = b.tokens.shape
    assert (n, T) == (200, 64)
    rows = np.arange(n)
    a = b.tokens[rows, b.ab]
    assert np.all(b.tokens[:, -1] == a), "query token is A"
    assert np.all(b.tokens[rows, b.ab + 1] == b.target), "B follows the first A"
    assert np.all((b.ab >= 5) & (b.ab < 30))
    assert np.all((b.tokens >= 10) & (b.tokens < 60))
    assert np.all(a != b.target)
    # A occurs at ab and at the query; the author's B-resampling pass (run after the A pass) can
    # re-create an A elsewhere, rarely, and that batch is kept as published.
    n_a = (b.tokens == a[:, None]).sum(axis=1)
    assert np.all(n_a >= 2) and (n_a == 2).mean() > 0.9
    # B occurs once before the query exactly for valid rows
    n_b = (b.tokens[:, :-1] == b.target[:, None]).sum(axis=1)
    assert np.array_equal(b.valid, n_b == 1)
    assert b.valid.mean() > 0.9


def test_batch_is_deterministic_and_seeded():
    kw = dict(n_sequences=20, seq_len=64, token_range=(10, 60), ab_range=(5, 30))
    b1, b2 = synthetic.make_batch(**kw), synthetic.make_batch(**kw)
    assert np.array_equal(b1.tokens, b2.tokens)
    assert not np.array_equal(b1.tokens, synthetic.make_batch(**kw, seed=7).tokens)


def test_default_batch_follows_the_author_draw_order():
    # First sequence of the author's batch (RandomState(42)): the first draw is the filler.
    b = synthetic.make_batch(n_sequences=1)
    rng = np.random.RandomState(42)
    filler = rng.randint(100, 10000, size=256)
    a, bb = rng.choice(np.arange(100, 10000), size=2, replace=False)
    ab = rng.randint(20, 128)
    assert b.ab[0] == ab and b.target[0] == bb and b.tokens[0, -1] == a
    untouched = [k for k in range(255) if filler[k] not in (a, bb) and k not in (ab, ab + 1)]
    assert np.array_equal(b.tokens[0, untouched], filler[untouched])


def test_prepend_bos_shifts_positions():
    kw = dict(n_sequences=10, seq_len=64, token_range=(10, 60), ab_range=(5, 30))
    b = synthetic.make_batch(**kw, prepend_bos=True, bos_token_id=0)
    assert b.tokens.shape == (10, 64) and np.all(b.tokens[:, 0] == 0)
    assert np.all(b.tokens[np.arange(10), b.ab + 1] == b.target)
    with pytest.raises(ValueError, match="bos_token_id"):
        synthetic.make_batch(**kw, prepend_bos=True)


def test_bad_ranges_are_named():
    with pytest.raises(ValueError, match="ab_range"):
        synthetic.make_batch(n_sequences=2, seq_len=64, ab_range=(20, 60))
    with pytest.raises(ValueError, match="token_range"):
        synthetic.make_batch(n_sequences=2, seq_len=64, token_range=(5, 6), ab_range=(5, 20))


def test_baseline_positions_match_the_author_rule():
    pos = synthetic.baseline_positions(256)
    assert len(pos) == 50 and len(set(pos.tolist())) == 50
    assert not set(pos.tolist()) & {0, 255, 254, 253, 252, 251, 250}
    assert pos.min() >= 1 and pos.max() < 255
    assert np.array_equal(pos, synthetic.baseline_positions(256))


def test_key_positions_and_table_roundtrip():
    b = synthetic.make_batch(n_sequences=5, seq_len=64, token_range=(10, 60), ab_range=(5, 30))
    keys = synthetic.key_positions(b)
    assert list(keys) == list(CLASSES)
    assert np.array_equal(keys["induction"][:, 0], b.ab + 1)
    assert keys["local"][0].tolist() == [58, 59, 60, 61]
    assert keys["previous-token"][0, 0] == 62 and keys["self"][0, 0] == 63
    b2 = synthetic.batch_from_table(synthetic.batch_table(b))
    for f in ("tokens", "ab", "target", "valid"):
        assert np.array_equal(getattr(b, f), getattr(b2, f))


def test_control_targets_are_matched_context_tokens():
    """The shuffled-B control: a context token near B, neither A nor B, as frequent before the
    query as B; seeded per sequence, so a head of the batch keeps its controls."""
    batch = synthetic.make_batch(n_sequences=300, seq_len=64, token_range=(2, 40), ab_range=(5, 40))
    ctl = synthetic.control_targets(batch)
    assert ctl.shape == (300,) and (ctl >= 0).all()
    matched = 0
    for i in range(300):
        ctx, a, b, pb = batch.tokens[i, :-1], batch.tokens[i, -1], batch.target[i], batch.ab[i] + 1
        assert ctl[i] not in (a, b) and (ctx[1:] == ctl[i]).any()
        near = [t for p, t in enumerate(ctx) if 1 <= p and abs(p - pb) <= 16 and p != pb]
        if ctl[i] in near and (ctx == ctl[i]).sum() == (ctx == b).sum():
            matched += 1
    assert matched > 250  # 38 tokens over 63 positions: most sequences have a matched token near B
    assert np.array_equal(synthetic.control_targets(batch), ctl)  # deterministic
    assert np.array_equal(synthetic.control_targets(batch.head(50)), ctl[:50])  # by sequence, not by batch
    assert not np.array_equal(synthetic.control_targets(batch, seed=1), ctl)
    # on the paper probe nearly every context token is unique: the control is matched everywhere
    paper = synthetic.make_batch(n_sequences=40)
    pc = synthetic.control_targets(paper)
    for i in range(40):
        ctx = paper.tokens[i, :-1]
        pos = np.flatnonzero(ctx == pc[i])
        assert pos.size == 1 and 0 < abs(pos[0] - (paper.ab[i] + 1)) <= 16


def test_control_targets_known_answers():
    # A = 5, B = 6 (once); near B: 9 (three times) and 7 (once, like B) -> 7
    tokens = np.array([[1, 9, 9, 5, 6, 7, 9, 5]])
    one = synthetic.ProbeBatch(tokens=tokens, ab=np.array([3]), target=np.array([6]), valid=np.array([True]))
    assert synthetic.control_targets(one).tolist() == [7]
    assert synthetic.control_targets(one, window=0).tolist() == [7]  # nothing near: widen, least frequent = 7
    # near B only tokens that occur twice: widen to the least frequent of positions 1..T-2 (never 0)
    tokens = np.array([[3, 5, 6, 8, 8, 9, 5]])
    two = synthetic.ProbeBatch(tokens=tokens, ab=np.array([1]), target=np.array([6]), valid=np.array([True]))
    assert synthetic.control_targets(two, window=2).tolist() == [9]
    # nothing but A and B: no control
    bare = synthetic.ProbeBatch(tokens=np.array([[5, 5, 6, 5]]), ab=np.array([1]), target=np.array([6]),
                                valid=np.array([True]))
    assert synthetic.control_targets(bare).tolist() == [-1]


# ---- the held-out draw of the ablation (ablation.probe: held_out) ----

HELD_KW = dict(seq_len=64, token_range=(10, 60), ab_range=(5, 30), prepend_bos=False, bos_token_id=None)


def _rows(tokens) -> set:
    return {r.tobytes() for r in np.ascontiguousarray(tokens, dtype=np.int64)}


def test_held_out_seed_is_the_probe_seed_plus_one_unless_given():
    assert synthetic.held_out_seed(42) == 43
    assert synthetic.held_out_seed(42, 7) == 7
    assert synthetic.held_out_seed(2**32 - 1) == 0  # RandomState takes [0, 2**32)


def test_held_out_batch_is_another_draw_of_the_same_probe():
    screen = synthetic.make_batch(n_sequences=40, seed=42, **HELD_KW)
    held, redrawn = synthetic.held_out_batch(screen, 25, seed=43, **HELD_KW)
    # known answer: no duplicate to skip, so it is the probe's batch drawn with seed 43, token for token
    expected = synthetic.make_batch(n_sequences=25, seed=43, **HELD_KW)
    assert redrawn == 0
    for field in ("tokens", "ab", "target", "valid"):
        assert np.array_equal(getattr(held, field), getattr(expected, field)), field
    assert not _rows(held.tokens) & _rows(screen.tokens)
    # deterministic, and the held-out batch of k is the first k of a larger one (ablation.n_sequences)
    again, _ = synthetic.held_out_batch(screen, 25, seed=43, **HELD_KW)
    assert np.array_equal(again.tokens, held.tokens)
    first, _ = synthetic.held_out_batch(screen, 10, seed=43, **HELD_KW)
    assert np.array_equal(first.tokens, held.tokens[:10])


def test_held_out_batch_skips_the_screens_sequences():
    """A screen that holds the seed's first 3 draws (and one later one): those are skipped, the rest kept in order."""
    draws = synthetic.make_batch(n_sequences=12, seed=7, **HELD_KW)
    screen = synthetic.ProbeBatch(draws.tokens[[0, 1, 2, 5]], draws.ab[[0, 1, 2, 5]], draws.target[[0, 1, 2, 5]],
                                  draws.valid[[0, 1, 2, 5]])
    held, redrawn = synthetic.held_out_batch(screen, 6, seed=7, **HELD_KW)
    assert redrawn == 4
    assert np.array_equal(held.tokens, draws.tokens[[3, 4, 6, 7, 8, 9]])
    assert np.array_equal(held.ab, draws.ab[[3, 4, 6, 7, 8, 9]])
    # the seed's whole batch as the screen: nothing left within the draw limit -> a clear error
    big = synthetic.make_batch(n_sequences=1500, seed=7, **HELD_KW)
    with pytest.raises(ValueError, match=r"found only 0 of 10 sequences the screen did not read.*ablation.probe: same"):
        synthetic.held_out_batch(big, 10, seed=7, **HELD_KW)
    # ... which draws past it when the limit allows (16 x 100 + 1024 > 1500 + 100)
    held, redrawn = synthetic.held_out_batch(big, 100, seed=7, **HELD_KW)
    assert redrawn == 1500 and not _rows(held.tokens) & _rows(big.tokens)


def test_held_out_batch_keeps_the_bos():
    kw = {**HELD_KW, "prepend_bos": True, "bos_token_id": 1}
    screen = synthetic.make_batch(n_sequences=5, seed=42, **kw)
    held, _ = synthetic.held_out_batch(screen, 5, seed=43, **kw)
    assert (held.tokens[:, 0] == 1).all() and np.array_equal(held.ab, synthetic.make_batch(n_sequences=5, seed=43, **kw).ab)


def test_tokens_sha256_known_answer():
    import hashlib

    tokens = np.array([[1, 2], [3, 258]], dtype=np.int64)
    raw = b"".join(v.to_bytes(8, "little") for v in (1, 2, 3, 258))
    assert synthetic.tokens_sha256(tokens) == hashlib.sha256(raw).hexdigest()
    assert synthetic.tokens_sha256(tokens.astype(np.int32)) == synthetic.tokens_sha256(tokens)  # ids, not their dtype
    assert synthetic.tokens_sha256(tokens[:1]) != synthetic.tokens_sha256(tokens)
