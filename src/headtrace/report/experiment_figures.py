"""Figures of the method experiments (seed specificity, data shift, composition, noise floor).

Same conventions as ``headtrace.report.figures`` (Agg backend, token axes with step 0 drawn one decade
below the first positive token count, ``figures.save``); one function per experiment figure, each
drawing a labelled placeholder when its table is empty.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from headtrace.core.heads import head_name
from headtrace.experiments.seeds import cross_seed_matrix
from headtrace.report.format import fmt_tokens
from headtrace.report.plotting import empty, plt, save, token_x


def plot_cross_seed(df: pl.DataFrame, path) -> None:
    """Heatmaps: excess top-1 drop over its reference set (circuit seed x model seed), and Jaccard."""
    if df.height == 0:
        return empty(path, "no cross-seed ablation (fewer than two seeds)")
    rows, cols, m = cross_seed_matrix(df, "top1_drop_vs_random")
    _, _, raw = cross_seed_matrix(df, "top1_drop")
    _, _, jac = cross_seed_matrix(df, "jaccard")
    fig, axes = plt.subplots(1, 2, figsize=(4.2 + 1.6 * len(cols), 3 + 0.5 * len(rows)))
    lim = max(1e-3, float(np.nanmax(np.abs(m))) if np.isfinite(m).any() else 1e-3)
    im = axes[0].imshow(100 * m, cmap="RdBu_r", vmin=-100 * lim, vmax=100 * lim)
    for a, b in np.ndindex(m.shape):
        excess = "undecidable:\nno reference draws" if np.isnan(m[a, b]) else f"{100 * m[a, b]:+.1f}"
        axes[0].text(b, a, f"{excess}\n({100 * raw[a, b]:+.1f})", ha="center", va="center", fontsize=8)
    fig.colorbar(im, ax=axes[0], label="top-1 drop beyond the reference set (pp)")
    axes[0].set_title("seed i's circuit ablated in model j", fontsize=9)
    im2 = axes[1].imshow(jac, cmap="viridis", vmin=0, vmax=1)
    for a, b in np.ndindex(jac.shape):
        axes[1].text(b, a, "n/a" if np.isnan(jac[a, b]) else f"{jac[a, b]:.2f}", ha="center", va="center",
                     color="w" if (np.isnan(jac[a, b]) or jac[a, b] < 0.6) else "k", fontsize=9)
    fig.colorbar(im2, ax=axes[1], label="Jaccard(circuit i, circuit j)")
    axes[1].set_title("circuit overlap (Jaccard)", fontsize=9)
    for ax in axes:
        ax.set_xticks(range(len(cols)), [f"seed {c}" for c in cols])
        ax.set_yticks(range(len(rows)), [f"seed {r}" for r in rows])
        ax.set_xlabel("model seed j")
        ax.set_ylabel("circuit seed i")
    fig.tight_layout()
    save(fig, path)


def plot_data_shift(heads: pl.DataFrame, table: pl.DataFrame, path) -> None:
    """Induction selectivity and PR of every head across the shift (pre-shift circuit heads bold),
    and the circuit's Jaccard to the pre-shift circuit; x = checkpoints in order (evenly spaced)."""
    if heads.height == 0:
        return empty(path, "no data-shift experiment")
    order = table.with_row_index("x").select("x", "phase", "revision", "tokens")
    heads = heads.join(order, on=["phase", "revision"], how="left", suffix="_o")
    labels = [f"{'+' if ph == 'after' else ''}{rev}\n{fmt_tokens(tok)}" for _, ph, rev, tok in order.iter_rows()]
    n_before = order.filter(pl.col("phase") == "before").height
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, ((layer, head), g) in enumerate(heads.sort("x").group_by("layer", "head", maintain_order=True)):
        pre = bool(g["in_pre_shift_circuit"][0])
        style = dict(lw=2.4 if pre else 0.9, alpha=1 if pre else 0.5, color=colors[k % len(colors)],
                     label=head_name(layer, head) + (" (pre-shift circuit)" if pre else ""))
        for phase, ls in (("before", "-"), ("after", "-")):
            gp = g.filter(pl.col("phase") == phase)
            axes[0].plot(gp["x"].to_numpy(), gp["sel_induction"].clip(lower_bound=1e-2).to_numpy(), "o" + ls, ms=3,
                         **(style if phase == "before" else {**style, "label": None}))
            axes[1].plot(gp["x"].to_numpy(), gp["pr"].to_numpy(), "o" + ls, ms=3,
                         **(style if phase == "before" else {**style, "label": None}))
    axes[2].plot(order["x"].to_numpy(), table["jaccard_to_pre_shift"].to_numpy(), "ko-")
    axes[2].set_ylim(-0.05, 1.05)
    axes[0].set_yscale("log")
    axes[0].axhline(50, color="k", ls=":", lw=0.8)
    for ax, lab in zip(axes, ["induction selectivity (×, dotted: 50×)", "participation ratio",
                              "Jaccard to pre-shift circuit"]):
        ax.set_xticks(order["x"].to_list(), labels, fontsize=6, rotation=90)
        ax.set_ylabel(lab)
        ax.axvline(n_before - 0.5, color="grey", ls="--", lw=1)
        ax.set_xlabel("checkpoint (before | + after the shift), tokens")
    axes[0].legend(fontsize=7, ncol=2)
    after = table.filter(pl.col("phase") == "after")
    fig.suptitle(f"data shift: {table['model'][0]} → {after['model'][0] if after.height else '?'} (dashed: the shift)")
    fig.tight_layout()
    save(fig, path)


def plot_composition(comp: pl.DataFrame, path) -> None:
    """Per model: baseline top-1, previous-token-circuit ablated top-1, reference-set mean, and the
    measured copying null (the baseline's top-1 on the shuffled-B control) where recorded."""
    if comp.height == 0:
        return empty(path, "no ablation tables")
    models = comp["model"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False)
    x_all, f = token_x(comp["tokens"].to_list())
    for ax, m in zip(axes[0], models):
        g = comp.filter(pl.col("model") == m).sort("tokens")
        x, _ = token_x(g["tokens"].to_list(), f)
        ax.plot(x, g["baseline_top1"].to_numpy(), "k-o", ms=3, label="baseline")
        ax.plot(x, g["ablated_top1"].to_numpy(), "r-o", ms=3, label="prev-token circuit ablated")
        ax.plot(x, g["random_top1_mean"].to_numpy(), "b--o", ms=3, label="reference sets (mean)")
        if "copy_null_top1" in g.columns and g["copy_null_top1"].drop_nulls().len():
            ax.plot(x, g["copy_null_top1"].cast(pl.Float64).to_numpy(), ":", color="0.5", marker="x", ms=3,
                    label="copying null (shuffled-B control, baseline)")
        d = g["destroys_induction"].to_numpy()
        ax.scatter(x[d], g["ablated_top1"].to_numpy()[d], s=70, facecolors="none", edgecolors="r")
        on = g["onset_tokens"][0]
        if on is not None:
            ax.axvline(f if on == 0 else on, color="r", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("training tokens")
        ax.set_ylabel("top-1(B) at the query")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def plot_noise_floor(nf: pl.DataFrame, path) -> None:
    """Specialized-head fraction (heads above the noise floor of any class) vs the 30x count."""
    if nf.height == 0:
        return empty(path, "no noise-floor models")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x_all, f = token_x(nf["tokens"].to_list())
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, m in enumerate(nf["model"].unique(maintain_order=True).to_list()):
        c = colors[k % len(colors)]
        g = nf.filter((pl.col("model") == m) & (pl.col("class") == "any")).sort("tokens")
        x, _ = token_x(g["tokens"].to_list(), f)
        axes[0].plot(x, 100 * g["fraction_above"].to_numpy(), "o-", color=c, label=f"{m}: above floor")
        axes[0].plot(x, 100 * g["fraction_classified"].to_numpy(), "s--", color=c, alpha=0.7, label=f"{m}: ≥ 30×")
        gi = nf.filter((pl.col("model") == m) & (pl.col("class") == "induction")).sort("tokens")
        axes[1].plot(x, 100 * gi["fraction_above"].to_numpy(), "o-", color=c, label=f"{m}: above floor")
        axes[1].plot(x, 100 * gi["fraction_classified"].to_numpy(), "s--", color=c, alpha=0.7, label=f"{m}: ≥ 30×")
    axes[0].set_title("specialized heads (any class above its floor)")
    axes[1].set_title("induction: above floor vs classified")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"training tokens (0 drawn at {f:.0e})")
        ax.set_ylabel("% of heads")
        ax.set_ylim(-3, 103)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    save(fig, path)
