"""Figures a person reads without zooming: grids wrap at MAX_COLS panels a row, nothing is wider
than MAX_WIDTH_PX, a model with nothing to show gets one line instead of an empty panel."""
from __future__ import annotations

import polars as pl
from PIL import Image

from headtrace.report import figures, onset_figures, plotting


def f1_table(n_models: int, empty: set[int]) -> pl.DataFrame:
    rows = []
    for i in range(n_models):
        for k, (rev, tok) in enumerate([("s0", 0), ("s1", 1000), ("s2", 10000)]):
            for layer in range(4):
                rows.append({"model": f"m{i}", "revision": rev, "tokens": tok, "layer": layer, "n_heads": 8,
                             "n_first_token": 0 if i in empty else (k * layer) % 9})
    return pl.DataFrame(rows)


def test_grid_wraps_at_four_panels():
    fig, axes = plotting.grid(7)
    assert len(axes) == 7 and len(fig.axes) == 7
    rows = {round(ax.get_position().y0, 3) for ax in axes}
    assert len(rows) == 2
    plotting.plt.close(fig)


def test_no_figure_wider_than_the_cap(tmp_path):
    fig, ax = plotting.plt.subplots(figsize=(40, 3))
    ax.plot([0, 1], [0, 1])
    plotting.save(fig, tmp_path / "wide.png")
    assert Image.open(tmp_path / "wide.png").size[0] <= plotting.MAX_WIDTH_PX


def test_heatmap_grid_and_the_models_with_nothing_to_show(tmp_path):
    path = tmp_path / "bos_heatmap.png"
    figures.plot_bos_heatmap(f1_table(7, empty={1, 4}), path)
    w, h = Image.open(path).size
    assert w <= plotting.MAX_WIDTH_PX and h < w  # 5 panels: one row of 4, one of 1
    all_empty = tmp_path / "none.png"
    figures.plot_bos_heatmap(f1_table(3, empty={0, 1, 2}), all_empty)
    assert Image.open(all_empty).size[0] < 1200  # one line, not three empty maps


def test_milestones_wrap(tmp_path):
    names = ["induction_2_heads", "first_token_50pct"]
    ms = pl.DataFrame({"model": [f"m{i}" for i in range(6) for _ in names], "milestone": names * 6,
                       "revision": ["s1", None] * 6, "tokens": [1000.0, None] * 6})
    revs = pl.DataFrame({"model": [f"m{i}" for i in range(6) for _ in range(3)], "revision": ["s0", "s1", "s2"] * 6,
                         "tokens": [0, 1000, 10000] * 6})
    path = tmp_path / "milestones.png"
    onset_figures.plot_milestones(ms, None, revs, path)
    w, h = Image.open(path).size
    assert w <= plotting.MAX_WIDTH_PX and h > 0.25 * w  # two rows (one row of 4 would be ~0.16 w)


def test_model_colours_are_the_same_in_every_figure():
    a = plotting.model_colors(["b", "a", "c"])
    assert a == plotting.model_colors(["c", "c", "a", "b"])
