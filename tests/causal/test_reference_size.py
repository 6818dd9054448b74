"""The size of the causal test (issue 48): under the plainest null a circuit must reach p <= alpha at
most alpha of the time.

The null: every head of the circuit's layers alike, their ablation effects i.i.d. and added (a set's
effect is the sum of its heads'). The circuit is a fixed set of each layout; per trial the heads'
effects are drawn anew, the reference set is built by ``conditions.reference_sets`` (seeded per trial,
as a cell's draws are) and p by ``verdict.reference_p``, the functions the verdict uses. The rejection
rate at alpha = 0.05 must be at most alpha within three Monte Carlo standard errors.

The old rule (matched sets drawn only from the heads the circuit leaves free, p = (1 + b) / (1 + N) over
N distinct sets, exact up to 286 sets, else 20 sampled) is measured beside it, so that the reason for
the change stays on record (docs/statistics.md quotes both rates).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from headtrace.causal import conditions, verdict

ALPHA = 0.05
TRIALS = 2000
LIMIT = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / TRIALS)  # 0.0646

# name: (heads per layer, {layer: circuit heads}, M draws when sampled)
LAYOUTS = {
    "smollm2 3+2 of 9+9": (9, {17: 3, 18: 2}, 39),
    "toy-neox 4 of 12": (12, {2: 4}, 99),
    "pythia-1b L4H4 L7H0 L7H1": (8, {4: 1, 7: 2}, 99),
    "sampled 2+2 of 16+16": (16, {3: 2, 9: 2}, 99),
}


def _circuit(per_layer: dict[int, int]) -> list[tuple[int, int]]:
    return [(l, h) for l, k in per_layer.items() for h in range(k)]


def _incidence(sets, index) -> np.ndarray:
    m = np.zeros((len(sets), len(index)))
    for i, s in enumerate(sets):
        for h in s:
            m[i, index[h]] = 1.0
    return m


def new_rule_rate(n_heads: int, per_layer: dict[int, int], n_draws: int, trials: int = TRIALS) -> float:
    """The share of trials in which the circuit reaches p <= ALPHA under the reference-set rule."""
    circuit = _circuit(per_layer)
    heads = [(l, h) for l in per_layer for h in range(n_heads)]
    index = {h: i for i, h in enumerate(heads)}
    rng = np.random.default_rng(2026)
    c_vec = _incidence([circuit], index)[0]
    hits = 0
    fixed = None
    for t in range(trials):
        if fixed is None:
            sets, _, exact = conditions.reference_sets(circuit, n_heads, n_draws, seed=t, name="size",
                                                       exact_max=conditions.EXACT_MAX)
            inc = _incidence(sets, index)
            if exact:  # every set: the same on every trial
                fixed = (inc, exact)
        else:
            inc, exact = fixed
        effects = rng.standard_normal(len(heads))
        p = verdict.reference_p(float(c_vec @ effects), inc @ effects, exact)
        hits += p <= ALPHA
    return hits / trials


def old_rule_rate(n_heads: int, per_layer: dict[int, int], trials: int = TRIALS, n_random: int = 20,
                  exact_max: int = 286) -> float:
    """The same under the rule before issue 48 (free heads only, distinct sets, (1 + b) / (1 + N))."""
    circuit = _circuit(per_layer)
    heads = [(l, h) for l in per_layer for h in range(n_heads)]
    index = {h: i for i, h in enumerate(heads)}
    pools = [[(l, h) for h in range(per_layer[l], n_heads)] for l in per_layer]
    space = math.prod(math.comb(len(p), per_layer[l]) for l, p in zip(per_layer, pools))
    rng = np.random.default_rng(2026)
    c_vec = _incidence([circuit], index)[0]
    every = None
    if space <= max(n_random, exact_max):
        every = _incidence([tuple(itertools.chain.from_iterable(c)) for c in itertools.product(
            *[itertools.combinations(p, per_layer[l]) for l, p in zip(per_layer, pools)])], index)
    hits = 0
    for _ in range(trials):
        if every is None:
            seen = set()
            while len(seen) < n_random:
                seen.add(tuple(sorted(h for l, p in zip(per_layer, pools)
                                      for h in (p[i] for i in rng.choice(len(p), per_layer[l], replace=False)))))
            inc = _incidence(sorted(seen), index)
        else:
            inc = every
        effects = rng.standard_normal(len(heads))
        e, c = inc @ effects, float(c_vec @ effects)
        hits += (1 + int((e >= c).sum())) / (1 + len(e)) <= ALPHA
    return hits / trials


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_the_reference_set_rule_holds_its_size(name):
    n_heads, per_layer, n_draws = LAYOUTS[name]
    rate = new_rule_rate(n_heads, per_layer, n_draws)
    assert rate <= LIMIT, f"{name}: rejection rate {rate:.4f} under the null > {LIMIT:.4f}"


@pytest.mark.parametrize("name", ["smollm2 3+2 of 9+9", "toy-neox 4 of 12", "pythia-1b L4H4 L7H0 L7H1"])
def test_the_old_free_heads_rule_rejects_too_often(name):
    # the defect issue 48 fixed, kept on record: 0.11-0.15 at alpha = 0.05 (docs/statistics.md)
    n_heads, per_layer, _ = LAYOUTS[name]
    assert old_rule_rate(n_heads, per_layer) > LIMIT


def test_the_reference_set_holds_the_circuit_and_every_set_of_its_shape():
    sets, n_sets, exact = conditions.reference_sets([(2, 0), (2, 1), (2, 2), (2, 3)], 12, 20, 0, "x",
                                                    exact_max=conditions.EXACT_MAX)
    assert exact and n_sets == math.comb(12, 4) == 495 == len(set(sets))
    assert ((2, 0), (2, 1), (2, 2), (2, 3)) in sets
    sets, n_sets, exact = conditions.reference_sets([(17, 0), (17, 1), (17, 2), (18, 0), (18, 1)], 9, 39, 0, "x",
                                                    exact_max=conditions.EXACT_MAX)
    assert not exact and n_sets == 84 * 36 == 3024 and len(sets) == 39
    assert all(sum(1 for l, _ in s if l == 17) == 3 and sum(1 for l, _ in s if l == 18) == 2 for s in sets)


def test_p_is_the_rank_over_all_sets_or_phipson_smyth_over_draws():
    assert verdict.reference_p(3.0, [3.0, 1.0, 2.0, 0.5], exact=True) == pytest.approx(1 / 4)
    assert verdict.reference_p(3.0, [1.0, 2.0, 0.5], exact=False) == pytest.approx(1 / 4)
    assert verdict.reference_p(1.0, [3.0, 1.0, 2.0, 0.5], exact=True) == pytest.approx(3 / 4)  # ties count against
    assert verdict.min_p(12, exact=True) == pytest.approx(1 / 12) and 1 / 12 > ALPHA  # 11 of 12 heads: underpowered
    assert verdict.min_p(39, exact=False) == pytest.approx(0.025)


if __name__ == "__main__":  # the rates docs/statistics.md quotes
    for name, (n_heads, per_layer, n_draws) in LAYOUTS.items():
        new = new_rule_rate(n_heads, per_layer, n_draws)
        old = old_rule_rate(n_heads, per_layer)
        print(f"{name}: reference set {new:.4f}, free heads (old) {old:.4f}, +-{math.sqrt(ALPHA * (1 - ALPHA) / TRIALS):.4f}")
