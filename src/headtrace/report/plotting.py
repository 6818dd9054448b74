"""Plotting helpers shared by every figure: the Agg backend, the log token axis (a revision with
``tokens == 0``, the initialisation, is drawn at ``zero_floor(tokens)`` = the smallest positive
token count / 10, rounded down to a power of ten, with a "0" tick label), colours and atomic PNG
writes."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from headtrace.core import durable  # noqa: E402

__all__ = ["plt", "COLORS", "zero_floor", "x_at", "log_token_axis", "token_x", "save", "empty", "grid", "nothing",
           "model_colors", "MAX_COLS", "MAX_WIDTH_PX", "DPI"]

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]
DPI = 130
MAX_COLS = 4  # panels per row of a grid: a figure a person reads without zooming
MAX_WIDTH_PX = 2000  # no figure is written wider than this


def model_colors(models) -> dict:
    """One colour per model, the same in every figure: models in name order around the colour cycle."""
    return {m: COLORS[i % len(COLORS)] for i, m in enumerate(sorted(set(models)))}


def grid(n: int, panel: tuple[float, float] = (3.6, 3.0), ncols: int = MAX_COLS, **kw):
    """A figure of ``n`` panels wrapping at ``ncols`` a row (panel size in inches); returns
    ``(fig, axes)`` with ``axes`` the first ``n`` axes in reading order (the rest removed)."""
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows), squeeze=False, **kw)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def nothing(ax, title: str, text: str) -> None:
    """A panel with nothing to show: its title and one line saying why, no empty axes."""
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=8.5, color="#555", wrap=True,
            transform=ax.transAxes)


def zero_floor(tokens) -> float:
    """Where tokens == 0 is drawn on a log axis: 10^(floor(log10(min positive)) - 1); 1.0 if none."""
    pos = [t for t in tokens if t is not None and t > 0]
    return 10.0 ** (math.floor(math.log10(min(pos))) - 1) if pos else 1.0


def x_at(tokens, floor: float) -> float:
    """One token count's x on a log token axis: 0 drawn at ``floor``."""
    return floor if tokens == 0 else float(tokens)


def log_token_axis(ax, floor: float, any_zero: bool) -> None:
    """Make ``ax``'s x axis the log token axis: its label, and with ``any_zero`` a "0" tick at ``floor``."""
    ax.set_xscale("log")
    ax.set_xlabel("training tokens" + (" (0 drawn at %.0e)" % floor if any_zero else ""))
    if any_zero:
        ticks = [t for t in ax.get_xticks() if t > floor * 1.5]
        ax.set_xticks([floor] + ticks)
        ax.set_xticklabels(["0"] + [f"$10^{{{int(round(math.log10(t)))}}}$" for t in ticks])
        ax.set_xlim(left=floor / 2)


def token_x(tokens, floor: float | None = None) -> tuple[np.ndarray, float]:
    """x values for a log token axis (zeros at ``floor``, default ``zero_floor(tokens)``) and the floor."""
    floor = floor or zero_floor(tokens)
    return _x(list(tokens), floor)[0], floor


def save(fig, path) -> None:
    """Write ``fig`` as a PNG (130 dpi, tight; a lower dpi where that would exceed MAX_WIDTH_PX),
    creating the folder, and close it."""
    fig.draw_without_rendering()  # run the layout engine first: the tight box is the one saved
    width_in = fig.get_tightbbox(fig.canvas.get_renderer()).width + 0.2  # what bbox_inches="tight" keeps
    dpi = min(DPI, (MAX_WIDTH_PX - 2) / max(width_in, 1e-9))
    with durable.atomic_path(path) as tmp:  # fsync'd temp file + rename, like every output
        fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def empty(path, text: str) -> None:
    """A small placeholder figure that says why there is nothing to draw."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    save(fig, path)


def _x(tokens: list, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """x values (zeros moved to ``floor``; nulls -> nan) and a mask of the zero-token points."""
    x = np.array([np.nan if t is None else x_at(t, floor) for t in tokens])
    zero = np.array([t == 0 for t in tokens])
    return x, zero
