"""What the summary says where there is nothing to measure: no induction circuit formed, no
first-token sink, a token axis below the author's 1B-token origin. Each function returns the
sentence (or note) that replaces a placeholder, an empty table or a ranking of zeros; the
sections of :mod:`headtrace.report.summary` and the run's statements in
:mod:`headtrace.report.answers` call them only in those cases."""
from __future__ import annotations

import polars as pl

from headtrace.report.format import fmt_tokens


def tokens_or_dash(tokens) -> str:
    """Tokens, or "—" where there are none (never "?")."""
    return "—" if tokens is None else fmt_tokens(tokens)


def formed_clause(n_formed: int, n_models: int, milestone: str, noun: str = "model") -> str:
    """How many of the run's models (or independent runs: ``noun``) formed an induction circuit, counting
    models or runs, not revisions."""
    what = milestone  # in words: 'an induction circuit of at least 3 heads' (report.format.milestone_words)
    if n_formed == 0:
        return f"no {noun} formed {what}"
    if n_models == 1:
        return f"the {noun} formed {what}"
    return f"{n_formed} of the {n_models} {noun}s formed {what}"


def could_not_decide(items: list[str]) -> str:
    """``It could not decide A, nor B.``: one sentence over every undecided item."""
    if len(items) == 1:
        return f"It could not decide {items[0]}."
    return "It could not decide " + "; ".join(items[:-1]) + f"; nor {items[-1]}."


def floor_note(spread: pl.DataFrame) -> str:
    """Which layers the spread test leaves out (F1's floor) and why, said instead of leaving them out
    silently."""
    floors = [f for f in spread["floor_layers"].unique(maintain_order=True).to_list() if f] \
        if "floor_layers" in spread.columns else []
    if not floors:
        return ""
    return (f"The floor layers ({'; '.join(f.replace(',', ', ') for f in floors)}: Finding 1) are in the per-layer "
            "table above but left out of the spread test, whose subject is the layers above them.\n")


def no_sink_line(r: dict) -> str:
    """Finding 2b's sentence for a model in which no layer above the floor has a first-token head."""
    never = r.get("never_layers") or "every layer above the floor"
    return (f"- **{r['model']}**: no first-token head in any layer above the floor ({never.replace(',', ', ')}) "
            "by the last revision screened, so there is no onset to order.")


def f4_label(model: str, head_names: list[str]) -> str:
    """Finding 4's row label: the final circuit's heads, or that there is none."""
    if not head_names:
        return f"{model} (no final circuit: nothing to recall)"
    return f"{model} ({len(head_names)}-head circuit: {', '.join(head_names)})"


def f5_empty_note(induction_threshold: float) -> str:
    """Finding 5 when no head's induction selectivity crosses the circuit threshold at any revision."""
    return (f"No head's induction selectivity reaches {induction_threshold:g}× at any revision of any model run "
            "here, so there is no crossing for a PR rise to lead; the table is left out.\n")


def integral_all_zero(model: str, g: pl.DataFrame, last_tokens) -> str | None:
    """The PR integral section for a model whose author integral is 0 for every head (its axis,
    ln(max(tokens / 1e9, 1)), is 0 below 1B tokens): say so and rank by the paper's integral instead;
    None when some head's author integral is positive."""
    author = g["integral_author"].drop_nulls()
    if author.len() and float(author.abs().max()) > 0:
        return None
    by_paper = g.filter(pl.col("integral_paper").is_not_null()).sort("integral_paper", descending=True).head(3)
    top = ", ".join(f"L{r['layer']}H{r['head']} ({r['integral_paper']:.1f})" for r in by_paper.iter_rows(named=True))
    return (f"**{model}:** every head's author integral is 0: it integrates over ln(max(tokens / 1e9, 1)), which is "
            f"0 below 1B tokens, and the last revision screened is at {tokens_or_dash(last_tokens)} tokens, so it "
            "ranks nothing here. "
            + (f"By the paper's integral (over ln tokens) the largest are {top}.\n" if top else "\n"))


def chance_note(v: pl.DataFrame | None) -> str:
    """Under the ablation table: what top-1 would be by chance on this probe, from the unablated
    model's shuffled-B control (a context token that is not B, scored the same way), so that a
    baseline near 0 reads as what it is."""
    if v is None or not v.height or "baseline_top1_control" not in v.columns:
        return ""
    last = v.sort("tokens", nulls_last=True).tail(1).row(0, named=True)
    control, base = last.get("baseline_top1_control"), last.get("baseline_top1")
    if control is None or base is None:
        return ""
    return (f"At the last revision the unablated model puts B first in {100 * base:.1f}% of the probe sequences, "
            f"and a shuffled-B control token of the same context first in {100 * control:.1f}%: the level top-1 "
            "reaches by chance here. A baseline near that level leaves the ablation nothing to remove.")
