"""Ablation conditions of one cell: the circuits and their matched controls (paper A step 3).

**Conditions** (``build_conditions``; one ``Condition`` each, controls numbered 1..N, others 0):

- ``baseline``: nothing ablated.
- ``circuit``: the cell's induction circuit, heads with ``sel_induction >= induction_threshold`` (50).
- ``matched_random`` 1..N: the matched control (below).
- ``upper_bound``: every head of the circuit's layers.
- ``final_circuit``: the final revision's induction circuit (omitted when ``final_circuit=None``),
  with its own ``final_matched_random`` 1..N and ``final_upper_bound`` (``final_controls=True``,
  the default). When the final circuit *is* the cell circuit (the final revision itself) its
  controls are the cell circuit's sets, so the engine evaluates them once (it evaluates every
  distinct head set once). ``final_controls=False`` (formerly an economy: the final circuit judged
  against the cell circuit's controls) now shares the cell circuit's controls only where that is
  valid, i.e. where the final circuit *is* the cell circuit: a circuit with other heads, even with
  the same per-layer sizes, has another matched space (the cell circuit's sets may contain its
  heads), so it gets its own controls. A circuit is never compared with control sets of other
  per-layer sizes; the verdict checks this too (``underpowered_reason``).
- ``previous_token_circuit``: heads whose ``best_class`` is previous-token with
  ``best_selectivity >= previous_token_threshold`` (100), with ``previous_token_matched_random``
  1..N and ``previous_token_upper_bound``.
- with ``class_matched=True``: ``class_matched_random`` (and ``final_class_matched_random``,
  ``previous_token_class_matched_random``) 1..N, the same control drawn from the free heads that
  are *not* first-token (sink) heads (``best_class == "first-token"`` at ``best_selectivity >=
  class_threshold``): removing a sink head can raise top-1 in real models, which would inflate a
  plain matched control.

**The matched set space** of a circuit (``matched_space``): per circuit layer l with ``k_l`` circuit
heads and a pool of ``free_l`` candidate heads (the layer's non-circuit heads; minus the sink heads
for the class-matched control), a matched set takes ``k_l`` of them; the space is the product over
layers of ``C(free_l, k_l)`` sets (``n_matched_sets``). A layer with fewer free heads than circuit
heads (``free_l < k_l``) has **no** matched set: the space is empty, the control is a single
placeholder row (no heads, ``n_sets`` 0) and the verdict is ``underpowered`` with that reason (a
smaller set would not be a matched control). ``matched_sets`` returns N *distinct* sets of it:
every set when the space holds at most ``max(K, exact_max)`` sets (*exact*: the control is the whole
space, in lexicographic order), otherwise K sets drawn uniformly *without replacement* (*sampled*:
per layer a uniform combination, a set already drawn is redrawn). The generator is
``numpy.random.default_rng([seed, crc32(control name)])``, so a control is reproducible from
``seed`` and independent of the other controls.

**Exact by default** (``EXACT_MAX`` = 286, the ``ablation.exact_max`` default of
config/schema.yaml): 286 = C(13, 3), the largest single-layer space of a circuit with at most 3
heads in a layer of 16. Exact, i.e. judged on the whole space: every circuit of at most 3 heads in
one 8- or 16-head layer (8 heads: C(7,1) = 7, C(6,2) = 15, C(5,3) = 10; 16 heads: C(15,1) = 15,
C(14,2) = 91, C(13,3) = 286); every circuit of at most 3 heads a layer in two 8-head layers (at
most C(6,2)^2 = 225; Pythia-1B's 3-head circuit: C(7,1) x C(6,2) = 105); in two 16-head layers
only one head in each (15^2 = 225). Sampled (``control_exact`` false, and said so): two 16-head
layers with 1 + 2 heads (C(15,1) x C(14,2) = 1,365) or 2 + 2 heads (C(14,2)^2 = 8,281), and three
or more circuit layers (three 1-head layers: 7^3 = 343 at 8 heads, 15^3 = 3,375 at 16). Cost: one
ablation pass of the probe per set, i.e. up to 286 passes per circuit and cell instead of
``n_random`` (20): ~14x the ablation time in the worst case, ~5x for Pythia's circuit (105 sets).

**Empty circuits** (early revisions) never crash and never disappear: the circuit, its upper bound
and a single control row (``draw`` 0, no heads) are still emitted and evaluated; ablating nothing
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
    n_sets: int | None = None  # control rows: size of the matched set space they come from

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
# The matched set space


EXACT_MAX = 286  # C(13, 3): see the module docstring ("Exact by default")


def matched_space(circuit: Sequence, n_heads_per_layer: int, exclude: Iterable = ()) -> tuple[list, int]:
    """``([(layer, pool, take), ...], n_sets)`` of a circuit's matched control: per circuit layer its
    candidate heads (non-circuit, not in ``exclude``), how many a set takes (the circuit's own count
    in that layer), and the space size (0 when some layer has fewer free heads than circuit heads)."""
    circuit = as_heads(circuit)
    banned = set(circuit) | set(as_heads(exclude))
    layers, n_sets = [], 1
    for l in layers_of(circuit):
        k = sum(1 for cl, _ in circuit if cl == l)
        pool = [h for h in range(n_heads_per_layer) if (l, h) not in banned]
        layers.append((l, pool, k))
        n_sets *= math.comb(len(pool), k)  # 0 when len(pool) < k
    return layers, n_sets


def short_layers(circuit: Sequence, n_heads_per_layer: int, exclude: Iterable = ()) -> list[tuple[int, int, int]]:
    """``[(layer, circuit heads, free heads), ...]`` for every layer with too few free heads to
    match the circuit (empty: the matched space exists)."""
    layers, _ = matched_space(circuit, n_heads_per_layer, exclude)
    return [(l, take, len(pool)) for l, pool, take in layers if len(pool) < take]


def size_profile(heads: Iterable) -> dict[int, int]:
    """``{layer: number of heads}`` of a head set (what a matched control must reproduce)."""
    out: dict[int, int] = {}
    for l, _ in as_heads(heads):
        out[l] = out.get(l, 0) + 1
    return out


def matched_sets(circuit: Sequence, n_heads_per_layer: int, n_random: int, seed: int, name: str, *,
                 exact_max: int | None = None, exclude: Iterable = ()) -> tuple[list[tuple[Head, ...]], int, bool]:
    """``(sets, n_matched_sets, exact)``: distinct matched sets of ``circuit`` (module docstring).

    Exact (every set, lexicographic) when the space holds ``<= max(n_random, exact_max)`` sets;
    otherwise ``n_random`` distinct sets drawn without replacement, seeded by ``(seed, crc32(name))``.
    """
    if n_random < 0:
        raise ValueError(f"n_random must be >= 0, got {n_random}")
    layers, n_sets = matched_space(circuit, n_heads_per_layer, exclude)
    if not layers or n_sets == 0:  # nothing to match, or a layer too small to match: no set
        return [], 0, True
    if n_sets <= max(n_random, exact_max or 0):
        combos = [[tuple((l, h) for h in c) for c in itertools.combinations(pool, take)] for l, pool, take in layers]
        return [tuple(sorted(itertools.chain.from_iterable(p))) for p in itertools.product(*combos)], n_sets, True
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])
    seen: set[tuple[Head, ...]] = set()
    out: list[tuple[Head, ...]] = []
    while len(out) < n_random:  # n_sets > n_random: terminates; expected tries < 2 n_random here
        heads: list[Head] = []
        for l, pool, take in layers:
            if take:
                heads.extend((l, int(h)) for h in rng.choice(pool, size=take, replace=False))
        s = tuple(sorted(heads))
        if s not in seen:
            seen.add(s)
            out.append(s)
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
    sets, n_sets, _ = matched_sets(heads, s.n_heads_per_layer, s.n_random, s.seed, name, exact_max=s.exact_max,
                                   exclude=exclude)
    if not sets:  # a layer has fewer free heads than circuit heads: no matched set exists
        return [Condition(name, 0, (), 0)] if s.n_random > 0 else []
    return [Condition(name, i + 1, d, n_sets) for i, d in enumerate(sets)]


def _with_controls(spec: CircuitSpec, heads, s: ControlSettings, like: tuple[CircuitSpec, tuple] | None = None
                   ) -> list[Condition]:
    """The circuit, its controls and upper bound. ``like=(spec, heads)``: when ``heads`` equals
    that circuit's, reuse its control sets (same sets, so the engine shares the passes)."""
    src = like[0] if like is not None and tuple(like[1]) == tuple(heads) and heads else spec
    out = [Condition(spec.condition, 0, heads)]
    out += [Condition(spec.random, c.draw, c.heads, c.n_sets) for c in _control(src.random, heads, s)]
    if s.sinks is not None:
        out += [Condition(spec.class_random, c.draw, c.heads, c.n_sets)
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

