"""The probe a run used, in words: for the console when the DAG is built, the probe job's log, the first
screen of ``summary.md`` and ``summary.html`` (``headtrace.report.first_screen`` lays the lines out) and
``headtrace summary`` (models that share a probe share one line). Pure: settings in, text out."""
from __future__ import annotations

from typing import Mapping

import polars as pl


def describe(settings: Mapping) -> str:
    """``{"n_sequences": 2000, "seq_len": 160, "ab_range": [12, 80], "token_range": [2, 256], ...}`` ->
    ``"2000 sequences of 160 tokens, A first at positions 12–79, token ids 2–255, seed 42, no BOS"``
    (ranges are the config's half-open [low, high), written as the values they take)."""
    ab_lo, ab_hi = (int(x) for x in settings["ab_range"])
    tok_lo, tok_hi = (int(x) for x in settings["token_range"])
    bos = (f"BOS {settings.get('bos_token_id')} prepended" if settings.get("prepend_bos") else "no BOS")
    return (f"{int(settings['n_sequences'])} sequences of {int(settings['seq_len'])} tokens, A first at positions "
            f"{ab_lo}–{ab_hi - 1}, token ids {tok_lo}–{tok_hi - 1}, seed {settings.get('seed')}, {bos}")


def grouped(shown: Mapping[str, str]) -> list[tuple[list[str], str]]:
    """``model -> description`` -> ``[(models, description)]``, models sharing a description together,
    in the order they first appear."""
    out: dict[str, list[str]] = {}
    for model, text in shown.items():
        out.setdefault(text, []).append(model)
    return [(models, text) for text, models in out.items()]


def names(models: list[str], shown: int = 6) -> str:
    """The models sharing a probe as its line names them: the first ``shown``, then how many more."""
    return ", ".join(models[:shown]) + (f" and {len(models) - shown} more" if len(models) > shown else "")


def lines(shown: Mapping[str, str], prefix: str = "probe") -> list[str]:
    """One line per distinct probe, naming the models that read it: ``probe (my-run): …``."""
    return [f"{prefix} ({names(models)}): {text}" for models, text in grouped(shown)]


def from_table(batch: pl.DataFrame) -> str:
    """A probe table (``results/probes/{model}/induction_batch.parquet``) in words, as drawn: the
    sequences, their length, and the A positions and token ids that occur in it."""
    tokens = batch["tokens"].explode()
    return (f"{batch.height} sequences of {batch['tokens'].list.len().max()} tokens, A first at positions "
            f"{batch['ab'].min()}–{batch['ab'].max()}, token ids {tokens.min()}–{tokens.max()} (as drawn)")
