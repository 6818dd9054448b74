"""A seed group's answers (:class:`GroupAnswer`), from its tables (``results/groups/{group}/``,
:mod:`headtrace.findings.groups`); part of the run's answers (:mod:`headtrace.report.answers`)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping

import polars as pl

from headtrace.report.format import fmt_chance, fmt_interval, fmt_token_bound, milestone_words
from headtrace.report.statements import Statement
from headtrace.report.words import CIRCUIT_MILESTONE, SINK_MILESTONES
from headtrace.report.words import get as _get
from headtrace.report.words import is_nan as _nan
from headtrace.report.words import names as _names
from headtrace.report.words import plural as _plural


def _p_text(p: float | None, n: int) -> str:
    """'exact two-sided binomial p = 0.50 against 50% (the smallest 2 seeds allow)'."""
    if _nan(p) or not n:
        return "no member's order decided: no test"
    floor = 2 * 0.5 ** n
    out = f"exact two-sided binomial p = {p:.3g} against 50%"
    if abs(p - min(1.0, floor)) < 1e-12:
        out += f", the smallest {_plural(n, 'decided seed')} allow"
    return out


@dataclass(frozen=True)
class GroupAnswer:
    """A seed group's answers, as its tables (``results/groups/{group}/``) say them. ``members``:
    (member, seed) in the config's order; ``pair``: the ``group_gaps`` row of the headline's pair
    (later, earlier); ``onsets``: milestone -> its ``group_milestones`` row; ``summary``: the
    ``group_summary`` row; ``cross_seed``: the group's cross-seed ablation rows (None: not run)."""
    group: str
    members: tuple[tuple[str, int], ...]
    family: str
    summary: Mapping
    pair: Mapping | None
    onsets: Mapping[str, Mapping]
    circuit_milestone: str
    sink_milestone: str
    cross_seed: tuple[Mapping, ...] | None = None

    @property
    def n(self) -> int:
        return len(self.members)

    @property
    def n_present(self) -> int:
        return int(_get(self.summary, "n_present", 0))

    def onset_text(self, milestone: str) -> str:
        """'median in [200, 400] tokens (3 of 3 members; 1 left-censored)' / '—'."""
        r = self.onsets.get(milestone)
        if r is None or not _get(r, "n_used", 0):
            return "—"
        lo, hi = _get(r, "median_lo"), _get(r, "median_hi")
        iv = (f"[{fmt_token_bound(lo, 'lo')}, {fmt_token_bound(hi, 'hi')}]" if hi is not None
              else f"≥ {fmt_token_bound(lo, 'lo')} (unbounded above)")
        cens = [f"{r[k]} {w}" for k, w in (("n_left_censored", "left-censored"), ("n_right_censored", "never reached"))
                if _get(r, k, 0)]
        return f"median {iv} ({r['n_used']} of {self.n} seeds" + ("; " + ", ".join(cens) if cens else "") + ")"

    def order_text(self) -> str:
        """'induction_3_heads before first_token_50pct in 2 of 2 seeds (exact two-sided binomial p = 0.5 ...)'."""
        g = self.pair
        if g is None:
            return "—"
        k, n = int(_get(g, "n_earlier_first", 0)), int(_get(g, "n_decided", 0))
        rest = [f"{g[c]} {w}" for c, w in (("n_undecided", "undecided by the brackets"), ("n_absent", "without findings"))
                if _get(g, c, 0)]
        out = (f"{milestone_words(g['earlier'])} before {milestone_words(g['later'])} in {k} of {n} "
               f"{'seed' if n == 1 else 'seeds'} whose brackets order them")
        out += (" (" + "; ".join(rest) + ")") if rest else ""
        return out + f"; {_p_text(_get(g, 'p_sign'), n)}"

    def gap_text(self) -> str:
        """'median gap [2.0×, 8.0×] over 3 seeds' (ends rounded outward) / '—'."""
        g = self.pair
        if g is None or not _get(g, "n_gap", 0):
            return "—"
        return (f"median gap {fmt_interval(_get(g, 'median_gap_lo'), _get(g, 'median_gap_hi'), left='[', right=']')}"
                f" over {_plural(int(g['n_gap']), 'seed')}; smallest "
                f"{fmt_interval(_get(g, 'smallest_gap_lo'), _get(g, 'smallest_gap_hi'), left='[', right=']')}, largest "
                f"{fmt_interval(_get(g, 'largest_gap_lo'), _get(g, 'largest_gap_hi'), left='[', right=']')}")

    def circuit_text(self) -> str:
        """'Jaccard median 0.33 over 1 pair; 2 of 6 heads recur in more than one seed'."""
        s = self.summary
        if not _get(s, "jaccard_n_pairs", 0):
            return "no pair of final circuits to compare"
        out = f"Jaccard median {s['jaccard_median']:.2f} over {_plural(int(s['jaccard_n_pairs']), 'pair')}" + fmt_chance(s)
        if _get(s, "n_distinct_heads", 0):
            out += (f"; {s['n_recurring_heads']} of {s['n_distinct_heads']} circuit heads recur in more than one "
                    "seed")
        return out

    def agreement_text(self) -> str:
        """'F1 floor held in 2 of 2; F2 shape sharp transition in 2 of 2'."""
        s = self.summary
        bits = []
        if _get(s, "floor_n_used", 0):
            bits.append(f"zero-sink floor held in {s['floor_n_held']} of {s['floor_n_used']}")
        if _get(s, "shape_n_used", 0):
            bits.append(f"sink shape '{s['shape_modal']}' in {s['shape_n_agree']} of {s['shape_n_used']}"
                        + (" (tied)" if _get(s, "shape_tied") else ""))
        return "; ".join(bits) if bits else "—"

    def cross_seed_text(self) -> str:
        """'own circuit: excess drop 40 pp (median over 2 seeds); another seed's: 5 pp (2 pairs)' / ''."""
        rows = [r for r in (self.cross_seed or ()) if not _nan(r.get("top1_drop_vs_random"))]
        if not rows:
            return ""
        own = [r["top1_drop_vs_random"] for r in rows if r.get("same_seed")]
        other = [r["top1_drop_vs_random"] for r in rows if not r.get("same_seed")]
        bits = []
        if own:
            bits.append(f"its own circuit {100 * statistics.median(own):+.0f} pp beyond matched-random "
                        f"(median of {_plural(len(own), 'seed')})")
        if other:
            bits.append(f"another seed's {100 * statistics.median(other):+.0f} pp (median of "
                        f"{_plural(len(other), 'pair')})")
        return "cross-seed ablation, top-1 drop in a seed's final model: " + "; ".join(bits)

    def statement(self) -> Statement:
        names = _names([m for m, _ in self.members])
        text = (f"Across the {self.n} seeds of {self.group} ({names}; findings for {self.n_present}): "
                f"{self.order_text()}; {self.gap_text()}; final circuits: {self.circuit_text()}")
        cs = self.cross_seed_text()
        return Statement(text + (f"; {cs}" if cs else "") + ".")


def group_answers(group_tables: Mapping[str, Mapping[str, pl.DataFrame]], *, families: Mapping[str, str] | None = None,
                  cross_seed: Mapping[str, pl.DataFrame] | None = None, circuit_milestone: str | None = None,
                  sink_milestone: str = SINK_MILESTONES[1]) -> list[GroupAnswer]:
    """One :class:`GroupAnswer` per group from its tables (:func:`headtrace.findings.groups.group_findings`
    by name). The pair: (``sink_milestone``, ``circuit_milestone``), default the first ``group_gaps``
    pair whose later milestone is ``sink_milestone`` (else the first pair), as the model rows'."""
    out = []
    for g, T in group_tables.items():
        mem = T["group_members"]
        members = tuple(zip(mem["member"].to_list(), mem["seed"].to_list()))
        gaps = T["group_gaps"]
        pair = None
        if gaps.height:
            cand = gaps.filter(pl.col("later") == sink_milestone)
            if circuit_milestone is not None:
                cand = cand.filter(pl.col("earlier") == circuit_milestone)
            pair = (cand if cand.height else gaps).row(0, named=True)
        fams = sorted({(families or {}).get(m) or "—" for m, _ in members})
        cs = (cross_seed or {}).get(g)
        out.append(GroupAnswer(
            group=g, members=members, family="/".join(fams), summary=T["group_summary"].row(0, named=True),
            pair=pair, onsets={r["milestone"]: r for r in T["group_milestones"].iter_rows(named=True)},
            circuit_milestone=pair["earlier"] if pair else (circuit_milestone or CIRCUIT_MILESTONE),
            sink_milestone=pair["later"] if pair else sink_milestone,
            cross_seed=None if cs is None else tuple(cs.iter_rows(named=True))))
    return out


