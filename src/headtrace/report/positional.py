"""The screen check of summary.md: which heads of the induction circuits are positional (the findings
table ``circuit_positional``, decided per cell by :mod:`headtrace.cell.positional`), in words."""
from __future__ import annotations

import polars as pl

__all__ = ["summary_section"]


def summary_section(flags: pl.DataFrame) -> str:
    """summary.md's check of the screen's circuits: per model, the revisions whose circuit holds
    positional heads, named, with their peak shares."""
    lines = ["## Screen check: positional heads in the induction circuits\n",
             "A circuit head is *positional* when more than half of its induction mass comes from the "
             "probe sequences of one A position (`positional.parquet`, `headtrace.cell.positional`): it "
             "attends to a fixed offset, not to the token after the earlier A, and passes the screen "
             "because the sampled baseline's 50 keys miss that offset. A content-matching head's peak "
             "share is near the probe's `uniform_peak_share`.\n"]
    if flags.is_empty():
        return "\n".join(lines + ["No model with per-sequence masses has an induction circuit.\n"])
    for model in flags["model"].unique(maintain_order=True):
        f = flags.filter(pl.col("model") == model)
        bad = f.filter(pl.col("positional_induction"))
        n_rev = f["revision"].n_unique()
        if bad.is_empty():
            top = f["induction_peak_share"].max()
            lines.append(f"- **{model}**: no positional head in the circuits of its {n_rev} revision(s) with a "
                         f"circuit (largest peak share {top:.2f}; uniform {f['uniform_peak_share'][0]:.2f}).")
            continue
        per_rev = bad.group_by("revision", "tokens", maintain_order=True).agg(
            heads=pl.format("L{}H{} ({})", "layer", "head", pl.col("induction_peak_share").round(2)))
        sizes = dict(f.group_by("revision").len().iter_rows())
        parts = [f"{r['revision']}: {len(r['heads'])} of {sizes[r['revision']]} — {', '.join(r['heads'])}"
                 for r in per_rev.iter_rows(named=True)]
        lines.append(f"- **{model}**: positional heads in the circuits of {per_rev.height} of {n_rev} revision(s) "
                     f"(uniform peak share {f['uniform_peak_share'][0]:.2f}): " + "; ".join(parts) + ".")
    return "\n".join(lines) + "\n"
