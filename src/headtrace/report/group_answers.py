"""A seed group's answers (:class:`GroupAnswer`), from its tables (``results/groups/{group}/``,
:mod:`headtrace.findings.groups`); part of the run's answers (:mod:`headtrace.report.answers`)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping

import polars as pl

from headtrace.core.rounding import fmt_p
from headtrace.report.format import fmt_bound, fmt_chance, fmt_interval, fmt_token_bound, milestone_words
from headtrace.report.statements import Statement
from headtrace.report.words import CIRCUIT_MILESTONE, SINK_MILESTONES
from headtrace.report.words import get as _get
from headtrace.report.words import is_nan as _nan
from headtrace.report.words import names as _names
from headtrace.report.words import plural as _plural


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
        """'range of possible medians [200, 400] (3 of 3 seeds; 1 left-censored)' / 'not reached in 2 of 2
        seeds (range of possible medians > 768K)' / '—': the members' own bracket notation."""
        r = self.onsets.get(milestone)
        if r is None or not _get(r, "n_used", 0):
            return "—"
        lo, hi = _get(r, "median_lo"), _get(r, "median_hi")
        iv = (f"[{fmt_token_bound(lo, 'lo')}, {fmt_token_bound(hi, 'hi')}]" if hi is not None
              else f"> {fmt_token_bound(lo, 'lo')}")
        never = int(_get(r, "n_right_censored", 0))
        if never == r["n_used"]:
            return f"not reached in {never} of {self.n} seeds (range of possible medians {iv})"
        cens = [f"{r[k]} {w}" for k, w in (("n_left_censored", "already at the first revision"),
                                           ("n_right_censored", "never reached")) if _get(r, k, 0)]
        return (f"range of possible medians {iv} ({r['n_used']} of {self.n} seeds"
                + ("; " + ", ".join(cens) if cens else "") + ")")

    def order_text(self) -> str:
        """Which came first over the seeds, as :mod:`headtrace.findings.order` decides it for each member;
        orders that hold only because no sink came are counted apart, and a sign test resting on them alone
        is said to be vacuous."""
        g = self.pair
        if g is None:
            return "—"
        k, n = int(_get(g, "n_earlier_first", 0)), int(_get(g, "n_decided", 0))
        cens = int(_get(g, "n_by_censoring", 0))
        rest = [f"{g[c]} {w}" for c, w in (("n_undecided", "undecided by the brackets"), ("n_absent", "without findings"))
                if _get(g, c, 0)]
        first, second = milestone_words(g["earlier"]), milestone_words(g["later"])
        if n and cens == n:
            out = (f"{first} first in {k} of {n} {'seed' if n == 1 else 'seeds'} only in that {second} never came "
                   "by the last revision (orders by censoring, none seen)")
            out += (" (" + "; ".join(rest) + ")") if rest else ""
            return out + ": the sign test has no observed order to count (vacuous)"
        out = (f"{first} before {second} in {k} of {n} {'seed' if n == 1 else 'seeds'} whose brackets order them"
               + (f" ({cens} of them only because {second} never came)" if cens else ""))
        out += (" (" + "; ".join(rest) + ")") if rest else ""
        return out + f"; {_p_text(_get(g, 'p_sign'), n - cens, 'seen order' if cens else 'decided seed')}"

    def gap_text(self) -> str:
        """'range of possible median gaps [2.0×, 8.0×] over 3 seeds; smallest ..., largest ...' in the members'
        notation ('> 1.5×' for a gap bounded below only; ends rounded outward) / '—'."""
        g = self.pair
        if g is None or not _get(g, "n_gap", 0):
            return "—"

        def iv(lo, hi):
            return fmt_interval(lo, hi, left="[", right="]") if hi is not None else f"> {fmt_bound(lo, 'lo')}"
        return (f"range of possible median gaps {iv(_get(g, 'median_gap_lo'), _get(g, 'median_gap_hi'))}"
                f" over {_plural(int(g['n_gap']), 'seed')}; smallest "
                f"{iv(_get(g, 'smallest_gap_lo'), _get(g, 'smallest_gap_hi'))}, largest "
                f"{iv(_get(g, 'largest_gap_lo'), _get(g, 'largest_gap_hi'))}")

    def circuit_text(self) -> str:
        """'Jaccard median 0.33 over 1 pair; 2 of 6 heads recur in more than one seed'."""
        s = self.summary
        if not _get(s, "jaccard_n_pairs", 0):
            return "no pair of final circuits to compare"
        n = int(s["jaccard_n_pairs"])
        out = (f"Jaccard {s['jaccard_median']:.2f} (one pair)" if n == 1 else
               f"Jaccard median {s['jaccard_median']:.2f} over {n} pairs") + fmt_chance(s)
        if _get(s, "n_distinct_heads", 0):
            out += (f"; {s['n_recurring_heads']} of {s['n_distinct_heads']} circuit heads recur in more than one "
                    "seed")
            forced = _get(s, "n_recurring_forced")
            if forced:  # the layers' sizes alone make that many recur
                out += (f" (no more than the circuits' sizes in their layers force: at least {forced} must recur)"
                        if forced >= s["n_recurring_heads"] else
                        f" (the circuits' sizes in their layers force at least {forced})")
        return out

    def agreement_text(self) -> str:
        """'Finding 1's zero-sink floor held in 2 of 2; sink shape: sharp transition in 2 of 2' — or, where no
        seed had a first-token head anywhere, that neither had anything to test."""
        s = self.summary
        used, held, vac = (int(_get(s, k, 0)) for k in ("floor_n_used", "floor_n_held", "floor_n_vacuous"))
        if used and vac == used:
            return (f"no first-token head in any layer of {'the seed' if used == 1 else f'the {used} seeds'} at "
                    "any revision: Finding 1's floor and Finding 2's shape had nothing to test")
        bits = []
        if used:
            bits.append(f"Finding 1's zero-sink floor held in {held} of {used}"
                        + (f" ({vac} with no first-token head anywhere: nothing tested there)" if vac else ""))
        if _get(s, "shape_n_used", 0):
            bits.append(f"sink shape: {s['shape_modal']} in {s['shape_n_agree']} of {s['shape_n_used']}"
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
            bits.append(f"its own circuit {100 * statistics.median(own):+.0f} pp beyond its reference set "
                        f"(median of {_plural(len(own), 'seed')})")
        if other:
            bits.append(f"another seed's {100 * statistics.median(other):+.0f} pp (median of "
                        f"{_plural(len(other), 'pair')})")
        return "cross-seed ablation, top-1 drop in a seed's final model: " + "; ".join(bits)

    def statement(self) -> Statement:
        names = _names([m for m, _ in self.members])
        have = ("both with findings" if self.n_present == self.n == 2 else
                f"all {self.n} with findings" if self.n_present == self.n else
                f"findings for {self.n_present} of {self.n}")
        text = (f"Across the {self.n} seeds of {self.group} ({names}; {have}): "
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


def _p_text(p: float | None, n: int, what: str = "decided seed") -> str:
    """'exact two-sided binomial p = 0.50 against 50% (the smallest 2 seeds allow)'."""
    if _nan(p) or not n:
        return "no member's order decided: no test"
    floor = 2 * 0.5 ** n
    out = f"exact two-sided binomial p = {fmt_p(p)} against 50%"
    if abs(p - min(1.0, floor)) < 1e-12:
        out += f", the smallest {_plural(n, what)} allow"
    return out
