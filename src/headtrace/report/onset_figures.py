"""Figures of the onsets: the sink's onset per layer (F2b) and the F3 milestones with their
bootstrap intervals. Same conventions as ``headtrace.report.figures`` (log token axes, 0 tokens drawn one
decade below the smallest positive count and labelled 0)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from headtrace.report import plotting as FG
from headtrace.report.plotting import plt, zero_floor


def plot_layer_onset(onset: pl.DataFrame, path, spread: pl.DataFrame | None = None,
                     floor_layers: tuple[int, ...] = (0, 1)) -> None:
    """Onset tokens per layer, one line per model: solid = first revision with >= 1 first-token head,
    dashed = >= 50% of the layer's heads. Never reached: hollow marker on the "never" row at the top.
    Floor layers are shaded. ``spread`` (f2_layer_spread) adds each model's label to its legend entry."""
    toks = onset["first_tokens"].to_list() + onset["half_tokens"].to_list()
    pos = [t for t in toks if t is not None and t > 0]
    if not pos and all(t is None for t in toks):
        FG.empty(path, "no layer reaches a first-token head in any model")
        return
    floor = zero_floor(toks) if any(v == 0 for v in toks) else 10.0 ** math.floor(math.log10(min(pos)))
    top = 10.0 ** (math.ceil(math.log10(max(pos))) + 1) if pos else 10 * floor  # the "never" row
    colors = FG.model_colors(onset["model"].to_list())
    fig, ax = plt.subplots(figsize=(8, 4.4))
    for i, m in enumerate(onset["model"].unique(maintain_order=True).to_list()):
        g = onset.filter(pl.col("model") == m).sort("layer")
        c = colors[m]
        label = m
        if spread is not None:
            s = spread.filter((pl.col("model") == m) & (pl.col("onset") == "first"))
            if s.height:
                label += f" ({s['label'][0]})"
        layers = g["layer"].to_numpy()
        for col, ls, lab in (("first_tokens", "-", label), ("half_tokens", "--", None)):
            t = g[col].to_list()
            y = FG.token_x(t, floor)[0]
            never = np.array([v is None for v in t])
            ax.plot(layers, y, "o" + ls, color=c, label=lab, lw=1.5 if ls == "-" else 1, alpha=1 if ls == "-" else 0.7,
                    ms=4)
            if never.any():  # never reached: hollow markers on the top row (no line through them)
                ax.plot(layers[never] + 0.12 * (i - 1), np.full(never.sum(), top), "o", mfc="white", color=c, ms=6 if ls == "-" else 4)
    lo = min(floor_layers) if floor_layers else None
    if lo is not None:
        ax.axvspan(lo - 0.5, max(floor_layers) + 0.5, color="grey", alpha=0.12, lw=0)
    ax.set_yscale("log")
    ticks = [t for t in ax.get_yticks() if floor <= t < top]
    ax.set_yticks(ticks + [top])
    ax.set_yticklabels([("0" if t == floor and any(v == 0 for v in toks) else f"$10^{{{round(math.log10(t))}}}$")
                        for t in ticks] + ["never"])
    ax.set_ylim(floor / 2, top * 2)
    ax.set_xlabel("layer (shaded: floor layers, not ranked)")
    ax.set_ylabel("onset (training tokens)")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, title="solid: ≥ 1 first-token head; dashed: ≥ 50% of heads", title_fontsize=8,
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("F2b — where the first-token sink appears first", fontsize=10)
    FG.save(fig, path)


def plot_milestones(milestones: pl.DataFrame, onset_bootstrap: pl.DataFrame | None, revisions: pl.DataFrame,
                    path) -> None:
    """F3: per model (panels) and milestone (rows), the first revision reaching it (dot) and the
    bootstrap spread of that revision across resamples (bar, the configured interval; an arrow to
    "never" when the upper percentile is a resample that never reaches it). Thin vertical lines:
    the model's screened revisions (the resolution any onset has). ``revisions``: (model, revision,
    tokens) of every screened revision. Models without per-sequence masses get no bar."""
    models = milestones["model"].unique(maintain_order=True).to_list()
    if not models:
        FG.empty(path, "no milestones")
        return
    names = milestones["milestone"].unique(maintain_order=True).to_list()
    fig, axes = FG.grid(len(models), panel=(3.9, 0.42 * len(names) + 1.7), layout="constrained")
    ncols = min(FG.MAX_COLS, len(models))
    for k, (ax, m) in enumerate(zip(axes, models)):
        rv = revisions.filter(pl.col("model") == m)["tokens"].drop_nulls().to_list()
        floor = zero_floor(rv)
        pos = [t for t in rv if t > 0]
        right = 10.0 ** (math.log10(max(pos)) + 0.5) if pos else 10 * floor  # the "never" column
        for t in rv:
            ax.axvline(FG.x_at(t, floor), color="grey", lw=0.5, alpha=0.4)
        boot = onset_bootstrap.filter(pl.col("model") == m) if onset_bootstrap is not None else None
        has_boot = boot is not None and boot.height and (boot["n_resamples"].fill_null(0) > 0).any()
        for y, name in enumerate(names):
            r = milestones.filter((pl.col("model") == m) & (pl.col("milestone") == name))
            tok = r["tokens"][0] if r.height else None
            reached = r.height and r["revision"][0] is not None
            x = FG.x_at(tok, floor) if (reached and tok is not None) else right
            if has_boot:
                b = boot.filter(pl.col("milestone") == name)
                if b.height and b["n_resamples"][0]:
                    lo, hi = b["onset_lo_tokens"][0], b["onset_hi_tokens"][0]
                    lo_x = right if b["onset_lo_revision"][0] is None else FG.x_at(lo, floor)
                    hi_x = right if b["onset_hi_revision"][0] is None else FG.x_at(hi, floor)
                    ax.plot([lo_x, hi_x], [y, y], "-", color="C0", lw=4, alpha=0.45, solid_capstyle="butt")
                    ax.plot([lo_x, hi_x], [y, y], "|", color="C0", ms=10)
            ax.plot([x], [y], "o", color="C3" if reached else "white", mec="C3", ms=7, zorder=3)
        ax.set_xscale("log")
        ax.set_xlim(floor / 2, right * 2)
        FG.log_token_axis(ax, floor, 0 in rv)
        ax.set_xlim(floor / 2, right * 2)  # setting the ticks may have widened the view
        ax.axvline(right, color="black", lw=0.8, ls=":")
        ax.text(right, len(names) - 0.4, "never", ha="center", fontsize=7)
        ax.set_title(m + ("" if has_boot else "\n(no per-sequence masses: no bootstrap)"), fontsize=9)
        ax.grid(alpha=0.3, axis="x", which="major")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names if k % ncols == 0 else [], fontsize=8)  # milestone names: first column
        ax.set_ylim(len(names) - 0.2, -0.6)  # first milestone on top
        ax.xaxis.label.set_size(8)
    fig.suptitle("F3 milestones: first revision reaching each (dot) and its bootstrap spread (bar)", fontsize=10)
    FG.save(fig, path)
