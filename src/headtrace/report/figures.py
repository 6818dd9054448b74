"""Figures of Paper B's findings (matplotlib, Agg backend). Every function takes DataFrames and an
output path and writes one PNG.

Token axes are logarithmic. A revision with ``tokens == 0`` (initialisation) cannot sit on a log
axis: it is drawn at ``zero_floor(tokens)`` = the smallest positive token count / 10 (rounded down
to a power of ten), with a hollow marker and a "0" tick label. Revisions with null tokens are
left out of token-axis plots (counted in the title). Missing PR values leave gaps in PR lines,
bridged by a thin dotted line.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np
import polars as pl

from headtrace.core.tables import head_name
from headtrace.findings import trajectory as T
from headtrace.report import onset_figures
from headtrace.report.format import fmt_tokens
from headtrace.report.plotting import (
    COLORS,
    _x,
    empty,
    grid,
    log_token_axis,
    model_colors,
    plt,
    save,
    x_at,
    zero_floor,
)


def plot_bos_fraction(f2: pl.DataFrame, path, best_class: bool = True) -> None:
    """First-token (BOS) fraction vs tokens, one line per model (dashed: best-class variant)."""
    df = _ordered(f2)
    floor = zero_floor(df["tokens"].to_list())
    colors = model_colors(df["model"].to_list())
    fig, ax = plt.subplots(figsize=(7, 4.2))
    any_zero = False
    for i, (m,) in enumerate(df["model"].unique(maintain_order=True).to_frame().iter_rows()):
        g = df.filter(pl.col("model") == m)
        x, zero = _x(g["tokens"].to_list(), floor)
        any_zero |= bool(zero.any())
        c = colors[m]
        y = 100 * g["bos_fraction"].to_numpy()
        ax.plot(x, y, "o-", color=c, label=f"{m}")
        if zero.any():
            ax.plot(x[zero], y[zero], "o", mfc="white", color=c)
        if best_class:
            ax.plot(x, 100 * g["bos_fraction_best_class"].to_numpy(), "--", color=c, alpha=0.6, lw=1)
    log_token_axis(ax, floor, any_zero)
    ax.set_ylabel("first-token heads (% of all heads)")
    ax.set_ylim(-2, 100)
    ax.grid(alpha=0.3, which="both")
    ax.legend(title="solid: sel ≥ threshold\ndashed: best class", fontsize=8, title_fontsize=8)
    ax.set_title("BOS-attractor formation" + _null_note(df), fontsize=10)
    save(fig, path)


def plot_bos_heatmap(f1: pl.DataFrame, path) -> None:
    """Layer x revision heat map of first-token heads (fraction of the layer), a panel per model in a
    grid of at most MAX_COLS panels a row; a model with no first-token head at any revision gets one
    line saying so instead of an all-zero map."""
    df = _ordered(f1)
    models = df["model"].unique(maintain_order=True).to_list()
    if not models:
        empty(path, "no first-token table (f1_bos_floor) rows")
        return
    none = [m for m in models if not df.filter(pl.col("model") == m)["n_first_token"].fill_null(0).sum()]
    drawn = [m for m in models if m not in none]
    note = ("No first-token head at any revision (nothing to map): " + ", ".join(none)) if none else ""
    if not drawn:
        empty(path, note)
        return
    fig, axes = grid(len(drawn), panel=(3.9, 3.6), layout="constrained")
    im = None
    for ax, m in zip(axes, drawn):
        g = df.filter(pl.col("model") == m)
        revs = g.select("revision", "tokens", "rev_index").unique().sort("rev_index")
        layers = sorted(g["layer"].unique().to_list())
        mat = np.full((len(layers), revs.height), np.nan)
        cnt = np.zeros_like(mat, dtype=int)
        li = {l: i for i, l in enumerate(layers)}
        col = {r: j for j, r in enumerate(revs["revision"].to_list())}
        for r in g.iter_rows(named=True):
            mat[li[r["layer"]], col[r["revision"]]] = r["n_first_token"] / max(r["n_heads"], 1)
            cnt[li[r["layer"]], col[r["revision"]]] = r["n_first_token"]
        im = ax.imshow(mat, origin="lower", aspect="auto", cmap="magma", vmin=0, vmax=1)
        if mat.size <= 200:  # counts only where they stay legible
            for (i, j), v in np.ndenumerate(cnt):
                if v:
                    ax.text(j, i, str(v), ha="center", va="center", fontsize=6,
                            color="black" if mat[i, j] > 0.6 else "white")
        ax.set_xticks(range(revs.height))
        ax.set_xticklabels([fmt_tokens(t) for t in revs["tokens"]], rotation=60, fontsize=7)
        step = max(1, len(layers) // 8)
        ax.set_yticks(range(0, len(layers), step))
        ax.set_yticklabels([f"L{l}" for l in layers[::step]], fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("checkpoint (tokens)", fontsize=8)
        ax.set_ylabel("layer", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="first-token heads / heads in layer")
    fig.suptitle("F1 — first-token heads per layer over training (numbers: head counts)", fontsize=11)
    if note:
        fig.supxlabel(note, fontsize=9, color="#444")
    save(fig, path)


def plot_circuit_recall(sizes: pl.DataFrame, recall: pl.DataFrame, path) -> None:
    """Left: induction-circuit size vs tokens. Right: recall of the final circuit vs tokens."""
    s, r = _ordered(sizes), _ordered(recall)
    floor = zero_floor(s["tokens"].to_list() + r["tokens"].to_list())
    colors = model_colors(s["model"].to_list() + r["model"].to_list())
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    any_zero = False
    for i, m in enumerate(s["model"].unique(maintain_order=True).to_list()):
        c = colors[m]
        g = s.filter(pl.col("model") == m)
        x, z = _x(g["tokens"].to_list(), floor)
        any_zero |= bool(z.any())
        a1.plot(x, g["n_induction_circuit"].to_numpy(), "o-", color=c, label=m)
        a1.plot(x, g["n_induction_class_threshold"].to_numpy(), ":", color=c, alpha=0.6)
        h = r.filter(pl.col("model") == m)
        if h.height:
            x2, z2 = _x(h["tokens"].to_list(), floor)
            any_zero |= bool(z2.any())
            y = h["recall"].to_numpy().astype(float)
            a2.plot(x2 * (1 + 0.04 * (i - 1)), 100 * y, "o-", color=c, label=m)  # slight offset: overlaps
    for ax in (a1, a2):
        log_token_axis(ax, floor, any_zero)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    a1.set_ylabel("heads")
    a1.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    a1.set_title("induction circuit size (solid: sel ≥ circuit thr.; dotted: ≥ class thr.)", fontsize=9)
    a2.set_ylabel("recall of final circuit (%)")
    a2.set_ylim(-5, 105)
    for lv in (100 / 3, 200 / 3):
        a2.axhline(lv, color="grey", lw=0.6, ls="--")
    a2.set_title("recall of the final-revision induction circuit", fontsize=9)
    save(fig, path)


def plot_head_trajectories(traj: pl.DataFrame, path, induction_threshold: float,
                           lead: pl.DataFrame | None = None, *, final: pl.DataFrame) -> None:
    """Per model (rows): PR (left) and induction selectivity (right, log y) of every final-revision
    induction head (``final``: the ``f4_final_circuit`` table) vs tokens; ``induction_threshold`` the
    dashed line. With ``lead`` (f5_pr_lead), PR-rise revisions are marked (triangle)."""
    fin = final.select("model", "layer", "head")
    models = fin["model"].unique(maintain_order=True).to_list()
    if not models:
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.text(0.5, 0.5, "no final-revision induction heads", ha="center")
        ax.axis("off")
        save(fig, path)
        return
    o = _ordered(traj.join(fin, on=["model", "layer", "head"]))
    # two panels per model (PR, selectivity), two models a row: at most MAX_COLS panels a row
    flat = grid(2 * len(models), panel=(3.9, 3.0), layout="constrained")[1]
    fig = flat[0].figure
    axes = [flat[2 * i:2 * i + 2] for i in range(len(models))]
    for row, m in zip(axes, models):
        g = o.filter(pl.col("model") == m)
        floor = zero_floor(g["tokens"].to_list())
        any_zero = False
        heads = g.select("layer", "head").unique().sort("layer", "head").iter_rows()
        for i, (L, H) in enumerate(heads):
            h = g.filter((pl.col("layer") == L) & (pl.col("head") == H)).sort("rev_index")
            x, z = _x(h["tokens"].to_list(), floor)
            any_zero |= bool(z.any())
            c = COLORS[i % len(COLORS)]
            pr = np.array([np.nan if v is None else v for v in h["pr"].to_list()], float)
            ok = np.isfinite(pr) & np.isfinite(x)
            if ok.sum() > 1 and not ok[np.isfinite(x)].all():  # bridge missing PR with a dotted line
                row[0].plot(x[ok], pr[ok], ":", color=c, lw=1, alpha=0.7)
            row[0].plot(x, pr, "o-", color=c, ms=3, label=head_name(L, H))
            sel = np.array([np.nan if v is None else max(v, 1e-2) for v in h["sel_induction"].to_list()], float)
            row[1].plot(x, sel, "o-", color=c, ms=3, label=head_name(L, H))
            if lead is not None:
                lr = lead.filter((pl.col("model") == m) & (pl.col("layer") == L) & (pl.col("head") == H))
                if lr.height and lr["pr_rise_tokens"][0] is not None:
                    t = lr["pr_rise_tokens"][0]
                    xr = x_at(t, floor)
                    yr = pr[np.nanargmin(np.abs(x - xr))] if np.isfinite(pr).any() else np.nan
                    row[0].plot([xr], [yr], "^", color=c, ms=9, mec="black")
        row[1].axhline(induction_threshold, color="grey", ls="--", lw=0.8)
        row[1].set_yscale("log")
        row[0].set_title(f"{m}: PR (▲ = PR rise)", fontsize=9)
        row[1].set_title(f"{m}: induction selectivity", fontsize=9)
        row[0].set_ylabel("PR", fontsize=8)
        row[1].set_ylabel("induction selectivity (×)", fontsize=8)
        for ax in row:
            log_token_axis(ax, floor, any_zero)
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    fig.suptitle("F5 — final-circuit heads: participation ratio and induction selectivity over training "
                 f"(dashed: the {induction_threshold:g}× circuit threshold)", fontsize=11)
    save(fig, path)


def plot_strongest_heads(strongest: pl.DataFrame, path) -> None:
    """One panel per class: the selectivity of the strongest head of that class at every revision
    (the findings' ``strongest_head`` table), one line per model against training tokens, log y; the
    class's threshold dashed; a filled marker where the strongest head reaches it, a hollow one below.
    A model whose strongest head rises towards a threshold it has not reached reads apart from one
    that stays near 1×."""
    s = strongest.filter(pl.col("tokens").is_not_null())
    classes = strongest["class"].unique(maintain_order=True).to_list()
    if not classes:
        empty(path, "no strongest heads: no trajectory")
        return
    fig, axes = grid(len(classes), panel=(3.9, 3.0), ncols=3, layout="constrained")
    colors = model_colors(strongest["model"].to_list())
    floor = zero_floor(s["tokens"].to_list())
    for ax, cls in zip(axes, classes):
        g = s.filter(pl.col("class") == cls)
        any_zero = False
        for m in g["model"].unique(maintain_order=True).to_list():
            h = g.filter(pl.col("model") == m)
            x, z = _x(h["tokens"].to_list(), floor)
            any_zero |= bool(z.any())
            y = np.maximum(h["selectivity"].to_numpy().astype(float), 1e-2)
            reached = h["reached"].to_numpy().astype(bool)
            ax.plot(x, y, "-", color=colors[m], lw=1.2, label=m)
            ax.plot(x[reached], y[reached], "o", color=colors[m], ms=4)
            ax.plot(x[~reached], y[~reached], "o", mfc="white", mec=colors[m], ms=4)
        thr = strongest.filter(pl.col("class") == cls)["threshold"][0]
        ax.axhline(thr, color="grey", ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set_title(f"{cls} (threshold {thr:g}×)", fontsize=9)
        ax.set_ylabel("strongest head's selectivity (×)", fontsize=8)
        log_token_axis(ax, floor, any_zero)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    fig.suptitle("The strongest head of each class over training (filled: at or above the threshold)"
                 + _null_note(strongest.filter(pl.col("class") == classes[0])), fontsize=11)
    save(fig, path)


VERDICT_COLORS = {"causal": "#2a7f2a", "partial": "#d2691e", "not_causal": "#b22222", "underpowered": "#a07000"}


def plot_ablation(ablation: pl.DataFrame, path, metric: str = "top1", verdicts: pl.DataFrame | None = None) -> None:
    """Per revision: baseline, circuit and final-circuit ablation vs the sets of the circuit's reference set
    (box + points), by the cell's primary ablation method (a second method's rows are left out). One panel
    per model (two a row); x = revision in training order. With ``verdicts`` (the cells' verdict tables)
    each revision is labelled with its circuit's verdict."""
    df = _ordered(ablation)
    if "method" in df.columns:  # the primary method is the cell's first
        first = pl.col("method").drop_nulls().first().over(["model", "revision"])
        df = df.filter(pl.col("method").is_null() | (pl.col("method") == first))
    models = df["model"].unique(maintain_order=True).to_list()
    if not models:
        empty(path, "no ablation ran")
        return
    width = min(9.0, max(5.0, 0.75 * max(df.filter(pl.col("model") == m)["revision"].n_unique() for m in models) + 2))
    flat = grid(len(models), panel=(width, 3.6), ncols=2, layout="constrained")[1]
    fig = flat[0].figure
    axes = np.array(flat, dtype=object).reshape(-1, 1)
    marks = {"baseline": ("k", "", "baseline (unablated)"), "circuit": ("C3", "o", "circuit ablated"),
             "final_circuit": ("C2", "s", "final circuit ablated"),
             "previous_token_circuit": ("C4", "D", "previous-token circuit ablated")}
    offsets = {"circuit": 0.28, "final_circuit": 0.36, "previous_token_circuit": 0.44}
    for ax, m in zip(axes[:, 0], models):
        g = df.filter(pl.col("model") == m)
        revs = g.select("revision", "tokens", "rev_index").unique().sort("rev_index")
        for j, rev in enumerate(revs["revision"]):
            rnd = g.filter((pl.col("revision") == rev) & (pl.col("condition") == "matched_random"))[metric] \
                .drop_nulls().to_numpy()
            if rnd.size:
                ax.boxplot([100 * rnd], positions=[j], widths=0.5, showfliers=False,
                           medianprops=dict(color="C0"))
                ax.plot(j + np.random.default_rng(j).uniform(-0.15, 0.15, rnd.size), 100 * rnd, ".",
                        color="C0", alpha=0.4, ms=3)
            prnd = g.filter((pl.col("revision") == rev)
                            & (pl.col("condition") == "previous_token_matched_random"))[metric].drop_nulls().to_numpy()
            if prnd.size:  # the previous-token circuit's matched sets, beside its marker
                ax.plot(np.full(prnd.size, j + 0.44), 100 * prnd, "x", color="C4", alpha=0.5, ms=4)
            for cond, (c, mk, _) in marks.items():
                sel = g.filter((pl.col("revision") == rev) & (pl.col("condition") == cond))
                v = sel[metric].drop_nulls()
                if not v.len():
                    continue
                # bootstrap interval over probe sequences (headtrace.causal.verdict), when the table has it
                lo, hi = ((sel[f"{metric}_lo"][0], sel[f"{metric}_hi"][0]) if f"{metric}_lo" in sel.columns
                          else (None, None))
                if cond == "baseline":  # dashed line across the slot, its interval shaded
                    ax.hlines(100 * v.mean(), j - 0.42, j + 0.42, colors=c, linestyles="--", lw=1.5)
                    if lo is not None and hi is not None:
                        ax.fill_between([j - 0.42, j + 0.42], 100 * lo, 100 * hi, color=c, alpha=0.08, lw=0)
                else:  # beside the box, so the draws stay visible; error bar = its interval
                    x = j + offsets[cond]
                    ax.plot([x], [100 * v.mean()], mk, color=c, ms=7)
                    if lo is not None and hi is not None:
                        ax.errorbar([x], [100 * v.mean()], yerr=[[100 * (v.mean() - lo)], [100 * (hi - v.mean())]],
                                    color=c, lw=1, capsize=2)
        ax.set_xticks(range(revs.height))
        ax.set_xticklabels([f"{r}\n{fmt_tokens(t)}" for r, t in zip(revs["revision"], revs["tokens"])],
                           fontsize=7)
        ax.set_xlim(-0.6, revs.height - 0.4)
        ax.set_ylim(bottom=0)
        if verdicts is not None and verdicts.height:  # the circuit's verdict above each revision
            vm = verdicts.filter((pl.col("model") == m) & (pl.col("circuit") == "circuit"))
            ymax = ax.get_ylim()[1]
            ax.set_ylim(top=ymax * 1.12)
            for j, rev in enumerate(revs["revision"]):
                v = vm.filter(pl.col("revision") == rev)
                if v.height:
                    word = "no circuit" if not v["n_heads"][0] else (v["verdict"][0] or "")
                    ax.text(j, ymax * 1.05, word.replace("_", " ").replace("underpowered", "underpow.").replace("partial", "in part"),
                            ha="center", fontsize=6.5, color=VERDICT_COLORS.get(word, "#666"))
        ax.set_title(m, fontsize=9)
        ax.set_ylabel(f"{metric} (%)", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    handles = [plt.Line2D([], [], color=c, marker=mk or None, ls="" if mk else "--", ms=8, label=lab)
               for c, mk, lab in marks.values()]
    handles.append(plt.Line2D([], [], color="C0", marker=".", ls="", label="reference sets (box)"))
    handles.append(plt.Line2D([], [], color="C4", marker="x", ls="", label="previous-token reference sets"))
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncols=3)
    fig.suptitle("Induction-task accuracy under ablation vs the head sets of the circuit's layers "
                 "(bars/band: 95% bootstrap interval over probe sequences; label: the circuit's verdict)", fontsize=10)
    save(fig, path)


def plot_all(traj: pl.DataFrame, out_dir, findings: dict[str, pl.DataFrame], ablation: pl.DataFrame | None = None,
             onset_bootstrap: pl.DataFrame | None = None, *, induction_threshold: float) -> dict[str, Path]:
    """Every figure into ``out_dir`` (ablation only when given; ``onset_bootstrap``: the
    ``f3_onset_bootstrap`` table, the F3 figure's intervals); returns name -> path. ``findings``:
    the findings tables by name, as the findings job wrote them (never recomputed here);
    ``induction_threshold``: the config's circuit threshold (the figures script passes it)."""
    F = findings
    out = Path(out_dir)
    paths = {"bos_fraction": out / "bos_fraction.png", "bos_heatmap": out / "bos_heatmap.png",
             "circuit_recall": out / "circuit_recall.png", "head_trajectories": out / "head_trajectories.png"}
    plot_bos_fraction(F["f2_bos_fraction"], paths["bos_fraction"])
    plot_bos_heatmap(F["f1_bos_floor"], paths["bos_heatmap"])
    plot_circuit_recall(F["circuit_size"], F["f4_recall"], paths["circuit_recall"])
    plot_head_trajectories(traj, paths["head_trajectories"], induction_threshold,
                           F["f5_pr_lead"], final=F["f4_final_circuit"])
    paths["layer_onset"] = out / "layer_onset.png"
    onset_figures.plot_layer_onset(F["f2_layer_onset"], paths["layer_onset"], F["f2_layer_spread"])
    paths["milestones"] = out / "milestones.png"
    onset_figures.plot_milestones(F["f3_milestones"], onset_bootstrap, traj.select("model", "revision", "tokens").unique(),
                                  paths["milestones"])
    paths["strongest_heads"] = out / "strongest_heads.png"
    plot_strongest_heads(F["strongest_head"], paths["strongest_heads"])
    if ablation is not None and ablation.height:
        paths["ablation"] = out / "ablation.png"
        plot_ablation(ablation, paths["ablation"])
    return paths


def _ordered(df: pl.DataFrame) -> pl.DataFrame:
    return T.with_rev_index(df).sort("model", "rev_index")


def _null_note(df: pl.DataFrame) -> str:
    n = df.filter(pl.col("tokens").is_null()).height
    return f" ({n} row(s) with unknown tokens not shown)" if n else ""
