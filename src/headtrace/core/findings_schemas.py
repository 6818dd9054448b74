"""The schemas of the cross-revision tables: findings F1-F5 (``results/findings/``), the method
experiments (``results/experiments/``), checkpoint lineage and the seed groups (``results/groups/``)
(part of the output contract in docs/outputs.md; ``headtrace.core.tables`` merges them with the
cells' schemas and writes every table)."""
from __future__ import annotations

import polars as pl

from headtrace.core.cell_schemas import CELL_KEY

# seed i's final induction circuit ablated in seed j's final model (experiments.seeds.cross_seed_table)
_CROSS_SEED = {
    "circuit_seed": pl.Int64,
    "model_seed": pl.Int64,
    "top1_drop": pl.Float64,
    "top1_drop_vs_random": pl.Float64,
    "jaccard": pl.Float64,
    "n_candidates": pl.Int64,
}

# F4's recall milestones, at the class threshold and (strict) at the circuit threshold: one schema
_RECALL_MILESTONES = {
    "model": pl.String,
    "level": pl.Float64,
    "level_label": pl.String,
    "revision": pl.String,
    "tokens": pl.Int64,
    "final_tokens": pl.Int64,
    "token_share": pl.Float64,
}

FINDINGS_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    # ---- findings (headtrace.findings.trajectory), results/findings/*.parquet ----
    # F1: first-token (BOS) heads per layer; first-token = sel_first_token >= class threshold.
    "f1_bos_floor": {
        **CELL_KEY,
        "layer": pl.Int32,
        "n_first_token": pl.Int32,
        "n_heads": pl.Int32,
        "n_first_token_best_class": pl.Int32,
        # of n_first_token, those that also put >= key0_mass (Gu et al.'s eps, 0.3) of their attention on
        # key 0 at the probe's query (attn_first_token); null where the screen recorded no attention mass
        "n_first_token_key0": pl.Int32,
        "key0_mass": pl.Float64,  # that share of attention (findings.key0_mass)
        "max_sel_first_token": pl.Float64,  # the layer's largest first-token selectivity
    },
    # F1: per model, whether the floor layers (0, 1) have zero first-token heads at every revision.
    "f1_floor": {
        "model": pl.String,
        "n_revisions": pl.Int32,
        "max_first_token": pl.Int32,
        "floor_layers": pl.String,
        "floor_holds": pl.Boolean,
        "max_sel_first_token": pl.Float64,  # the largest first-token selectivity in those layers, any revision
    },
    # F2: whole-model first-token fraction (0-1) per revision.
    "f2_bos_fraction": {
        **CELL_KEY,
        "n_first_token": pl.Int32,
        "n_heads": pl.Int32,
        "n_first_token_best_class": pl.Int32,
        "n_first_token_key0": pl.Int32,  # of n_first_token, those with >= key0_mass of attention on key 0
        "bos_fraction": pl.Float64,
        "bos_fraction_best_class": pl.Float64,
    },
    # F2: per model, emergence shape of the first-token fraction.
    "f2_shape": {
        "model": pl.String,
        "n_revisions": pl.Int32,
        "first_fraction": pl.Float64,
        "final_fraction": pl.Float64,
        "max_fraction": pl.Float64,
        "largest_jump_pp": pl.Float64,
        "jump_from_revision": pl.String,
        "jump_to_revision": pl.String,
        "jump_from_tokens": pl.Int64,
        "jump_to_tokens": pl.Int64,
        "rise_pp": pl.Float64,
        "jump_share": pl.Float64,
        "monotone": pl.Boolean,
        "shape": pl.String,
    },
    # F2b: per model x layer, first revision with >= 1 first-token head and with >= 50% of its heads.
    "f2_layer_onset": {
        "model": pl.String,
        "layer": pl.Int32,
        "n_heads": pl.Int32,
        "first_revision": pl.String,
        "first_tokens": pl.Int64,
        "half_revision": pl.String,
        "half_tokens": pl.Int64,
    },
    # F2b: per model x onset kind (first, half), how the sink spreads through the layers.
    "f2_layer_spread": {
        "model": pl.String,
        "onset": pl.String,
        "n_layers_ranked": pl.Int32,
        "floor_layers": pl.String,
        "middle_layer": pl.Float64,
        "n_never": pl.Int32,
        "leading_layers": pl.String,
        "lead_tokens": pl.Int64,
        "next_tokens": pl.Int64,
        "lead_ratio": pl.Float64,
        "last_layers": pl.String,
        "never_layers": pl.String,
        "rho_middle": pl.Float64,
        "rho_depth": pl.Float64,
        "p_value": pl.Float64,  # omnibus (max-T) permutation p: rejects exchangeable onsets only
        "label": pl.String,
        "best_order": pl.String,  # highest-scoring order, whatever the label
        "runner_up": pl.String,
        "p_vs_runner_up": pl.Float64,  # largest paired-permutation p of best vs each alternative
        "pairwise": pl.String,  # "vs <order>: <score difference> (p = ...)" for each alternative
        "p_holm": pl.Float64,  # p_value, Holm-corrected within its family (findings.spread_families)
        "holm_family": pl.String,  # the family stated before the run (a model no family names: its own)
        "holm_m": pl.Int32,  # the family's stated size (its untested members count as p = 1)
    },
    # Induction circuit size and specialized-head fraction per revision.
    "circuit_size": {
        **CELL_KEY,
        "n_induction_circuit": pl.Int32,
        "n_induction_class_threshold": pl.Int32,
        "n_specialized": pl.Int32,
        "n_heads": pl.Int32,
        "specialized_fraction": pl.Float64,
    },
    # F3: first revision reaching each milestone (null if never).
    "f3_milestones": {
        "model": pl.String,
        "milestone": pl.String,
        "revision": pl.String,
        "tokens": pl.Int64,
        # checkpoint bracket: the crossing lies in (lo_tokens, tokens]; lo = last revision before
        "lo_revision": pl.String,
        "lo_tokens": pl.Int64,
        "left_censored": pl.Boolean,  # met at the first revision (no lower bracket)
        "right_censored": pl.Boolean,  # never reached (lo = the last revision)
        # persistence: the revisions after the first one reaching it where the milestone no longer holds,
        # in training order (empty: it held at every later revision, or was never met)
        "lapses": pl.List(pl.String),
    },
    # F3: token gap between two milestones, per model.
    "f3_gaps": {
        "model": pl.String,
        "later": pl.String,
        "earlier": pl.String,
        "later_revision": pl.String,
        "later_tokens": pl.Int64,
        "earlier_revision": pl.String,
        "earlier_tokens": pl.Int64,
        "gap_ratio": pl.Float64,
        "same_revision": pl.Boolean,
        # the brackets behind it (f3_milestones) and the gap's interval from them
        "later_lo_revision": pl.String,
        "later_lo_tokens": pl.Int64,
        "earlier_lo_revision": pl.String,
        "earlier_lo_tokens": pl.Int64,
        "later_left_censored": pl.Boolean,
        "later_right_censored": pl.Boolean,
        "earlier_left_censored": pl.Boolean,
        "earlier_right_censored": pl.Boolean,
        "gap_lo": pl.Float64,  # null: unbounded on that side
        "gap_hi": pl.Float64,
        "gap_bound": pl.String,  # interval | lower bound | upper bound | unknown
        "censored": pl.Boolean,  # bounded on one side only (a lower or an upper bound)
        # which came first as the brackets decide it (headtrace.findings.order): earlier first | later first |
        # undecided | absent; and what a decided order rests on: seen (both met) | censoring (the second
        # milestone never met by the last revision)
        "order": pl.String,
        "order_basis": pl.String,
        # what the row can say of the gap (headtrace.findings.trajectory.gap_case), the first that applies:
        # earlier never met (no gap) | later never met (gap_lo a lower bound) | earlier at first revision
        # (a lower bound at most) | same revision (the spacing does not separate them) | interval
        "gap_case": pl.String,
    },
    # F3 onset brackets after adaptive refinement (headtrace.panel.refine): per model x milestone, the
    # revisions just before (lo) and at (hi) the first revision reaching it, over all screened
    # revisions. onset_lo/hi_revision: bootstrap spread of the onset revision (null until computed).
    "f3_onsets": {
        "model": pl.String,
        "milestone": pl.String,
        "lo_revision": pl.String,
        "lo_tokens": pl.Int64,
        "hi_revision": pl.String,
        "hi_tokens": pl.Int64,
        "bracket_ratio": pl.Float64,
        "rounds": pl.Int32,
        "n_added": pl.Int32,
        "target_met": pl.Boolean,
        "stop": pl.String,
        # the bracket from the configured revisions alone (round 1's view; = the final one unrefined)
        "unrefined_lo_revision": pl.String,
        "unrefined_hi_revision": pl.String,
        "unrefined_ratio": pl.Float64,
        "onset_lo_revision": pl.String,
        "onset_hi_revision": pl.String,
    },
    # F3: bootstrap spread of each milestone's onset revision (null without per-sequence masses).
    "f3_onset_bootstrap": {
        "model": pl.String,
        "milestone": pl.String,
        "onset_lo_revision": pl.String,
        "onset_lo_tokens": pl.Int64,
        "onset_hi_revision": pl.String,
        "onset_hi_tokens": pl.Int64,
        "p_reached": pl.Float64,
        "n_resamples": pl.Int32,
        "interval": pl.Float64,
    },
    # F4: each model's final-revision induction circuit, one row per head (findings.trajectory.f4_final_circuit):
    # the final revision, the head's induction selectivity there and the circuit threshold it was held to
    "f4_final_circuit": {
        "model": pl.String,
        "layer": pl.Int32,
        "head": pl.Int32,
        "revision": pl.String,
        "tokens": pl.Int64,
        "sel_induction": pl.Float64,
        "induction_threshold": pl.Float64,
    },
    # F4: recall of the final-revision induction circuit at each revision.
    "f4_recall": {
        **CELL_KEY,
        "n_found": pl.Int32,
        "n_final_circuit": pl.Int32,
        "recall": pl.Float64,
    },
    # F4: first revision reaching each recall level.
    "f4_recall_milestones": _RECALL_MILESTONES,
    # F4, strict variant: the same, a head counting as found only at the circuit threshold (found_threshold =
    # induction_threshold), the second table of summary.md's Finding 4
    "f4_recall_milestones_strict": _RECALL_MILESTONES,
    # F5: PR rise vs induction-selectivity crossing, per final induction head.
    "f5_pr_lead": {
        "model": pl.String,
        "layer": pl.Int32,
        "head": pl.Int32,
        "pr_rise_revision": pl.String,
        "pr_rise_tokens": pl.Int64,
        "selectivity_cross_revision": pl.String,
        "selectivity_cross_tokens": pl.Int64,
        "lead_ratio": pl.Float64,
        "lead_revisions": pl.Int32,
        "rule": pl.String,
        # brackets (each event lies in (lo, revision]; lo null = left-censored) and the lead's interval
        "pr_rise_lo_revision": pl.String,
        "pr_rise_lo_tokens": pl.Int64,
        "selectivity_cross_lo_revision": pl.String,
        "selectivity_cross_lo_tokens": pl.Int64,
        "lead_lo": pl.Float64,
        "lead_hi": pl.Float64,
        # how close the rise rule's decision was (spectral_lead.pr_rise_detail)
        "rise_ratio": pl.Float64,
        "max_prior_ratio": pl.Float64,
        "rise_margin": pl.Float64,
    },
    # PR integral per head (paper's and author's definitions) and ranks within the model.
    "pr_integral": {
        "model": pl.String,
        "layer": pl.Int32,
        "head": pl.Int32,
        "n_revisions": pl.Int32,
        "integral_paper": pl.Float64,
        "integral_author": pl.Float64,
        "rank_paper": pl.Int32,
        "rank_author": pl.Int32,
    },
    # The strongest head of each class per revision (headtrace.findings.strongest): its selectivity,
    # the class's threshold (induction: the circuit threshold; others: the class threshold), reached or not.
    "strongest_head": {
        **CELL_KEY,
        "class": pl.String,
        "layer": pl.Int32,
        "head": pl.Int32,
        "selectivity": pl.Float64,
        "threshold": pl.Float64,
        "reached": pl.Boolean,
    },
    # Per model and class, how the strongest head's selectivity moved over the revisions: first, last,
    # peak, the first revision where it reached the threshold (null: never), last / first and the trend
    # (rising | flat | falling | one_revision, at findings.trend_factor).
    "strongest_trend": {
        "model": pl.String,
        "class": pl.String,
        "threshold": pl.Float64,
        "n_revisions": pl.Int32,
        "first_revision": pl.String,
        "first_tokens": pl.Int64,
        "first_head": pl.String,
        "first_selectivity": pl.Float64,
        "last_revision": pl.String,
        "last_tokens": pl.Int64,
        "last_head": pl.String,
        "last_selectivity": pl.Float64,
        "peak_revision": pl.String,
        "peak_head": pl.String,
        "peak_selectivity": pl.Float64,
        "reached_revision": pl.String,
        "reached_tokens": pl.Int64,
        "reached_last": pl.Boolean,
        "ratio": pl.Float64,
        "trend": pl.String,
        "trend_factor": pl.Float64,
    },
    # The screen's check of its circuits (headtrace.cell.positional): every induction-circuit head of every
    # revision with a positional table, its induction peak share (the largest share of its induction mass from
    # the probe sequences of one A position) and the flag the cell's positional table decided (positional:
    # it attends to a fixed offset); models without per-sequence masses (the published panel) have no rows.
    "circuit_positional": {
        **CELL_KEY,
        "layer": pl.Int32,
        "head": pl.Int32,
        "induction_peak_share": pl.Float64,
        "induction_peak_ab": pl.Int32,
        "uniform_peak_share": pl.Float64,
        "positional_induction": pl.Boolean,
    },
    # ---- method experiments (headtrace.experiments), results/experiments/*.parquet ----
    # Seed specificity: seed i's final induction circuit ablated in seed j's final model, every model seed's
    # rows together (the cross_seed_table job), with the whole table's call decided once
    # (experiments.seeds.seed_specificity), the pages only word it
    "cross_seed_ablation": {
        **_CROSS_SEED,
        # no_circuit | undecidable (no reference draws for the own or the foreign circuits) | specific (mean
        # cross-seed Jaccard < 1 and the foreign circuits' mean excess drop < specificity_factor x the own
        # ones') | not_specific
        "seed_specificity": pl.String,
        "specificity_factor": pl.Float64,
    },
    # one model seed's rows (results/experiments/cross_seed/{model}.parquet, experiments.seeds.cross_seed_table)
    "cross_seed_model": _CROSS_SEED,
    # Data shift: induction circuit per revision before (base model) and after (continued) the shift.
    "data_shift": {
        **CELL_KEY,
        "phase": pl.String,
        "circuit": pl.List(pl.String),
        "jaccard_to_pre_shift": pl.Float64,
        # the within-layer permutation null (headtrace.findings.agreement): its mean Jaccard to the
        # pre-shift circuit, and P(Jaccard >= this one) by placement within the layers alone
        "jaccard_chance": pl.Float64,
        "jaccard_p_value": pl.Float64,
        # the behaviour beside the heads (null without ablation): the unablated top-1 on B with its 95%
        # Wilson interval, and after ablating the induction / previous-token circuit (experiments.data_shift)
        "baseline_top1": pl.Float64,
        "baseline_top1_lo": pl.Float64,
        "baseline_top1_hi": pl.Float64,
        "circuit_ablated_top1": pl.Float64,
        "previous_token_ablated_top1": pl.Float64,
        # what survives the shift, decided here (experiments.data_shift.survival_columns), the pages only word it:
        "induction_threshold": pl.Float64,  # the screen's circuit threshold the selectivity decision used
        "heads_kept": pl.Boolean,  # the pre-shift circuit's heads, the same (Jaccard 1); null: no pre-shift circuit
        # the within-layer null gives this overlap: jaccard_p_value > the package's alpha (null: no null)
        "heads_overlap_by_chance": pl.Boolean,
        # the pre-shift heads' mean induction selectivity >= induction_threshold (null: not measured, no circuit)
        "selectivity_kept": pl.Boolean,
        # the unablated top-1 against the last pre-shift revision's: fell | rose (the Wilson intervals apart) |
        # overlap (no change shown); null before the shift or without top-1
        "behaviour_change": pl.String,
        # ablating the induction / previous-token circuit raised top-1 (its top-1 effect interval wholly
        # below zero); null: not ablated at this revision
        "circuit_raises_top1": pl.Boolean,
        "previous_token_raises_top1": pl.Boolean,
    },
    # Composition: previous-token-circuit ablation vs its matched-random control per revision.
    "composition": {
        **CELL_KEY,
        "n_heads": pl.Int32,
        "baseline_top1": pl.Float64,
        "ablated_top1": pl.Float64,
        "random_top1_mean": pl.Float64,
        "p_value": pl.Float64,
        "verdict": pl.String,  # the previous-token circuit's three-way verdict
        "chance_top1": pl.Float64,  # 1 / number of distinct probe tokens
        "n_sequences": pl.Int32,  # probe sequences behind the rates below
        "baseline_top1_lo": pl.Float64,  # Wilson 95% interval of baseline top-1
        "baseline_top1_hi": pl.Float64,
        # measured copying null (experiments.composition): the unablated model's top-1 is the
        # sequence's shuffled-B control token, with its Wilson 95% interval
        "copy_null_top1": pl.Float64,
        "copy_null_lo": pl.Float64,
        "copy_null_hi": pl.Float64,
        "copy_other_top1": pl.Float64,  # top-1 is some context token other than B
        "copy_null_p": pl.Float64,  # exact one-sided sign test, B against the control
        "above_copy_null": pl.Boolean,  # copy_null_p <= alpha (null: no copy metrics recorded)
        # baseline top-1 >= min_baseline_ratio x chance, and above the copying null where measured
        "induction_present": pl.Boolean,
        "destroys_induction": pl.Boolean,
        "onset_revision": pl.String,
        "onset_tokens": pl.Int64,
    },
    # Noise floor: heads above the null's quantile per class (class "any": specialized fraction).
    "noise_floor": {
        **CELL_KEY,
        "class": pl.String,
        "floor": pl.Float64,
        "n_above": pl.Int32,
        "fraction_above": pl.Float64,
        # recorded and decided here (experiments.noise_floor.init_null_columns), the pages only word them, on
        # every row: the floors' quantile, the class threshold of n_classified, the init null's median floor
        # over every model and class (null: no init null) and whether it lies below narrow_below (x): narrow
        "quantile": pl.Float64,
        "class_threshold": pl.Float64,
        "init_floor_median": pl.Float64,
        "narrow_below": pl.Float64,
        "init_null_narrow": pl.Boolean,
    },
    # The noise floors themselves: per model, class and null (init, shuffled, combined).
    "noise_floor_null": {
        "model": pl.String,
        "class": pl.String,
        "null": pl.String,
        "floor": pl.Float64,
        "n_samples": pl.Int32,
    },
    # results/models/{model}/lineage.parquet: one row per revision whose cell wrote a fingerprint
    # (headtrace.findings.lineage): what it shares with other revisions, its distance from the model's
    # earliest and previous revision (relative to the weights' scale, sqrt(2) = independent) and flags.
    "lineage": {
        **CELL_KEY,
        "order": pl.Int32,  # position in training order (0 = earliest)
        "reference": pl.String,  # the earliest revision that is no duplicate: dist_from_first's origin
        "previous": pl.String,  # the previous revision that is no duplicate
        "shares": pl.List(pl.String),  # revisions sharing a weight file, shard or matrix with this one
        "duplicate_of": pl.List(pl.String),  # the other revisions whose every file or tensor equals this one's
        "shares_shard_with": pl.List(pl.String),  # later revisions whose shard/matrices this one serves
        "dist_from_first": pl.Float64,  # ||r - reference|| / rms(||r||, ||reference||), matrices only
        "dist_from_previous": pl.Float64,
        "cos_from_first": pl.Float64,  # per-matrix cosine to the reference (0: independent)
        "cos_sd": pl.Float64,  # the null's SD: the cosine's sketch noise were the two independent
        "detour": pl.Float64,  # (d(prev, r) + d(r, next)) / d(prev, next); null at the ends
        "n_matrices": pl.Int32,  # matrices compared with the reference
        # how it descends from the reference: reference, direct (its cosine passes the descent test),
        # chain (it fails it, but a predecessor that descends passes against it: drifted far, step by
        # step) or none (flag not_descended_from_init)
        "descent": pl.String,
        "reference_is_init": pl.Boolean,  # the reference is step 0 (else the descent test cannot see #203)
        "weights_digest": pl.String,  # sha256 over the sorted tensor digests: equal weights in any model
        "continues": pl.String,  # the model whose last checkpoint the config declares this run starts from
        # whether the run has a step 0 the panel could add (the config: a toy trains one; a single checkpoint
        # has none); null: not known (a hub or local run may or may not publish its init)
        "init_published": pl.Boolean,
        "flags": pl.List(pl.String),  # duplicate_of, shares_shard_with, not_descended_from_init, discontinuous
        "detail": pl.String,  # the evidence, in words
    },
    # Seed groups (headtrace.findings.groups; results/groups/{group}/{name}.parquet): a group's
    # statistics over its members' own findings; n_used = the members a statistic rests on.
    "group_summary": {
        "group": pl.String,
        "n_members": pl.Int32,
        "n_present": pl.Int32,  # members with findings (a trajectory)
        "floor_n_used": pl.Int32,
        "floor_n_held": pl.Int32,  # F1: the zero-BOS floor held in this many of floor_n_used
        "floor_n_vacuous": pl.Int32,  # of those, held with no first-token head anywhere (nothing tested)
        "shape_n_used": pl.Int32,
        "shape_modal": pl.String,  # F2: the commonest shape label (a tie: the first alphabetically, shape_tied)
        "shape_n_agree": pl.Int32,
        "shape_tied": pl.Boolean,
        "circuit_n_used": pl.Int32,  # members with a final circuit (a trajectory)
        "jaccard_n_pairs": pl.Int32,  # member pairs with a Jaccard (not both circuits empty)
        "jaccard_median": pl.Float64,
        "jaccard_min": pl.Float64,
        "jaccard_max": pl.Float64,
        # the pairs' mean Jaccard under the within-layer permutation null (docs/statistics.md), their median
        "jaccard_chance_median": pl.Float64,
        "jaccard_n_beyond_chance": pl.Int32,  # pairs whose overlap is beyond chance (P <= 0.05)
        "n_distinct_heads": pl.Int32,  # distinct (layer, head) in any member's final circuit
        "n_recurring_heads": pl.Int32,  # of those, in more than one member's
        "n_recurring_forced": pl.Int32,  # the fewest the circuits' sizes force to recur (null: layer sizes unknown)
        "recurring_share": pl.Float64,
    },
    "group_members": {
        "group": pl.String,
        "member": pl.String,
        "seed": pl.Int64,
        "present": pl.Boolean,
        "n_revisions": pl.Int32,
        "final_revision": pl.String,
        "final_tokens": pl.Int64,
        "floor_holds": pl.Boolean,
        "max_first_token_heads": pl.Int32,  # the most first-token heads at any revision (0: nothing for F1/F2 to test)
        "shape": pl.String,
        "jump_share": pl.Float64,
        "circuit": pl.List(pl.String),  # the final induction circuit, LxHy
        "n_circuit": pl.Int32,
    },
    "group_milestones": {
        "group": pl.String,
        "milestone": pl.String,
        "n_members": pl.Int32,
        "n_used": pl.Int32,  # members with a bracket for the milestone
        "n_reached": pl.Int32,
        "n_left_censored": pl.Int32,
        "n_right_censored": pl.Int32,
        "median_lo": pl.Float64,  # the median onset (tokens) lies in [median_lo, median_hi]; null: unbounded
        "median_hi": pl.Float64,
        "range_lo": pl.Float64,  # the earliest lower end
        "range_hi": pl.Float64,  # the latest upper end (null: a member never reached it)
    },
    "group_member_milestones": {
        "group": pl.String,
        "member": pl.String,
        "seed": pl.Int64,
        "milestone": pl.String,
        "present": pl.Boolean,
        "revision": pl.String,
        "tokens": pl.Int64,
        "lo_revision": pl.String,
        "lo_tokens": pl.Int64,
        "left_censored": pl.Boolean,
        "right_censored": pl.Boolean,
        "onset_lo": pl.Float64,  # the crossing lies in (onset_lo, onset_hi]; 0 when left-censored
        "onset_hi": pl.Float64,  # null when right-censored
    },
    "group_gaps": {
        "group": pl.String,
        "later": pl.String,
        "earlier": pl.String,
        "n_members": pl.Int32,
        "n_decided": pl.Int32,  # members whose brackets order the two milestones
        "n_earlier_first": pl.Int32,
        "n_later_first": pl.Int32,
        "n_undecided": pl.Int32,
        "n_absent": pl.Int32,
        "n_by_censoring": pl.Int32,  # decided orders resting on censoring alone (the second milestone never met)
        "p_sign": pl.Float64,  # exact two-sided binomial p of the orders seen (n_decided - n_by_censoring) against 50%
        "n_gap": pl.Int32,  # members whose gap has a bound
        "median_gap_lo": pl.Float64,
        "median_gap_hi": pl.Float64,
        "smallest_gap_lo": pl.Float64,
        "smallest_gap_hi": pl.Float64,
        "largest_gap_lo": pl.Float64,
        "largest_gap_hi": pl.Float64,
    },
    "group_member_gaps": {
        "group": pl.String,
        "member": pl.String,
        "seed": pl.Int64,
        "later": pl.String,
        "earlier": pl.String,
        "present": pl.Boolean,
        "gap_ratio": pl.Float64,
        "gap_lo": pl.Float64,
        "gap_hi": pl.Float64,
        "gap_bound": pl.String,
        "order": pl.String,  # earlier first, later first, undecided, absent
        "order_basis": pl.String,  # seen | censoring (the second milestone never met) | null (undecided)
    },
    "group_recall": {
        "group": pl.String,
        "member": pl.String,
        "seed": pl.Int64,
        "level_label": pl.String,
        "present": pl.Boolean,
        "revision": pl.String,
        "tokens": pl.Int64,
        "token_share": pl.Float64,
    },
    "group_recall_levels": {
        "group": pl.String,
        "level_label": pl.String,
        "n_members": pl.Int32,
        "n_used": pl.Int32,
        "n_reached": pl.Int32,
        "share_median": pl.Float64,
        "share_min": pl.Float64,
        "share_max": pl.Float64,
    },
    "group_jaccard": {
        "group": pl.String,
        "member_a": pl.String,
        "member_b": pl.String,
        "jaccard": pl.Float64,
        "n_shared": pl.Int32,
        "n_a": pl.Int32,
        "n_b": pl.Int32,
        # the within-layer permutation null (headtrace.findings.agreement): its mean Jaccard, and
        # P(Jaccard >= this one) when each circuit's heads are placed at random within their layers
        "jaccard_chance": pl.Float64,
        "p_value": pl.Float64,
        "beyond_chance": pl.Boolean,  # p_value <= 0.05; false: no more than chance
    },
}

# results/findings/lineage_panel.parquet (the findings job; headtrace.findings.lineage_panel.panel_table):
# every model's lineage rows read together, which the lineage job (one model) cannot: flags gains
# same_weights_as (the same weights as another model's revision, undeclared) and start_not_declared (a
# continuation whose first revision is not its declared parent's last), detail their evidence.
FINDINGS_SCHEMAS["lineage_panel"] = {
    **FINDINGS_SCHEMAS["lineage"],
    "same_weights_as": pl.List(pl.String),  # "model revision" of every revision of another model with these weights
    "declared_same": pl.List(pl.String),  # those of them the config declares (a continuation's start): count once
}
