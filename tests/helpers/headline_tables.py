"""Hand-built findings and verdict tables with known headline answers: three models A, B, C and their
circuit sizes, milestones, gaps, refined onsets, layer spread and verdicts (tests/report/test_report_headline.py
states the answers; tests/report/test_report_browser.py renders them)."""
from __future__ import annotations

import polars as pl
from helpers.findings_tables import as_written

I3, F10, F50 = "induction_3_heads", "first_token_10pct", "first_token_50pct"


def sizes():
    rows = [("A", "r0", 0), ("A", "r1", 100), ("A", "r2", 1000), ("A", "r3", 10000),
            ("B", "s0", 10), ("B", "s1", 20),
            ("C", "c0", 1000), ("C", "c1", 2000), ("C", "c2", 4000)]
    return pl.DataFrame({"model": [r[0] for r in rows], "revision": [r[1] for r in rows],
                         "tokens": [r[2] for r in rows], "n_induction_circuit": [0, 3, 3, 2, 0, 1, 0, 4, 4],
                         "n_heads": [16] * 9})


def milestones():
    rows = [("A", I3, "r1", 100.0), ("A", F10, "r2", 1000.0), ("A", F50, "r3", 10000.0),
            ("B", I3, None, None), ("B", F10, None, None), ("B", F50, None, None),
            ("C", I3, "c1", 2000.0), ("C", F10, "c1", 2000.0), ("C", F50, None, None)]
    return pl.DataFrame({"model": [r[0] for r in rows], "milestone": [r[1] for r in rows],
                         "revision": [r[2] for r in rows], "tokens": [r[3] for r in rows]},
                        schema={"model": pl.String, "milestone": pl.String, "revision": pl.String,
                                "tokens": pl.Float64})


def gaps(extra: dict | None = None):
    d = {"model": ["A", "B", "C", "A", "C"], "later": [F50, F50, F50, F10, F10], "earlier": [I3] * 5,
         "later_revision": ["r3", None, None, "r2", "c1"], "later_tokens": [10000.0, None, None, 1000.0, 2000.0],
         "earlier_revision": ["r1", None, "c1", "r1", "c1"], "earlier_tokens": [100.0, None, 2000.0, 100.0, 2000.0],
         "gap_ratio": [100.0, None, None, 10.0, 1.0], "same_revision": [False, None, None, False, True]}
    d.update(extra or {})
    return pl.DataFrame(d)


def onsets():
    # A's circuit milestone refined: the pool added r1a (50 tokens) before r1
    return pl.DataFrame({"model": ["A"], "milestone": [I3], "lo_revision": ["r1a"], "lo_tokens": [50.0],
                         "hi_revision": ["r1"], "hi_tokens": [100.0], "rounds": [1], "n_added": [1]})


def spread():
    return pl.DataFrame({"model": ["A", "A", "B"], "onset": ["first", "half", "first"],
                         "label": ["bottom-up", "top-down", "no sink"]})


def verdicts():
    base = {"metric": "top1", "baseline_top1": 0.6, "upper_bound": "upper_bound", "upper_bound_top1": 0.0,
            "control_exact": False, "n_matched_sets": 21}
    rows = [
        {**base, "model": "A", "revision": "r2", "tokens": 1000, "circuit": "circuit", "n_heads": 2,
         "heads": ["L1H0", "L1H1"], "ablated_top1": 0.5, "effect": 0.1, "effect_lo": 0.0, "effect_hi": 0.2,
         "p_value": 0.4, "n_distinct_draws": 20, "random_top1_mean": 0.52, "random_effect_mean": 0.08,
         "min_p": 0.048, "verdict": "not_causal", "causal": False},
        {**base, "model": "A", "revision": "r3", "tokens": 10000, "circuit": "circuit", "n_heads": 1,
         "heads": ["L9H9"], "ablated_top1": 0.5, "effect": 0.1, "effect_lo": 0.0, "effect_hi": 0.2,
         "p_value": 0.4, "n_distinct_draws": 20, "random_top1_mean": 0.52, "random_effect_mean": 0.08,
         "min_p": 0.048, "verdict": "not_causal", "causal": False},
        {**base, "model": "A", "revision": "r3", "tokens": 10000, "circuit": "final_circuit", "n_heads": 2,
         "heads": ["L1H0", "L1H2"], "ablated_top1": 0.2, "effect": 0.4, "effect_lo": 0.3, "effect_hi": 0.5,
         "p_value": 0.01, "n_distinct_draws": 20, "random_top1_mean": 0.55, "random_effect_mean": 0.05,
         "min_p": 0.048, "verdict": "causal", "causal": True},
        {**base, "model": "B", "revision": "s1", "tokens": 20, "circuit": "circuit", "n_heads": 1,
         "heads": ["L0H1"], "ablated_top1": 0.3, "effect": 0.3, "effect_lo": 0.2, "effect_hi": 0.4,
         "p_value": 0.5, "n_distinct_draws": 1, "n_matched_sets": 1, "random_top1_mean": 0.5,
         "random_effect_mean": 0.1, "min_p": 0.5, "verdict": "underpowered", "causal": False},
    ]
    return pl.DataFrame(rows)


def findings(**over):
    """The tables, ``over`` replacing (None: leaving out) any of them, with ``f3_gaps`` as the findings job
    writes it from the milestones' brackets (helpers.findings_tables.as_written)."""
    F = {"circuit_size": sizes(), "f3_milestones": milestones(), "f3_gaps": gaps(), "f3_onsets": onsets(),
         "f2_layer_spread": spread()}
    F.update(over)
    return as_written({k: v for k, v in F.items() if v is not None})
