"""Ablation conditions of one cell: the circuits and their reference sets (paper A step 3).

**Conditions** (``build_conditions``; one ``Condition`` each, reference sets numbered 1..N, others 0):

- ``baseline``: nothing ablated.
- ``circuit``: the cell's induction circuit, heads with ``sel_induction >= induction_threshold`` (50).
- ``matched_random`` 1..N: the circuit's reference set (below).
- ``upper_bound``: every head of the circuit's layers.
- ``final_circuit``: the final revision's induction circuit (omitted when ``final_circuit=None``),
  with its own ``final_matched_random`` 1..N and ``final_upper_bound`` (``final_controls=True``,
  the default). When the final circuit *is* the cell circuit its reference sets are the cell
  circuit's, so the engine evaluates them once (it evaluates every distinct head set once).
  ``final_controls=False`` shares the cell circuit's sets only there.
- ``previous_token_circuit``: heads whose ``best_class`` is previous-token with
  ``best_selectivity >= previous_token_threshold`` (100), with ``previous_token_matched_random``
  1..N and ``previous_token_upper_bound``.
- with ``class_matched=True``: ``class_matched_random`` (and ``final_class_matched_random``,
  ``previous_token_class_matched_random``) 1..N, the reference set without the layers' first-token
  (sink) heads (``best_class == "first-token"`` at ``best_selectivity >= class_threshold``) other
  than the circuit's own: removing a sink head can raise top-1 in real models.

**The reference set** of a circuit (``reference_space``): every head set of the circuit's shape in
the circuit's layers, i.e. per circuit layer l with ``k_l`` circuit heads, ``k_l`` of the layer's
``H`` heads, drawn from *all* of them (a set may overlap the circuit, and the circuit is one of the
sets): ``prod_l C(H, k_l)`` sets (``n_matched_sets``; toy-neox's 4-head circuit in a 12-head layer
is one of C(12, 4) = 495). Under the null that the layers' heads are alike (their ablation effects
exchangeable), the circuit is a uniform member of its reference set, so its rank among the sets is a
valid p (``headtrace.causal.verdict.reference_p``). The sets the paper draws, from the heads the
circuit leaves free, are not: the circuit's effect is not exchangeable with theirs, and under i.i.d.
additive head effects a circuit reaches p <= 0.05 3-9x too often (docs/statistics.md, measured by
``tests/causal/test_reference_size.py``).

``reference_sets`` returns what to evaluate: every set when the reference set holds at most
``max(n_draws, exact_max)`` (*exact*, lexicographic order; p is the circuit's rank over all N),
otherwise ``n_draws`` sets drawn uniformly *with replacement* (*sampled*, per layer a uniform
combination; a draw may repeat or be the circuit; p = (1 + b) / (M + 1), Phipson & Smyth 2010).
The generator is ``numpy.random.default_rng([seed, crc32(control name)])``, so a reference set is
reproducible from ``seed`` and independent of the others. A reference set too small for p <= alpha
(N < 1/alpha sets exact, M < 1/alpha - 1 draws sampled; 11 heads of a 12-head layer: 12 sets) makes
the verdict ``underpowered``.

**Exact by default** (``EXACT_MAX`` = 560 = C(16, 3), the ``ablation.exact_max`` default of
config/schema.yaml): every circuit of at most 3 heads in one layer of up to 16 heads, toy-neox's 4
of 12 (495), Pythia-1B's L4H4, L7H0, L7H1 (C(8,1) x C(8,2) = 224) and one head in each of two
16-head layers (256) are judged on every set. Larger ones are sampled and say so (SmolLM2's 3 + 2
of 9 + 9: C(9,3) x C(9,2) = 3,024; OLMo-1B's three 16-head layers, 16^3 = 4,096). Cost: one
ablation pass of the probe per distinct set.

**Empty circuits** (early revisions) never crash and never disappear: the circuit, its upper bound
and a single reference row (``draw`` 0, no heads) are still emitted and evaluated; ablating nothing
is the baseline.
"""
from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import polars as pl

from headtrace.core.heads import Head, as_heads, layers_of, upper_bound


@dataclass(frozen=True)
class Condition:
    name: str
    draw: int = 0  # 1..N for control sets, 0 otherwise (and for an empty circuit's placeholder)
    heads: tuple[Head, ...] = field(default_factory=tuple)
    n_sets: int | None = None  # reference rows: how many sets the reference set holds
    exact: bool | None = None  # reference rows: every set evaluated (True) or uniform draws (False)

    @property
    def n_heads(self) -> int:
        return len(self.heads)


@dataclass(frozen=True)
class CircuitSpec:
    """A verdict row's conditions: the circuit, its matched / class-matched controls, its upper
    bound. ``fallback_*``: controls used when the circuit has none of its own (``final_circuit``
    with ``final_controls=False`` uses the cell circuit's)."""

    condition: str
    random: str
    class_random: str
    upper: str
    fallback_random: str | None = None
    fallback_upper: str | None = None


CIRCUITS: dict[str, CircuitSpec] = {
    "circuit": CircuitSpec("circuit", "matched_random", "class_matched_random", "upper_bound"),
    "final_circuit": CircuitSpec("final_circuit", "final_matched_random", "final_class_matched_random",
                                 "final_upper_bound", "matched_random", "upper_bound"),
    "previous_token_circuit": CircuitSpec("previous_token_circuit", "previous_token_matched_random",
                                          "previous_token_class_matched_random", "previous_token_upper_bound"),
}


# --------------------------------------------------------------------------------------------
# The reference set


EXACT_MAX = 560  # C(16, 3): every set when the reference set holds at most this many (module docstring)


def reference_space(circuit: Sequence, n_heads_per_layer: int, exclude: Iterable = ()) -> tuple[list, int]:
    """``([(layer, pool, take), ...], n_sets)``: the reference set of ``circuit`` (module docstring).
    Per circuit layer the heads a set may take (every head of the layer; with ``exclude``, less the
    excluded heads that are not circuit heads), how many it takes (the circuit's own count there),
    and the number of sets, the product of ``C(pool, take)``. The circuit is always one of them."""
    circuit = as_heads(circuit)
    own = set(circuit)
    banned = set(as_heads(exclude)) - own
    layers, n_sets = [], 1
    for l in layers_of(circuit):
        k = sum(1 for cl, _ in circuit if cl == l)
        pool = [h for h in range(n_heads_per_layer) if (l, h) not in banned]
        layers.append((l, pool, k))
        n_sets *= math.comb(len(pool), k)
    return layers, n_sets


def size_profile(heads: Iterable) -> dict[int, int]:
    """``{layer: number of heads}`` of a head set (what a reference set must reproduce)."""
    out: dict[int, int] = {}
    for l, _ in as_heads(heads):
        out[l] = out.get(l, 0) + 1
    return out


def reference_sets(circuit: Sequence, n_heads_per_layer: int, n_draws: int, seed: int, name: str, *,
                   exact_max: int | None = None, exclude: Iterable = ()) -> tuple[list[tuple[Head, ...]], int, bool]:
    """``(sets, n_sets, exact)``: the reference sets of ``circuit`` to evaluate (module docstring).

    Exact (every set of :func:`reference_space`, the circuit among them, lexicographic) when the set
    holds ``<= max(n_draws, exact_max)``; otherwise ``n_draws`` sets drawn uniformly *with
    replacement* (per layer a uniform combination; a draw may repeat, or be the circuit), the draws
    Phipson & Smyth's ``(1 + b) / (M + 1)`` counts. Seeded by ``(seed, crc32(name))``.
    """
    if n_draws < 0:
        raise ValueError(f"n_draws must be >= 0, got {n_draws}")
    layers, n_sets = reference_space(circuit, n_heads_per_layer, exclude)
    if not layers:
        return [], 0, True
    if n_sets <= max(n_draws, exact_max or 0):
        combos = [[tuple((l, h) for h in c) for c in itertools.combinations(pool, take)] for l, pool, take in layers]
        return [tuple(sorted(itertools.chain.from_iterable(p))) for p in itertools.product(*combos)], n_sets, True
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])
    out: list[tuple[Head, ...]] = []
    for _ in range(n_draws):
        heads: list[Head] = []
        for l, pool, take in layers:
            heads.extend((l, int(h)) for h in rng.choice(pool, size=take, replace=False))
        out.append(tuple(sorted(heads)))
    return out, n_sets, False


# --------------------------------------------------------------------------------------------
# Circuits from a screen


def circuit_from_screen(screen: pl.DataFrame, induction_threshold: float = 50.0) -> tuple[Head, ...]:
    """Induction circuit: every head with ``sel_induction >= induction_threshold``."""
    sel = screen.filter(pl.col("sel_induction").fill_nan(None) >= induction_threshold)
    return as_heads(zip(sel["layer"].to_list(), sel["head"].to_list()))


def previous_token_circuit_from_screen(screen: pl.DataFrame, threshold: float = 100.0) -> tuple[Head, ...]:
    """Previous-token circuit: best class previous-token with ``best_selectivity >= threshold``."""
    sel = screen.filter((pl.col("best_class") == "previous-token")
                        & (pl.col("best_selectivity").fill_nan(None) >= threshold))
    return as_heads(zip(sel["layer"].to_list(), sel["head"].to_list()))


def sink_heads_from_screen(screen: pl.DataFrame, class_threshold: float = 30.0) -> tuple[Head, ...]:
    """First-token (sink) heads: best class first-token with ``best_selectivity >= class_threshold``."""
    sel = screen.filter((pl.col("best_class") == "first-token")
                        & (pl.col("best_selectivity").fill_nan(None) >= class_threshold))
    return as_heads(zip(sel["layer"].to_list(), sel["head"].to_list()))


# --------------------------------------------------------------------------------------------
# Conditions


@dataclass(frozen=True)
class ControlSettings:
    n_heads_per_layer: int
    n_random: int
    seed: int
    exact_max: int | None
    sinks: tuple[Head, ...] | None  # None: no class-matched control


def _control(name: str, heads, s: ControlSettings, exclude=()) -> list[Condition]:
    if not heads:
        return [Condition(name, 0, (), 0)] if s.n_random > 0 else []  # placeholder: nothing to match
    sets, n_sets, exact = reference_sets(heads, s.n_heads_per_layer, s.n_random, s.seed, name,
                                         exact_max=s.exact_max, exclude=exclude)
    return [Condition(name, i + 1, d, n_sets, exact) for i, d in enumerate(sets)]


def _with_controls(spec: CircuitSpec, heads, s: ControlSettings, like: tuple[CircuitSpec, tuple] | None = None
                   ) -> list[Condition]:
    """The circuit, its controls and upper bound. ``like=(spec, heads)``: when ``heads`` equals
    that circuit's, reuse its control sets (same sets, so the engine shares the passes)."""
    src = like[0] if like is not None and tuple(like[1]) == tuple(heads) and heads else spec
    out = [Condition(spec.condition, 0, heads)]
    out += [Condition(spec.random, c.draw, c.heads, c.n_sets, c.exact) for c in _control(src.random, heads, s)]
    if s.sinks is not None:
        out += [Condition(spec.class_random, c.draw, c.heads, c.n_sets, c.exact)
                for c in _control(src.class_random, heads, s, exclude=s.sinks)]
    out.append(Condition(spec.upper, 0, upper_bound(heads, s.n_heads_per_layer)))
    return out


def can_share_controls(final: Sequence, circuit: Sequence) -> bool:
    """May the final circuit be judged against the cell circuit's matched sets
    (``final_controls=False``)? Only when it is the same non-empty head set: same per-layer sizes
    alone are not enough (another circuit's control sets may contain the final circuit's heads)."""
    final, circuit = as_heads(final), as_heads(circuit)
    return bool(circuit) and set(final) == set(circuit)


def build_conditions(
    screen: pl.DataFrame,
    n_heads_per_layer: int | None = None,
    *,
    final_circuit: Iterable | None,
    n_random: int = 20,
    seed: int = 0,
    induction_threshold: float = 50.0,
    previous_token_threshold: float = 100.0,
    final_controls: bool = True,
    exact_max: int | None = None,
    class_matched: bool = False,
    class_threshold: float = 30.0,
    previous_token: bool = True,
) -> list[Condition]:
    """All conditions of one cell (module docstring), baseline first.

    ``n_heads_per_layer`` defaults to ``max(screen.head) + 1``. ``final_circuit`` is an iterable of
    ``(layer, head)`` pairs or ``"L4H4"`` names; ``None`` omits the final-circuit condition.
    ``exact_max``: evaluate the whole matched space when it holds at most this many sets (default
    here: only when it holds at most ``n_random``; the workflow's default is ``EXACT_MAX``).
    ``final_controls=False`` shares the cell circuit's controls only where
    :func:`can_share_controls` allows it; otherwise the final circuit gets its own.
    ``previous_token=False`` leaves the previous-token circuit and its controls out.
    """
    if n_random < 0:
        raise ValueError(f"n_random must be >= 0, got {n_random}")
    if exact_max is not None and exact_max < 0:
        raise ValueError(f"exact_max must be >= 0 or None, got {exact_max}")
    if n_heads_per_layer is None:
        if screen.height == 0:
            raise ValueError("empty screen and no n_heads_per_layer")
        n_heads_per_layer = int(screen["head"].max()) + 1
    s = ControlSettings(n_heads_per_layer, n_random, seed, exact_max,
                        sink_heads_from_screen(screen, class_threshold) if class_matched else None)
    circuit = circuit_from_screen(screen, induction_threshold)
    prev = previous_token_circuit_from_screen(screen, previous_token_threshold)
    conds = [Condition("baseline", 0, ())]
    conds += _with_controls(CIRCUITS["circuit"], circuit, s)
    if final_circuit is not None:
        final = as_heads(final_circuit)
        if final_controls or not can_share_controls(final, circuit):
            conds += _with_controls(CIRCUITS["final_circuit"], final, s, like=(CIRCUITS["circuit"], circuit))
        else:
            conds.append(Condition("final_circuit", 0, final))
    if previous_token:
        conds += _with_controls(CIRCUITS["previous_token_circuit"], prev, s)
    for c in conds:
        bad = [h for _, h in c.heads if not 0 <= h < n_heads_per_layer]
        if bad:
            raise ValueError(f"condition {c.name} has head indices {bad} outside 0..{n_heads_per_layer - 1}")
    return conds

