"""Uncertainty of the screen: a bootstrap over the probe sequences.

Selectivities are ratios of means over the probe's N sequences, so a head near a threshold can flip
with the batch. The capture pass keeps every sequence's class masses (``capture.save_class_masses``,
``(N, layers, heads, 8)``: the six ``CLASSES``, the sampled and the clean baseline; files of
the previous version have 7 channels, no clean baseline), and this module
resamples the sequences with replacement:

* a resample is a vector of counts ``w`` (how often each sequence is drawn; ``resample_counts``,
  a seeded ``numpy.random.Generator``; the *same* draws for every revision of a model, since every
  revision reads the same probe batch: the onset spread is a paired bootstrap over revisions);
* in each resample the screen's quantities are recomputed exactly as the point estimate averages
  them (``capture``/``screen``): induction and duplicate-token masses averaged over the *valid*
  sequences drawn, the four other classes and the sampled / clean baselines over all N sequences
  drawn, the baseline floored at ``screen.BASELINE_FLOOR``; the uniform baseline is the constant ``1/T``;
* per head and class (``head_intervals``): the ``interval`` (default 90%: 5th-95th percentile)
  CI of the selectivity, the probability that it reaches the class threshold (``p_above``), that the
  head is *classified* as that class (``p_classified``: best class and >= class threshold) and, for
  the two circuits, that it is in the circuit (``p_circuit``: induction >= 50x; previous-token = best
  class previous-token at >= 100x);
* per revision and resample (``milestone_counts``): induction-circuit size and first-token head
  count, from which :func:`headtrace.findings.onsets.onset_intervals` gives, per model and F3
  milestone, the spread of the first revision reaching it across resamples.

The point estimates (attention, screen, trajectory) are not touched: this module only adds tables.
Everything is deterministic by ``seed``. For models without per-sequence masses (the published
reference panel) the bootstrap columns are null.
"""
from __future__ import annotations

import json
import os

import numpy as np
import polars as pl
from safetensors import safe_open

from headtrace.cell.screen import BASELINE_FLOOR, BASELINES
from headtrace.core.classes import CLASSES
from headtrace.core.tables import ARRAY_KEY, conform

MASS_CHANNELS = (*CLASSES, "baseline_sampled", "baseline_clean")
LEGACY_CHANNELS = MASS_CHANNELS[:-1]  # class-mass files written before the clean baseline
_VALID_ONLY = ("induction", "duplicate-token")
CIRCUITS = {"induction": "induction", "previous-token": "previous_token"}  # class -> circuit threshold name


def resample_counts(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n) float64: how often each of n sequences is drawn in each resample."""
    if n < 1 or n_resamples < 1:
        raise ValueError(f"bootstrap needs n >= 1 sequences and n_resamples >= 1, got {n}, {n_resamples}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    flat = (np.arange(n_resamples)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=n_resamples * n).reshape(n_resamples, n).astype(np.float64)


def selectivity_resamples(masses: np.ndarray, valid: np.ndarray, counts: np.ndarray, *, seq_len: int,
                          baseline: str = "sampled") -> np.ndarray:
    """(B, L, H, 6) selectivities of every resample (rows of ``counts``), as ``screen.selectivity_table``
    computes them from the means: ``masses`` (N, L, H, 7) per-sequence masses (channels
    ``MASS_CHANNELS``; induction/duplicate-token are 0 on invalid sequences, as the capture weights
    them), ``valid`` (N,) bool. A row of ``counts`` equal to 1 everywhere gives the point estimate."""
    if baseline not in BASELINES:
        raise ValueError(f"screen.baseline must be one of {BASELINES}, got '{baseline}'")
    n, n_layers, n_heads, n_ch = masses.shape
    channels = {len(MASS_CHANNELS): MASS_CHANNELS, len(LEGACY_CHANNELS): LEGACY_CHANNELS}.get(n_ch)
    if channels is None or valid.shape != (n,) or counts.shape[1] != n:
        raise ValueError(f"masses {masses.shape}, valid {valid.shape} and counts {counts.shape} do not fit")
    if baseline == "clean" and "baseline_clean" not in channels:
        raise ValueError("screen.baseline 'clean' needs class masses with the clean baseline (capture this cell again)")
    sums = (counts @ masses.reshape(n, -1).astype(np.float64)).reshape(-1, n_layers, n_heads, n_ch)
    n_valid = counts @ valid.astype(np.float64)  # (B,)
    n_all = counts.sum(1)  # (B,) == n
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.stack([n_valid if c in _VALID_ONLY else n_all for c in channels], -1)  # (B, C)
        means = np.where(den[:, None, None, :] > 0, sums / den[:, None, None, :], np.nan)
    n_cls = len(CLASSES)
    if baseline in ("sampled", "clean"):
        base = np.maximum(means[..., channels.index(f"baseline_{baseline}")], BASELINE_FLOOR)
    else:
        base = np.full(means.shape[:-1], max(1.0 / seq_len, BASELINE_FLOOR))
    return means[..., :n_cls] / base[..., None]


def head_intervals(sel: np.ndarray, *, class_threshold: float = 30.0, induction_threshold: float = 50.0,
                   previous_token_threshold: float = 100.0, interval: float = 0.9) -> dict[str, np.ndarray]:
    """Per (layer, head, class) from resampled selectivities ``sel`` (B, L, H, 6): ``sel_lo``/``sel_hi``
    (the central ``interval``), ``p_above`` (sel >= class threshold), ``p_classified`` (best class is
    this class and >= class threshold; ties to the first class as in ``screen``) and ``p_circuit``
    (induction: sel >= induction threshold; previous-token: classified previous-token at >= its
    threshold; nan for the other classes). A nan selectivity (no valid sequence drawn) is unknown and
    counts as not passing."""
    q = (1 - interval) / 2
    s = np.where(np.isfinite(sel), sel, -np.inf)
    best = np.argmax(s, axis=-1)  # first maximum -> ties to the earlier class
    best_val = np.take_along_axis(s, best[..., None], -1)[..., 0]
    classes = np.arange(sel.shape[-1])
    is_best = best[..., None] == classes  # (B, L, H, 6)
    out = {
        "sel_lo": np.nanquantile(sel, q, axis=0),
        "sel_hi": np.nanquantile(sel, 1 - q, axis=0),
        "p_above": (s >= class_threshold).mean(0),
        "p_classified": (is_best & (best_val >= class_threshold)[..., None]).mean(0),
    }
    circ = np.full(sel.shape[1:], np.nan)
    i_ind, i_prev = CLASSES.index("induction"), CLASSES.index("previous-token")
    circ[..., i_ind] = (s[..., i_ind] >= induction_threshold).mean(0)
    circ[..., i_prev] = ((best == i_prev) & (best_val >= previous_token_threshold)).mean(0)
    out["p_circuit"] = circ
    return out


def milestone_counts(sel: np.ndarray, *, class_threshold: float = 30.0,
                     induction_threshold: float = 50.0) -> dict[str, np.ndarray]:
    """Per resample: induction-circuit size and first-token head count (as ``trajectories``
    counts them: sel_induction >= induction threshold, sel_first_token >= class threshold)."""
    i_ind, i_first = CLASSES.index("induction"), CLASSES.index("first-token")
    flat = sel.reshape(sel.shape[0], -1, sel.shape[-1])
    with np.errstate(invalid="ignore"):
        return {"n_induction_circuit": (flat[..., i_ind] >= induction_threshold).sum(1),
                "n_first_token": (flat[..., i_first] >= class_threshold).sum(1)}


# ------------------------------------------------------------------------------------------------
# one cell


def cell_tables(masses: np.ndarray, valid: np.ndarray, seq_len: int, model: str, revision: str,
                tokens: int | None, *, n_resamples: int = 1000, seed: int = 0, interval: float = 0.9,
                baseline: str = "sampled", class_threshold: float = 30.0, induction_threshold: float = 50.0,
                previous_token_threshold: float = 100.0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``bootstrap`` table: per head x class, ``bootstrap_milestones`` table: per resample) of one cell."""
    counts = resample_counts(masses.shape[0], n_resamples, seed)
    sel = selectivity_resamples(masses, valid, counts, seq_len=seq_len, baseline=baseline)
    iv = head_intervals(sel, class_threshold=class_threshold, induction_threshold=induction_threshold,
                        previous_token_threshold=previous_token_threshold, interval=interval)
    n_layers, n_heads, n_cls = sel.shape[1:]
    layer, head, cls = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(n_cls), indexing="ij")
    n_rows = layer.size
    heads = pl.DataFrame({
        "model": [model] * n_rows, "revision": [revision] * n_rows,
        "tokens": pl.Series([tokens] * n_rows, dtype=pl.Int64),
        "layer": layer.ravel().astype(np.int32), "head": head.ravel().astype(np.int32),
        "class": np.array(CLASSES)[cls.ravel()],
        **{k: v.ravel() for k, v in iv.items()},
        "n_resamples": np.full(n_rows, n_resamples, np.int32), "interval": np.full(n_rows, interval),
    }).with_columns(pl.col("sel_lo", "sel_hi", "p_circuit").fill_nan(None))
    mc = milestone_counts(sel, class_threshold=class_threshold, induction_threshold=induction_threshold)
    per = pl.DataFrame({
        "model": [model] * n_resamples, "revision": [revision] * n_resamples,
        "tokens": pl.Series([tokens] * n_resamples, dtype=pl.Int64),
        "resample": np.arange(n_resamples, dtype=np.int32),
        "n_induction_circuit": mc["n_induction_circuit"].astype(np.int32),
        "n_first_token": mc["n_first_token"].astype(np.int32),
        "n_heads": np.full(n_resamples, n_layers * n_heads, np.int32),
    })
    return conform(heads, "bootstrap"), conform(per, "bootstrap_milestones")


def load_masses(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, int]:
    """(masses (N, L, H, 8) float32 (7 in files without the clean baseline), valid (N,) bool, seq_len)
    from ``capture.save_class_masses``."""

    with safe_open(str(path), framework="np") as fh:
        meta = fh.metadata() or {}
        masses = fh.get_tensor(ARRAY_KEY)
    if meta.get("layout") != "sequence,layer,head,class" or json.loads(meta.get("channels", "[]")) not in (
            list(MASS_CHANNELS), list(LEGACY_CHANNELS)):
        raise ValueError(f"{path}: not a class-mass file of this version (layout {meta.get('layout')!r})")
    n = masses.shape[0]
    valid = np.unpackbits(np.frombuffer(bytes.fromhex(meta["valid"]), np.uint8))[:n].astype(bool)
    if int(valid.sum()) != int(meta["n_valid"]):
        raise ValueError(f"{path}: valid mask and n_valid disagree")
    return masses, valid, int(meta["seq_len"])


def run_cell(masses_path, model: str, revision: str, tokens: int | None, **settings):
    """``cell_tables`` from a class-mass file (the workflow's bootstrap job)."""
    masses, valid, seq_len = load_masses(masses_path)
    return cell_tables(masses, valid, seq_len, model, revision, tokens, **settings)
