"""Every findings table of a run, computed in one place from the per-head trajectory (the findings
job; nothing downstream recomputes them)."""
from __future__ import annotations

import polars as pl

from headtrace.findings import layer_onset, spectral_lead, strongest
from headtrace.findings.trajectory import (
    FIRST_TOKEN_FRACTIONS,
    GAPS,
    INDUCTION_COUNTS,
    KEY0_MASS,
    circuit_size,
    f1_bos_floor,
    f1_floor_holds,
    f2_bos_fraction,
    f2_shape,
    f3_gap_table,
    f3_milestones,
    f4_final_circuit,
    f4_recall,
    f4_recall_milestones,
)


def all_findings(traj: pl.DataFrame, class_threshold: float = 30.0, induction_threshold: float = 50.0,
                 found_threshold: float | None = None, sharp_share: float = 0.5,
                 pr_rise_rule: str = "running_min_ratio", pr_rise_factor: float = 2.0, spread_alpha: float = 0.05,
                 spread_permutations: int = 10000, spread_seed: int = 0, spread_families=None,
                 trend_factor: float = 2.0,
                 induction_counts=INDUCTION_COUNTS, first_token_fractions=FIRST_TOKEN_FRACTIONS,
                 gaps=GAPS, key0_mass: float = KEY0_MASS) -> dict[str, pl.DataFrame]:
    """Every findings table by schema name (``found_threshold`` defaults to ``class_threshold``;
    ``induction_counts`` / ``first_token_fractions``: the F3 milestones; ``gaps``: the (later,
    earlier) milestone pairs of ``f3_gaps``;
    ``spread_*``: the F2b layer-spread test, ``layer_onset.f2_layer_spread`` (``spread_families``: its
    Holm families, stated before the run); ``pr_rise_*``: F5, ``spectral_lead``; ``key0_mass``: F1's
    second count, first-token heads with at least this share of their attention on key 0).
    A model screened at one revision gets F1's counts and a fraction, and no test of a trajectory: its F2
    shape and F2b spread read "one checkpoint", it has no p in any Holm family and it has no F4 recall
    milestone (its F3 milestones are met, or not, at that revision: left-censored).
    ``trend_factor``: the strongest heads' trend, ``strongest``. F4's final circuit is a table of its own
    (``f4_final_circuit``), and its recall milestones come twice: a head found at ``found_threshold``
    (``f4_recall_milestones``) and, strictly, at ``induction_threshold`` (``f4_recall_milestones_strict``)."""
    f1 = f1_bos_floor(traj, class_threshold, key0_mass)
    onset = layer_onset.f2_layer_onset(traj, class_threshold, f1=f1)
    f2 = f2_bos_fraction(traj, class_threshold, key0_mass)
    ms = f3_milestones(traj, class_threshold, induction_threshold, tuple(induction_counts),
                       tuple(first_token_fractions))
    best = strongest.strongest_head(traj, class_threshold, induction_threshold)
    rec = f4_recall(traj, induction_threshold, class_threshold if found_threshold is None else found_threshold)
    return {
        "f1_bos_floor": f1,
        "f1_floor": f1_floor_holds(f1),
        "f2_bos_fraction": f2,
        "f2_shape": f2_shape(f2, sharp_share),
        "f2_layer_onset": onset,
        "f2_layer_spread": layer_onset.f2_layer_spread(onset, alpha=spread_alpha, n_permutations=spread_permutations,
                                                       seed=spread_seed, families=spread_families,
                                                       single_checkpoint=layer_onset.single_checkpoint_models(f1)),
        "circuit_size": circuit_size(traj, class_threshold, induction_threshold),
        "f3_milestones": ms,
        "f3_gaps": f3_gap_table(ms, [tuple(g) for g in gaps]),
        "f4_final_circuit": f4_final_circuit(traj, induction_threshold),
        "f4_recall": rec,
        "f4_recall_milestones": f4_recall_milestones(rec),
        "f4_recall_milestones_strict": f4_recall_milestones(f4_recall(traj, induction_threshold, induction_threshold)),
        "f5_pr_lead": spectral_lead.f5_pr_lead(traj, induction_threshold, pr_rise_rule, pr_rise_factor),
        "pr_integral": spectral_lead.pr_integral(traj),
        "strongest_head": best,
        "strongest_trend": strongest.strongest_trend(best, trend_factor),
    }
