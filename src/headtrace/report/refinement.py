"""The summary.md section on adaptive refinement, worded from the ``f3_onsets`` table
(``headtrace.panel.refine.onsets`` decided every bracket and why it stopped)."""
from __future__ import annotations

import polars as pl

from headtrace.core.refinement import NO_POOL, OFF


def summary_section(onsets_df: pl.DataFrame) -> str:
    """The summary.md section on adaptive refinement: per refined model x milestone, the bracket
    from the configured revisions and after refinement, and why refinement stopped."""
    lines = ["## Adaptive refinement of the F3 onsets", ""]
    if not onsets_df.height:
        return "\n".join(lines + ["No models.", ""])
    for row in onsets_df.sort("model", "milestone").iter_rows(named=True):
        name = f"{row['model']} {row['milestone']}"
        if row["stop"] in (OFF, NO_POOL):
            lines.append(f"- {name}: {row['stop']}.")
            continue
        if row["hi_revision"] is None or row["lo_revision"] is None:
            lines.append(f"- {name}: {row['stop']}; nothing to refine.")
            continue
        before = (f"({row['unrefined_lo_revision']}, {row['unrefined_hi_revision']}] "
                  f"{_fmt_ratio(row['unrefined_ratio'])}")
        after = f"({row['lo_revision']}, {row['hi_revision']}] {_fmt_ratio(row['bracket_ratio'])}"
        lines.append(f"- {name}: onset bracket {before} from the configured revisions -> {after} after "
                     f"{row['rounds']} round(s), {row['n_added']} revision(s) added; {row['stop']}.")
    return "\n".join(lines + [""])


def _fmt_ratio(r) -> str:
    return "n/a" if r is None else f"{r:.3g}x"
