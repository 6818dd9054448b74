"""Figures of the field's own measures beside the paper's (docs/measures.md): one panel per model.

* ``measures_sink``: the synthetic probe's first-token fraction (the paper's F2) and the text probe's sink
  rate (Gu et al. 2025, at the first eps) over training tokens, both as % of heads.
* ``measures_prefix``: the induction-circuit size and the number of prefix-matching heads (Olsson et al.
  2022, score above ``measures.prefix_threshold``) over training tokens.

Both draw ``measures_over_training`` (its first eps) only; token axes as ``headtrace.report.figures``.
"""
from __future__ import annotations

import matplotlib.ticker
import polars as pl

from headtrace.findings import trajectory as T
from headtrace.report.plotting import _x, empty, grid, log_token_axis, nothing, save, zero_floor

SINK_LINES = (("first_token_fraction", "first-token fraction (synthetic)", "o-"),
              ("text_sink_rate", "sink rate (text)", "s--"))
PREFIX_LINES = (("n_induction_circuit", "induction circuit (synthetic)", "o-"),
                ("n_prefix_heads", "prefix-matching heads (repeated)", "s--"))


def plot_sink(over: pl.DataFrame, path) -> None:
    """``measures_sink``: first-token fraction and text sink rate over tokens, a panel per model."""
    _panels(over, path, SINK_LINES, "% of heads", True,
            "first-token heads on the synthetic probe vs sink rate on text (alpha > {eps})")


def plot_prefix(over: pl.DataFrame, path) -> None:
    """``measures_prefix``: induction-circuit size and prefix-matching heads over tokens, a panel per model."""
    _panels(over, path, PREFIX_LINES, "heads", False, "induction circuit vs prefix-matching heads")


def _panels(over: pl.DataFrame, path, lines, ylabel: str, percent: bool, title: str) -> None:
    if not over.height:
        empty(path, "no measures (measures.enabled is false, or no model was run here)")
        return
    eps0 = over["eps"][0]
    df = T.with_rev_index(over.filter(pl.col("eps") == eps0)).sort("model", "rev_index")
    models = df["model"].unique(maintain_order=True).to_list()
    floor = zero_floor(df["tokens"].to_list())
    fig, axes = grid(len(models))
    for ax, m in zip(axes, models):
        g = df.filter(pl.col("model") == m).drop_nulls("tokens")
        drawn = [(col, label, style) for col, label, style in lines if g[col].null_count() < g.height]
        if not g.height or not drawn:
            nothing(ax, m, "no revision with known tokens" if not g.height else "no values for these measures")
            continue
        x, zero = _x(g["tokens"].to_list(), floor)
        for col, label, style in drawn:
            y = g[col].cast(pl.Float64).to_numpy() * (100 if percent else 1)
            ax.plot(x, y, style, label=label)
        log_token_axis(ax, floor, bool(zero.any()))
        ax.set_title(m, fontsize=9)
        ax.set_ylabel(ylabel)
        if percent:
            ax.set_ylim(-5, 105)
        else:
            ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(title.format(eps=eps0), fontsize=10)
    save(fig, path)
