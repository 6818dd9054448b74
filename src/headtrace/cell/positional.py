"""Positional heads in the induction screen: how much of a head's induction mass comes from one A position.

The induction class reads the query's attention to key ``ab+1`` (B, after the first A), averaged over
the valid probe sequences, whose A-B pair sits at a different position ``ab`` in each. A
content-matching head attends to B wherever it is. A head fixed on one relative offset Δ attends to
key ``T-1-Δ`` in every sequence, so it puts its mass on B only in the sequences whose ``ab+1`` happens
to be ``T-1-Δ``: about one in ``n_ab`` (the number of A positions the probe uses). When ``T-1-Δ`` is
not one of the sampled baseline's 50 fixed keys (``synthetic.baseline_positions``), such a head's
baseline is near zero and a mean induction mass of ~1/n_ab reads as hundreds or thousands of ×: a
positional head passes the screen as an induction head. (Measured: a 4-layer x 12-head OLMoE toy
trained on periodic data, whose six layer-0 heads attend 86-100% to offset 30 or 31, screened
35-6,682× "induction"; the model's layer-1 heads copy B from key ``ab+31`` instead - docs/toy-panel.md, "The
toy panel".)

The check, per head and per class whose key moves with the pair (induction: ``ab+1``,
duplicate-token: ``ab``): ``peak_share`` = the largest share of the head's mass over the valid
sequences that the sequences of one A position carry. A head whose mass does not depend on where the
pair sits has a peak share near ``uniform_peak_share`` (the largest share of the valid sequences at
one A position: 0.043 for the 256-sequence toy probe); a head fixed on one offset has a share near 1. A
head is *positional* when more than half of its induction mass comes from one A position
(``POSITIONAL_SHARE``: a plain majority, fixed by that reading, not fitted to any model). The screen
and its thresholds are untouched (they are the paper's protocol); this table says which of the heads
it passes are positional, so a circuit made of them is read for what it is.

Computed from the capture's per-sequence class masses (``capture.save_class_masses``) and the probe's
``ab``: no extra forward pass.
"""
from __future__ import annotations

import os

import numpy as np
import polars as pl

from headtrace.cell import bootstrap
from headtrace.core import tables
from headtrace.probe import synthetic

POSITIONAL_SHARE = 0.5  # > half of a head's induction mass from one A position
_CHANNELS = {"induction": 0, "duplicate_token": 1}  # capture._MASS_NAMES order


def peak_share(mass: np.ndarray, ab: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the largest share of its mass over the valid sequences carried by one A position.

    ``mass``: (N, L, H) per-sequence attention masses of one class; ``ab``: (N,) the A position of
    each sequence; ``valid``: (N,) bool. Returns ``(share, peak_ab)``, both (L, H): share in
    [0, 1] (NaN where the head's mass over the valid sequences is 0) and the A position carrying it
    (-1 where the share is NaN)."""
    mass = np.asarray(mass, np.float64)
    ab, valid = np.asarray(ab), np.asarray(valid, bool)
    if mass.ndim != 3 or ab.shape != (mass.shape[0],) or valid.shape != ab.shape:
        raise ValueError(f"mass (N, L, H), ab (N,) and valid (N,) must agree; got {mass.shape}, {ab.shape}, {valid.shape}")
    positions, group = np.unique(ab[valid], return_inverse=True)
    per_position = np.zeros((positions.size, *mass.shape[1:]))
    np.add.at(per_position, group, mass[valid])  # (n_ab, L, H)
    total = per_position.sum(axis=0)
    best = per_position.argmax(axis=0) if positions.size else np.zeros(mass.shape[1:], int)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, per_position.max(axis=0, initial=0.0) / np.where(total > 0, total, 1.0), np.nan)
    peak = np.where(np.isnan(share), -1, positions[best] if positions.size else -1)
    return share, peak.astype(np.int64)


def uniform_peak_share(ab: np.ndarray, valid: np.ndarray) -> float:
    """The peak share of a head whose mass is the same in every sequence: the largest fraction of
    the valid sequences that share one A position (NaN without valid sequences)."""
    ab, valid = np.asarray(ab), np.asarray(valid, bool)
    if not valid.any():
        return float("nan")
    _, counts = np.unique(ab[valid], return_counts=True)
    return float(counts.max() / counts.sum())


def cell_table(masses: np.ndarray, valid: np.ndarray, ab: np.ndarray, model: str, revision: str,
               tokens: int | None) -> pl.DataFrame:
    """One row per (layer, head), schema ``positional``: peak shares of the induction and
    duplicate-token masses, the A positions carrying them, and the ``positional_induction`` flag.
    ``masses``: (N, L, H, 7) per-sequence class masses in ``capture._MASS_NAMES`` order."""
    masses = np.asarray(masses)
    if masses.ndim != 4 or masses.shape[0] != np.asarray(ab).shape[0]:
        raise ValueError(f"class masses {masses.shape} do not match the probe's {np.asarray(ab).shape[0]} sequences")
    n_layers, n_heads = masses.shape[1:3]
    n_rows = n_layers * n_heads
    data = tables.head_key_columns(model, revision, tokens, n_layers, n_heads)
    for name, channel in _CHANNELS.items():
        share, peak = peak_share(masses[..., channel], ab, valid)
        data[f"{name}_peak_share"] = pl.Series(share.ravel()).fill_nan(None)
        data[f"{name}_peak_ab"] = peak.ravel().astype(np.int32)
    data["uniform_peak_share"] = np.full(n_rows, uniform_peak_share(ab, valid))
    data["n_ab"] = np.full(n_rows, np.unique(np.asarray(ab)[np.asarray(valid, bool)]).size, np.int32)
    df = pl.DataFrame(data).with_columns(
        positional_induction=(pl.col("induction_peak_share") > POSITIONAL_SHARE).fill_null(False))
    return tables.conform(df, "positional")


def run_cell(masses_path: str | os.PathLike, probe_path: str | os.PathLike, model: str, revision: str,
             tokens: int | None) -> pl.DataFrame:
    """``cell_table`` from a class-mass file and the probe table it was captured on (the workflow's
    positional job); the two must describe the same sequences."""

    masses, valid, seq_len = bootstrap.load_masses(masses_path)
    batch = synthetic.batch_from_table(tables.read(probe_path))
    if batch.tokens.shape != (masses.shape[0], seq_len) or not np.array_equal(np.asarray(batch.valid, bool), valid):
        raise ValueError(f"{masses_path} was not captured on the probe {probe_path} "
                         f"({masses.shape[0]} x {seq_len} vs {batch.tokens.shape[0]} x {batch.tokens.shape[1]})")
    return cell_table(masses, valid, batch.ab, model, revision, tokens)


def circuit_flags(positional: pl.DataFrame | None, trajectory: pl.DataFrame) -> pl.DataFrame:
    """The induction-circuit heads of every (model, revision) of ``trajectory`` with their induction
    peak share and flag (inner join: cells without a positional table, e.g. the published panel,
    drop out; no rows when ``positional`` is None): the findings table ``circuit_positional``."""
    circuit = trajectory.filter(pl.col("in_induction_circuit")).select("model", "revision", "tokens", "layer", "head")
    cols = ["model", "revision", "layer", "head", "induction_peak_share", "induction_peak_ab",
            "uniform_peak_share", "positional_induction"]
    if positional is None:
        return tables.conform(pl.DataFrame(schema=tables.SCHEMAS["circuit_positional"]), "circuit_positional")
    flags = circuit.join(positional.select(cols), on=["model", "revision", "layer", "head"], how="inner")
    return tables.conform(flags.sort("model", "tokens", "layer", "head", nulls_last=True), "circuit_positional")
