"""The schemas of one cell's tables and of the per-model trajectory built from them: probes,
attention, PR, screen, bootstrap, positional heads, the field's measures, ablation and verdict,
provenance and fingerprint (part of the output contract in docs/outputs.md; ``headtrace.core.tables``
merges them with the cross-revision schemas and writes every table)."""
from __future__ import annotations

import polars as pl

from headtrace.core import metrics
from headtrace.core.classes import CLASSES

CLASS_COLUMNS = [c.replace("-", "_") for c in CLASSES]  # induction, duplicate_token, ...

CELL_KEY = {"model": pl.String, "revision": pl.String, "tokens": pl.Int64}
HEAD_KEY = {**CELL_KEY, "layer": pl.Int32, "head": pl.Int32}

CELL_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
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
        "copying": pl.Float64,  # the positive-eigenvalue share of the OV circuit
        "copying_eigenvalue_ratio": pl.Float64,  # Elhage et al.'s sum l / sum |l| of the same eigenvalues
        "n_sequences": pl.Int32,
        "seq_len": pl.Int32,
    },
    # results/findings/measures/measures_over_training.parquet (headtrace.findings.measures): per model x
    # revision x sink threshold (in measures.sink_eps's order: the first is the headline's, the others its
    # sensitivity), the field's measures beside the paper's synthetic ones.
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
        # what the text probe was (null: none): its sequences, their length in tokens, the documents they
        # came from and how its windows were taken (start: each document's first; consecutive)
        "text_n_sequences": pl.Int32,
        "text_seq_len": pl.Int32,
        "text_n_documents": pl.Int32,
        "text_windows": pl.String,
        # what key 0 of the text probe (the key the sink rate measures) is: the tokenizer's BOS on every
        # sequence (true), or the text's own first token (false: a content token); and the commonest key-0
        # tokens as text, most frequent first (ties by text), with how many sequences open with each
        "text_key0_bos": pl.Boolean,
        "text_key0_tokens": pl.List(pl.String),
        "text_key0_counts": pl.List(pl.Int64),
        # the model was trained only on a synthetic token stream (the toy panel): it never saw text like the
        # probe's, so its text sink rate means little; null: not known
        "synthetic_training": pl.Boolean,
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
    # results/findings/measures/measures_circuit_copying.parquet: per model x revision x induction-circuit head,
    # Olsson et al.'s two properties of an induction head beside the screen's circuit (headtrace.findings.measures)
    "measures_circuit_copying": {
        **HEAD_KEY,
        "sel_induction": pl.Float64,
        "prefix_matching": pl.Float64,  # on the repeated-random probe (null: no such probe)
        "copying": pl.Float64,  # the OV circuit's positive-eigenvalue share
        "copying_eigenvalue_ratio": pl.Float64,  # Elhage et al.'s sum l / sum |l| (null: a cell from before it)
        "prefix_matches": pl.Boolean,  # prefix_matching > measures.prefix_threshold
        "copies": pl.Boolean,  # copying > cell.measures.COPYING_THRESHOLD
        "both": pl.Boolean,
        "n_circuit": pl.Int32,
        "n_both": pl.Int32,  # circuit heads of this revision that pass both
        "n_heads": pl.Int32,  # every head of the cell
        "n_heads_prefix": pl.Int32,  # of them, prefix-matching
        "n_heads_copying": pl.Int32,  # of them, copying
        "prefix_threshold": pl.Float64,  # the two thresholds the booleans above used
        "copying_threshold": pl.Float64,
    },
    # results/probes/{model}/text_batch.parquet: the text probe, built once per model and tokenizer
    # (headtrace.models.tokenize): its sequences as fed, the file(s) and the tokenizer they came from.
    "text_probe": {
        "model": pl.String,
        "seq": pl.Int32,
        "tokens": pl.List(pl.Int64),
        "document": pl.Int32,  # the sequence's document, its index among the documents read (file order)
        "offset": pl.Int32,  # the token where the sequence's window starts in its document (0: its start)
        "file": pl.String,
        "split": pl.String,  # text_probe.split: none | heading | paragraph
        "windows": pl.String,  # text_probe.windows: start (each document's first) | consecutive
        "seed": pl.Int64,  # the order the documents were visited in (null: file order)
        "n_documents_read": pl.Int32,  # documents the file(s) gave after the split
        "n_short": pl.Int32,  # documents visited that were shorter than one window (skipped)
        "n_documents": pl.Int32,  # documents the sequences came from
        "tokenizer": pl.String,
        "tokenizer_sha256": pl.String,
        "n_prefix": pl.Int32,  # the special tokens the tokenizer puts before a text (its BOS: 1; none: 0)
        "key0": pl.String,  # the sequence's first token (key 0, the sink rate's key) as text
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
        # every metric of the registry (headtrace.core.metrics), the condition's mean over the sequences: top1,
        # top5, logit_b, ce, and the top-1 is the sequence's shuffled-B control token / another token of its
        # context (top1_control, top1_context; null in the published ablation files, which do not record them)
        **{m: pl.Float64 for m in metrics.METRICS},
        "n_sequences": pl.Int32,
        # control rows: size of the matched set space they come from (headtrace.causal.conditions); else null
        "n_matched_sets": pl.Int64,
        # seeded bootstrap over probe sequences (headtrace.causal.intervals): the condition's mean and its
        # paired effect against the baseline (positive = hurts), null where not computed
        # (the metrics with an interval: top1, logit_b, ce)
        **{f"{m}{s}": pl.Float64 for m in metrics.interval_metrics()
           for s in ("_lo", "_hi", "_effect_lo", "_effect_hi")},
        # the share of the behaviour the condition leaves, paired bootstrap interval (the verdict's halving rule):
        # top-1 over the baseline's; the cross-entropy and logit of B as the share of the in-context boost left
        # (against the copy_null condition); null where not computed (the metrics with a fraction: top1, logit_b, ce)
        **{f"{m}_fraction{s}": pl.Float64 for m in metrics.fraction_metrics() for s in ("_lo", "_hi")},
        # reference rows: every set of the reference set evaluated (true) or uniform draws (false); null elsewhere
        "reference_exact": pl.Boolean,
        # how a head is cut: zero | mean (ablation.method / ablation.second_method); null in the published ablations
        "method": pl.String,
        # which probe sequences the ablation ran on (config ablation.probe; headtrace.causal.recipe.ablation_probe):
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
        "verdict": pl.String,  # causal | partial | not_causal | underpowered | untested
        "metric": pl.String,  # decision metric (ablation.metric); effect/baseline_value/ablated_value use it
        "baseline_value": pl.Float64,
        "ablated_value": pl.Float64,
        "effect_lo": pl.Float64,  # bootstrap interval of effect (paired over probe sequences)
        "effect_hi": pl.Float64,
        "min_p": pl.Float64,  # smallest p the reference set allows: 1/N exact, 1/(M + 1) over M draws
        "n_matched_sets": pl.Int64,  # sets in the reference set (null: not recorded)
        "control_exact": pl.Boolean,  # every set of the reference set evaluated (null: not recorded)
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
        # the half-baseline criterion (top-1/top-5 decision metric; else null): ablated / baseline, its paired
        # bootstrap interval, and at_most_half | straddles_half | above_half (headtrace.causal.verdict)
        "ablated_fraction": pl.Float64,
        "ablated_fraction_lo": pl.Float64,
        "ablated_fraction_hi": pl.Float64,
        "half_baseline": pl.String,
        "partial_reason": pl.String,  # why a circuit that beats its controls is only partial (null otherwise)
        "untested_reason": pl.String,  # no matched control, or top-1 at its floor with no fallback (untested only)
        "upper_bound_share_note": pl.String,  # why upper_bound_share informs nothing here (null: it informs)
        # the test's level and how heads were cut (ablation.alpha, ablation.method)
        "alpha": pl.Float64,
        "method": pl.String,
        "excess_effect": pl.Float64,  # effect - random_effect_mean, in the decision metric's units
        # the behaviour before any verdict: the decision metric on the copy-null (B replaced in the context),
        # the in-context boost (baseline against it, positive = the earlier B helps) with its paired interval,
        # and whether that interval lies above 0 (false: the cell's circuits are untested; null: no copy-null)
        "null_value": pl.Float64,
        "boost": pl.Float64,
        "boost_lo": pl.Float64,
        "boost_hi": pl.Float64,
        "shows_behaviour": pl.Boolean,
        # the other ablation method's verdict of the same circuit (ablation.second_method; null without one)
        "second_method": pl.String,
        "second_verdict": pl.String,
        "second_p_value": pl.Float64,
        "second_effect": pl.Float64,
        "second_effect_lo": pl.Float64,
        "second_effect_hi": pl.Float64,
        "methods_agree": pl.Boolean,
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
}
