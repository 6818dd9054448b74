"""Every Parquet table headtrace writes: its schema, and one atomic writer.

The schemas below are the output contract documented in docs/outputs.md (same names, same order).
Tables are long format: one row per model x revision x layer x head (or x condition, ...).
Writers may add columns beyond the schema; the schema's columns must be present with these dtypes.

Length: over 400 lines by design - every output schema lives here, in one place, so docs/outputs.md's
schema section and every writer read the same contract.
"""
from __future__ import annotations

import os

import numpy as np
import polars as pl
from safetensors.numpy import load_file, save_file

from headtrace.core import durable
from headtrace.core.heads import head_name  # noqa: F401  (re-exported: tables name heads)
from headtrace.core.probe import CLASSES

CLASS_COLUMNS = [c.replace("-", "_") for c in CLASSES]  # induction, duplicate_token, ...

CELL_KEY = {"model": pl.String, "revision": pl.String, "tokens": pl.Int64}
HEAD_KEY = {**CELL_KEY, "layer": pl.Int32, "head": pl.Int32}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    # results/probes/{model}/induction_batch.parquet
    "probe": {
        "seq": pl.Int32,
        "tokens": pl.List(pl.Int64),
        "ab": pl.Int32,
        "target": pl.Int64,
        "valid": pl.Boolean,
    },
    # results/cells/{model}/{revision}/attention.parquet: the capture pass's attention masses.
    "attention": {
        **HEAD_KEY,
        **{f"attn_{c}": pl.Float64 for c in CLASS_COLUMNS},
        "attn_baseline_sampled": pl.Float64,
        "attn_baseline_uniform": pl.Float64,
        "attn_baseline_clean": pl.Float64,  # per sequence: mean over keys of no class (cell.screen)
        "n_sequences": pl.Int32,
        "n_valid": pl.Int32,
    },
    # results/cells/{model}/{revision}/pr.parquet
    "pr": {**HEAD_KEY, "pr": pl.Float64},
    # results/cells/{model}/{revision}/screen.parquet
    "screen": {
        **HEAD_KEY,
        **{f"sel_{c}": pl.Float64 for c in CLASS_COLUMNS},
        **{f"attn_{c}": pl.Float64 for c in CLASS_COLUMNS},
        "attn_baseline": pl.Float64,
        "best_class": pl.String,
        "best_selectivity": pl.Float64,
        "classification": pl.String,
        "in_induction_circuit": pl.Boolean,
    },
    # results/cells/{model}/{revision}/bootstrap.parquet: bootstrap over the probe sequences
    # (headtrace.cell.bootstrap), per head x class: CI of the selectivity and pass probabilities.
    "bootstrap": {
        **HEAD_KEY,
        "class": pl.String,
        "sel_lo": pl.Float64,
        "sel_hi": pl.Float64,
        "p_above": pl.Float64,
        "p_classified": pl.Float64,
        "p_circuit": pl.Float64,
        "n_resamples": pl.Int32,
        "interval": pl.Float64,
    },
    # results/cells/{model}/{revision}/positional.parquet: per head, how much of its induction
    # (duplicate-token) mass comes from the probe sequences of one A position (headtrace.cell.positional).
    "positional": {
        **HEAD_KEY,
        "induction_peak_share": pl.Float64,
        "induction_peak_ab": pl.Int32,
        "duplicate_token_peak_share": pl.Float64,
        "duplicate_token_peak_ab": pl.Int32,
        "uniform_peak_share": pl.Float64,
        "n_ab": pl.Int32,
        "positional_induction": pl.Boolean,
    },
    # results/cells/{model}/{revision}/measures.parquet: the field's own measures per probe and head
    # (headtrace.cell.patterns, docs/measures.md): Gu et al.'s sink alpha, averaged over the sequences and
    # per sequence (the published sink rate thresholds each sequence's), Olsson et al.'s prefix-matching
    # score (null: the probe has no repeats), Elhage et al.'s copying score of the head's OV circuit
    # (weights only; equal on every probe).
    "measures": {
        **HEAD_KEY,
        "probe": pl.String,
        "sink_alpha": pl.Float64,
        "sink_alpha_per_sequence": pl.List(pl.Float64),  # n_sequences values, in probe order
        "prefix_matching": pl.Float64,
        "copying": pl.Float64,
        "n_sequences": pl.Int32,
        "seq_len": pl.Int32,
    },
    # results/findings/measures/measures_over_training.parquet (headtrace.findings.measures): per model x
    # revision x sink threshold, the field's measures beside the paper's synthetic ones.
    "measures_over_training": {
        **CELL_KEY,
        "eps": pl.Float64,
        # Gu et al.'s sink rate on the text probe (null: no text probe), as their released code computes it:
        # each sequence's alpha thresholded, the indicator averaged over sequences, layers and heads
        "text_sink_rate": pl.Float64,
        # the other reading: the heads' alpha averaged over the sequences first, then thresholded
        "text_sink_rate_of_mean_alpha": pl.Float64,
        "repeated_sink_rate": pl.Float64,  # the published reading on the repeated-random probe
        "repeated_sink_rate_of_mean_alpha": pl.Float64,
        "n_prefix_heads": pl.Int32,  # prefix-matching score > measures.prefix_threshold
        "n_heads": pl.Int32,
        "first_token_fraction": pl.Float64,  # the paper's F2 (synthetic probe)
        "n_induction_circuit": pl.Int32,
        "n_top_prefix": pl.Int32,  # the top prefix-matching heads compared: as many as the circuit has
        "jaccard_circuit_prefix": pl.Float64,
        # the within-layer permutation null of the two sets (headtrace.findings.agreement): its mean
        # Jaccard, and P(Jaccard >= this one) by placement within the layers alone
        "jaccard_chance": pl.Float64,
        "jaccard_p_value": pl.Float64,
    },
    # results/findings/measures/measures_comparison.parquet: per model, each comparison as a number with
    # its uncertainty (lo/hi: its interval or bounds; the uncertainty column says which).
    "measures_comparison": {
        "model": pl.String,
        "measure": pl.String,
        "value": pl.Float64,
        "lo": pl.Float64,
        "hi": pl.Float64,
        "p_value": pl.Float64,
        "n": pl.Int32,
        "uncertainty": pl.String,
    },
    # results/probes/{model}/text_batch.parquet: the text probe, built once per model and tokenizer
    # (headtrace.models.tokenize): its sequences as fed, the file(s) and the tokenizer they came from.
    "text_probe": {
        "seq": pl.Int32,
        "tokens": pl.List(pl.Int64),
        "file": pl.String,
        "tokenizer": pl.String,
        "tokenizer_sha256": pl.String,
        "n_documents": pl.Int32,
    },
    # results/cells/{model}/{revision}/bootstrap_milestones.parquet: per resample, the counts the
    # F3 milestones read (same resample index = same draw of sequences at every revision).
    "bootstrap_milestones": {
        **CELL_KEY,
        "resample": pl.Int32,
        "n_induction_circuit": pl.Int32,
        "n_first_token": pl.Int32,
        "n_heads": pl.Int32,
    },
    # results/models/{model}/trajectory.parquet: every revision x head, screen joined with PR.
    "trajectory": {
        **HEAD_KEY,
        "pr": pl.Float64,
        **{f"sel_{c}": pl.Float64 for c in CLASS_COLUMNS},
        "best_class": pl.String,
        "best_selectivity": pl.Float64,
        "classification": pl.String,
        "in_induction_circuit": pl.Boolean,
    },
    # results/cells/{model}/{revision}/ablation.parquet
    "ablation": {
        **CELL_KEY,
        "condition": pl.String,
        "draw": pl.Int32,
        "n_heads": pl.Int32,
        "heads": pl.List(pl.String),
        "top1": pl.Float64,
        "top5": pl.Float64,
        "ce": pl.Float64,
        "logit_b": pl.Float64,
        # the top-1 is the sequence's shuffled-B control token / another token of its context
        # (headtrace.causal.ablation; null in the published ablation files, which do not record them)
        "top1_control": pl.Float64,
        "top1_context": pl.Float64,
        "n_sequences": pl.Int32,
        # control rows: size of the matched set space they come from (headtrace.causal.conditions); else null
        "n_matched_sets": pl.Int64,
        # seeded bootstrap over probe sequences (headtrace.causal.verdict): the condition's mean and its
        # paired effect against the baseline (positive = hurts), null where not computed
        **{f"{m}{s}": pl.Float64 for m in ("top1", "logit_b", "ce") for s in ("_lo", "_hi", "_effect_lo", "_effect_hi")},
        # which probe sequences the ablation ran on (config ablation.probe; headtrace.api.ablation_probe):
        # held_out | same, the seed of that draw, SHA-256 of its token ids (probe.tokens_sha256) and the
        # draws skipped as duplicates of a screen sequence (held_out); null in the published ablations
        "ablation_probe": pl.String,
        "ablation_probe_seed": pl.Int64,
        "ablation_probe_sha256": pl.String,
        "ablation_probe_redrawn": pl.Int32,
    },
    # results/cells/{model}/{revision}/verdict.parquet (rule: headtrace.causal.verdict)
    "verdict": {
        **CELL_KEY,
        "circuit": pl.String,
        "n_heads": pl.Int32,
        "heads": pl.List(pl.String),
        "baseline_top1": pl.Float64,
        "ablated_top1": pl.Float64,
        "effect": pl.Float64,
        "random_effect_mean": pl.Float64,
        "effect_vs_random": pl.Float64,
        "p_value": pl.Float64,
        "upper_bound_top1": pl.Float64,
        "upper_bound_saturates": pl.Boolean,  # on the decision metric (null: logit_b / ce have no floor)
        "causal": pl.Boolean,
        "verdict": pl.String,  # causal | not_causal | underpowered | untested
        "metric": pl.String,  # decision metric (ablation.metric); effect/baseline_value/ablated_value use it
        "baseline_value": pl.Float64,
        "ablated_value": pl.Float64,
        "effect_lo": pl.Float64,  # bootstrap interval of effect (paired over probe sequences)
        "effect_hi": pl.Float64,
        "min_p": pl.Float64,  # smallest p the control allows: 1 / (1 + n_distinct_draws)
        "n_matched_sets": pl.Int64,  # size of the matched set space (null: not recorded)
        "control_exact": pl.Boolean,  # every set of the space evaluated (null: space size not recorded)
        "control": pl.String,  # the matched control used (null: none)
        "upper_bound": pl.String,  # the upper-bound condition used (null: none; upper_bound_top1 = baseline)
        "n_random": pl.Int32,
        "n_distinct_draws": pl.Int32,
        "random_top1_mean": pl.Float64,
        "class_control": pl.String,  # class-matched control (sink heads excluded), null when off
        "class_p_value": pl.Float64,
        "class_random_effect_mean": pl.Float64,
        "n_class_matched_sets": pl.Int64,
        "underpowered_reason": pl.String,  # why the test cannot decide (null unless underpowered)
        "not_causal_reason": pl.String,  # the causal criteria a non-empty not_causal circuit missed
        "control_sizes_match": pl.Boolean,  # the control's sets have the circuit's per-layer sizes
        "n_sequences": pl.Int32,  # probe sequences the ablation ran on
        # unablated model: share of sequences whose top-1 is the shuffled-B control token / another
        # context token (the ablation table's baseline row; null where not recorded)
        "baseline_top1_control": pl.Float64,
        "baseline_top1_context": pl.Float64,
        # which probe sequences the ablation ran on: the ablation table's columns of that name
        "ablation_probe": pl.String,
        "ablation_probe_seed": pl.Int64,
        "ablation_probe_sha256": pl.String,
        "ablation_probe_redrawn": pl.Int32,
        # the upper bound (the circuit's whole layers ablated) on the decision metric: its value,
        # its effect, and the circuit's share of it (effect / upper_bound_effect; null without one)
        "upper_bound_value": pl.Float64,
        "upper_bound_effect": pl.Float64,
        "upper_bound_share": pl.Float64,
        # why the requested decision metric (top-1) could not decide: its baseline at the floor (fewer than
        # ablation.min_baseline_hits sequences hit); null when it decided (headtrace.causal.verdict, the floor rule)
        "floor_reason": pl.String,
    },
    # results/cells/{model}/{revision}/provenance.parquet: the weights the cell ran (headtrace.models.provenance).
    "provenance": {
        **CELL_KEY,
        "source": pl.String,
        "hf_id": pl.String,
        "commit": pl.String,
        "weights_sha256": pl.String,
        "weight_files": pl.List(pl.String),
        "weight_bytes": pl.Int64,
        "weights_format": pl.String,  # safetensors | pickle | gguf (headtrace.models.weights)
        # gguf: the tensor types the file stores (F32, Q4_1, ...) and the safetensors copy the cell ran
        # (headtrace.models.dequantize); null for other formats
        "quantization": pl.List(pl.String),
        "dequantized_copy": pl.String,
    },
    # results/cells/{model}/{revision}/fingerprint.parquet: one row per weight file and one per stored
    # tensor (headtrace.models.fingerprint): sha256 of the file / of the tensor's dtype, shape and
    # bytes; per tensor its float64 L2 norm and a 64-bucket CountSketch (null for files).
    "fingerprint": {
        "model": pl.String,
        "revision": pl.String,
        "kind": pl.String,  # file | tensor
        "name": pl.String,  # the file name, or the tensor's key as stored
        "file": pl.String,  # the file holding it (= name for file rows)
        "format": pl.String,  # safetensors | pickle
        "sha256": pl.String,
        "dtype": pl.String,
        "shape": pl.List(pl.Int64),
        "numel": pl.Int64,
        "norm": pl.Float64,
        "sketch": pl.List(pl.Float64),
    },
    # ---- findings (headtrace.findings.trajectory), results/findings/*.parquet ----
    # F1: first-token (BOS) heads per layer; first-token = sel_first_token >= class threshold.
    "f1_bos_floor": {
        **CELL_KEY,
        "layer": pl.Int32,
        "n_first_token": pl.Int32,
        "n_heads": pl.Int32,
        "n_first_token_best_class": pl.Int32,
    },
    # F1: per model, whether the floor layers (0, 1) have zero first-token heads at every revision.
    "f1_floor": {
        "model": pl.String,
        "n_revisions": pl.Int32,
        "max_first_token": pl.Int32,
        "floor_layers": pl.String,
        "floor_holds": pl.Boolean,
    },
    # F2: whole-model first-token fraction (0-1) per revision.
    "f2_bos_fraction": {
        **CELL_KEY,
        "n_first_token": pl.Int32,
        "n_heads": pl.Int32,
        "n_first_token_best_class": pl.Int32,
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
        "p_holm": pl.Float64,  # p_value, Holm-corrected over every spread test of the run
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
    # F4: recall of the final-revision induction circuit at each revision.
    "f4_recall": {
        **CELL_KEY,
        "n_found": pl.Int32,
        "n_final_circuit": pl.Int32,
        "recall": pl.Float64,
    },
    # F4: first revision reaching each recall level.
    "f4_recall_milestones": {
        "model": pl.String,
        "level": pl.Float64,
        "level_label": pl.String,
        "revision": pl.String,
        "tokens": pl.Int64,
        "final_tokens": pl.Int64,
        "token_share": pl.Float64,
    },
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
    # ---- method experiments (headtrace.experiments), results/experiments/*.parquet ----
    # Seed specificity: seed i's final induction circuit ablated in seed j's final model.
    "cross_seed_ablation": {
        "circuit_seed": pl.Int64,
        "model_seed": pl.Int64,
        "top1_drop": pl.Float64,
        "top1_drop_vs_random": pl.Float64,
        "jaccard": pl.Float64,
        "n_candidates": pl.Int64,
    },
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
        "duplicate_of": pl.String,  # every file or tensor equals this revision's (flag duplicate_of)
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
        "p_sign": pl.Float64,  # exact two-sided binomial p of n_earlier_first of n_decided against 50%
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


def head_key_columns(model: str, revision: str, tokens: int | None, n_layers: int, n_heads: int) -> dict:
    """The ``HEAD_KEY`` columns of a per-head table, one row per (layer, head) in row-major order
    (layer-major, as ``array.ravel()`` of an (n_layers, n_heads) array); ``tokens`` null when unknown."""
    n_rows = n_layers * n_heads
    return {
        "model": [model] * n_rows,
        "revision": [revision] * n_rows,
        "tokens": pl.Series([tokens] * n_rows, dtype=pl.Int64),
        "layer": np.repeat(np.arange(n_layers, dtype=np.int32), n_heads),
        "head": np.tile(np.arange(n_heads, dtype=np.int32), n_layers),
    }


def conform(df: pl.DataFrame, schema: str) -> pl.DataFrame:
    """Check that ``df`` carries the schema's columns, cast them to its dtypes, schema columns first."""
    spec = SCHEMAS[schema]
    missing = [c for c in spec if c not in df.columns]
    if missing:
        raise ValueError(f"table '{schema}' is missing columns {missing}")
    extra = [c for c in df.columns if c not in spec]
    return df.select([pl.col(c).cast(t, strict=True) for c, t in spec.items()] + extra)


def write(df: pl.DataFrame, path: str | os.PathLike, schema: str | None = None) -> None:
    """Write ``df`` to ``path`` atomically and durably (temporary file in the same folder, fsync,
    rename, fsync of the folder: :func:`headtrace.core.durable.atomic_path`)."""
    if schema is not None:
        df = conform(df, schema)
    with durable.atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=True)


def read(path: str | os.PathLike) -> pl.DataFrame:
    return pl.read_parquet(path)


def read_many(paths) -> pl.DataFrame:
    """Concatenate tables of one schema (e.g. every cell of a model)."""
    frames = [pl.read_parquet(p) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


# Where each table lives (docs/outputs.md is generated from this and SCHEMAS).
LOCATIONS: dict[str, str] = {
    "probe": "results/probes/{model}/induction_batch.parquet",
    "attention": "results/cells/{model}/{revision}/attention.parquet",
    "pr": "results/cells/{model}/{revision}/pr.parquet",
    "screen": "results/cells/{model}/{revision}/screen.parquet",
    "ablation": "results/cells/{model}/{revision}/ablation.parquet",
    "verdict": "results/cells/{model}/{revision}/verdict.parquet",
    "provenance": "results/cells/{model}/{revision}/provenance.parquet",
    "fingerprint": "results/cells/{model}/{revision}/fingerprint.parquet",
    "trajectory": "results/models/{model}/trajectory.parquet",
    "lineage": "results/models/{model}/lineage.parquet",
    "bootstrap": "results/cells/{model}/{revision}/bootstrap.parquet",
    "bootstrap_milestones": "results/cells/{model}/{revision}/bootstrap_milestones.parquet",
    "positional": "results/cells/{model}/{revision}/positional.parquet",
    "measures": "results/cells/{model}/{revision}/measures.parquet",
    "text_probe": "results/probes/{model}/text_batch.parquet",
    "measures_over_training": "results/findings/measures/measures_over_training.parquet",
    "measures_comparison": "results/findings/measures/measures_comparison.parquet",
}


def markdown() -> str:
    """The output-schema section of docs/outputs.md: one line per table, columns with dtypes, in schema order."""
    lines = []
    for name, spec in SCHEMAS.items():
        where = LOCATIONS.get(name, f"results/groups/{{group}}/{name}.parquet" if name.startswith("group_")
                              else f"results/findings/{name}.parquet")
        if name not in LOCATIONS and name not in _FINDINGS_TABLES and not name.startswith("group_"):
            where = f"results/experiments/{name}.parquet"
        cols = ", ".join(f"`{c}` {_dtype_name(t)}" for c, t in spec.items())
        lines.append(f"- **`{where}`** — {cols}")
    return "\n".join(lines)


_FINDINGS_TABLES = {
    "f1_bos_floor", "f1_floor", "f2_bos_fraction", "f2_shape", "f2_layer_onset", "f2_layer_spread",
    "circuit_size", "f3_milestones", "f3_onset_bootstrap",
    "f3_gaps", "f3_onsets", "f4_recall", "f4_recall_milestones", "f5_pr_lead", "pr_integral",
}


def _dtype_name(dtype) -> str:
    return {pl.String: "str", pl.Int64: "i64", pl.Int32: "i32", pl.Float64: "f64", pl.Boolean: "bool"}.get(
        dtype, str(dtype).replace("List(String)", "list[str]").replace("List(Int64)", "list[i64]")
        .replace("List(Float64)", "list[f64]")
    )


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write a text file (summary.md) atomically and durably, like ``write``."""
    durable.write_text(text, path)


ARRAY_KEY = "head_outputs"


def write_array(array, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write one float32 array to a safetensors file atomically (the per-head outputs)."""

    with durable.atomic_path(path) as tmp:
        save_file({ARRAY_KEY: np.ascontiguousarray(array, dtype=np.float32)}, tmp, metadata=metadata)


def read_array(path: str | os.PathLike):

    return load_file(str(path))[ARRAY_KEY]
