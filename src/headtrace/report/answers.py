"""The run's answers, decided once: one :class:`ModelAnswer` per model and one :class:`RunAnswer`.

Every statement the headline, ``summary.md``, ``summary.html`` and the console make about a run is
decided here, from the tables the findings and ablation jobs wrote (nothing is recomputed):

* ``circuit_size``    -> the revisions screened per model (and the screened revision before a
  milestone, the lower end of its bracket when ``f3_onsets`` did not refine that milestone);
* ``f3_milestones``   -> the first revision reaching each milestone;
* ``f3_onsets``       -> the refined bracket (last revision before, first revision at) of a milestone;
* ``f3_gaps``         -> the timing gap (first-token milestone / induction milestone) with its interval
  (``gap_lo``/``gap_hi``) and censoring;
* ``f2_layer_spread`` -> the spread label of the sink over layers (``first`` onset);
* ``measures_over_training`` / ``measures_onsets`` -> the text probe's sink rate (Gu et al. 2025) at the
  final revision and the first revision reaching ``text_sink_50pct`` with its bracket (docs/measures.md);
* ``verdict``         -> every cell's causal verdict: the final circuit's at the last ablated revision,
  and every revision where the test decided (``causal`` / ``not_causal`` of a non-empty induction
  circuit).

The renderers (:mod:`headtrace.report.headline`, :mod:`~headtrace.report.html`,
:mod:`~headtrace.report.console`) only format these structures: a sentence is worded once, in
:func:`run_answer`, and every renderer prints the same words.

A milestone reached at revision r is only known to lie in the bracket (previous screened revision,
r]; the gap is therefore an interval: later in (lo_l, hi_l], earlier in (lo_e, hi_e] gives a ratio
in (lo_l / hi_e, hi_l / lo_e). Where ``f3_gaps`` gives its interval it is used as written; the
brackets fill in only a table without one. Printed bounds are rounded outward
(:func:`headtrace.report.format.fmt_bound`).

**Checkpoint integrity** (``suspect``): a mapping ``(model, revision) -> [flag, ...]`` (e.g.
``"duplicate_of step900"``, ``"not_descended_from_init"``). Every statement records the revisions it
rests on (``rests_on``); one resting on a flagged revision carries the flags, and the renderers
mark it (a dagger and a note naming the flag). The workflow fills it from the checkpoint-lineage
tables (:func:`headtrace.report.lineage.suspect`).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import polars as pl

from headtrace.causal import verdict as V
from headtrace.report import empty_case as EC
from headtrace.report import first_token as FT
from headtrace.report.format import fmt_bound, fmt_chance, fmt_interval, fmt_ratio, fmt_token_bound, milestone_words

__all__ = ["Milestone", "Gap", "Verdict", "Statement", "ModelAnswer", "RunAnswer", "GroupAnswer", "build",
           "model_answers", "group_answers",
           "run_answer", "verdict_of", "verdict_word", "underpowered_why",
           "effect_text", "fmt_metric", "CIRCUIT_MILESTONE", "SINK_MILESTONES", "DECIDED",
           "INDUCTION_CIRCUITS", "TextSink", "TEXT_SINK_MILESTONE"]

CIRCUIT_MILESTONE = "induction_3_heads"
TEXT_SINK_MILESTONE = "text_sink_50pct"  # measures_onsets: the text sink rate reaches half the heads
SINK_MILESTONES = ("first_token_10pct", "first_token_50pct")
DECIDED = ("causal", "not_causal")
INDUCTION_CIRCUITS = ("circuit", "final_circuit")  # the verdict rows that answer "is the induction circuit causal"

Suspect = Mapping[tuple[str, str], Iterable[str]]


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _get(row: Mapping | None, key: str, default=None):
    if row is None:
        return default
    v = row.get(key, default)
    return default if _nan(v) else v


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _names(ms: list[str]) -> str:
    if len(ms) <= 1:
        return "".join(ms)
    return ", ".join(ms[:-1]) + " and " + ms[-1]


# ---------------------------------------------------------------------------------------------
# the structures


@dataclass(frozen=True)
class Milestone:
    """When one milestone was first met: at ``revision`` (``tokens``), not at ``lo_revision``
    (``lo_tokens``, the screened or refined revision before it; None: met at the first revision)."""
    milestone: str
    known: bool = False  # the findings table has a row for it
    reached: bool = False
    revision: str | None = None
    tokens: float | None = None
    lo_revision: str | None = None
    lo_tokens: float | None = None
    refined: bool = False

    @property
    def rests_on(self) -> tuple[str, ...]:
        return tuple(r for r in (self.lo_revision, self.revision) if r is not None)

    @property
    def at_first(self) -> bool:
        return self.reached and self.lo_revision is None

    def bracket_tokens(self) -> str:
        """'(512K, 615K]', '≤ 20B (first screened)', 'not reached', '—' (no row): ends rounded outward."""
        if not self.known:
            return "—"
        if not self.reached:
            return "not reached"
        hi = fmt_token_bound(self.tokens, "hi") if self.tokens is not None else "?"
        if self.lo_revision is None:
            return f"≤ {hi} (first screened)"
        return f"({fmt_token_bound(self.lo_tokens, 'lo')}, {hi}]"

    def text(self) -> str:
        """'step1200 (512K–615K]' / 'not reached' / 'step0 (≤ 0; at the first revision screened)'."""
        if not self.known:
            return "—"
        if not self.reached:
            return "not reached"
        hi = fmt_token_bound(self.tokens, "hi") if self.tokens is not None else "? tokens"
        if self.lo_revision is None:
            return f"{self.revision} ({hi}; at the first revision screened)"
        return f"{self.revision} ({fmt_token_bound(self.lo_tokens, 'lo')}–{hi}]"


@dataclass(frozen=True)
class TextSink:
    """The text probe's sink rate (Gu et al. 2025) of one model: ``rate`` (0-1) at eps at ``revision``,
    the last revision with a text probe, and ``onset``, the first revision reaching half the heads."""
    eps: float
    rate: float | None
    revision: str | None
    tokens: float | None
    onset: Milestone

    @property
    def rests_on(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(((self.revision,) if self.revision else ()) + self.onset.rests_on))

    def text(self) -> str:
        """'25.0% at step1500 (alpha > 0.3); half the heads: step1200 (512K–615K]' / '—'."""
        if self.rate is None:
            return "—"
        onset = self.onset.text() if self.onset.known else "—"
        return f"{100 * self.rate:.1f}% at {self.revision} (alpha > {self.eps:g}); half the heads: {onset}"


@dataclass(frozen=True)
class Gap:
    """later / earlier in tokens: ``state`` is ``interval`` (both reached; ``lo``, ``hi`` the bracket
    ends' ratios, ``hi`` None when unbounded), ``no_sink`` (the later milestone not reached by the last
    revision: ``lo`` a lower bound), ``circuit_at_first`` (the earlier one already at the first
    revision: a lower bound), ``no_circuit``, ``same_revision`` (both first met at one revision) or
    ``unknown``."""
    later: str
    earlier: str
    state: str = "unknown"
    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    rests_on: tuple[str, ...] = ()

    @property
    def ordered(self) -> bool:
        """The later milestone after the earlier whatever the spacing hides (lo ≥ 1)."""
        return self.state == "interval" and self.lo is not None and self.lo >= 1

    @property
    def decided(self) -> bool:
        return self.ordered

    def why_undecided(self) -> str | None:
        """Why the gap is not decided, in a clause; None when it is."""
        if self.decided:
            return None
        return {
            "no_circuit": "no induction circuit formed",
            "no_sink": "no sink by the last revision: a lower bound only",
            "circuit_at_first": ("the circuit was already there at the first revision: a lower bound only"
                                 if self.lo is not None else "circuit and sink were both there at the first "
                                 "revision screened: no bound either way"),
            "same_revision": "both first seen at one revision: the checkpoint spacing does not order them",
            "interval": "the checkpoint spacing does not order circuit and sink",
            "unknown": "no milestone table",
        }[self.state]

    def text(self) -> str:
        """The gap cell: point value and the interval the brackets allow, ends rounded outward."""
        if self.state == "no_circuit":
            return "— (no circuit)"
        if self.state == "no_sink":
            return (f"> {fmt_bound(self.lo, 'lo')} (no sink by the last revision)" if self.lo is not None
                    else "sink not reached")
        if self.state == "circuit_at_first":
            return (f"≥ {fmt_bound(self.lo, 'lo')} (circuit already at the first revision)" if self.lo is not None
                    else "circuit already at the first revision: unbounded")
        if self.state == "unknown":
            return "—"
        iv = fmt_interval(self.lo, self.hi)
        if self.state == "same_revision":
            return f"not separated: same revision (between {iv[1:-1].replace(', ', ' and ')})"
        head = fmt_ratio(self.ratio)
        if self.lo is not None and self.lo < 1:
            return f"{head}, in {iv}: order not settled by the spacing"
        return f"{head}, in {iv}"


@dataclass(frozen=True)
class Verdict:
    """One ablated induction circuit at one revision, as its verdict row says."""
    revision: str
    tokens: float | None
    circuit: str
    heads: tuple[str, ...]
    word: str  # causal | not_causal | underpowered | no circuit
    metric: str
    effect: float | None
    effect_lo: float | None
    effect_hi: float | None
    p: float | None
    n_sets: int  # distinct matched sets evaluated
    n_space: int | None  # the matched space's size (None: not recorded)
    exact: bool | None  # every set of the space evaluated (None: unknown)
    min_p: float | None
    why: str | None  # why the test cannot decide (underpowered only)
    why_not: str | None = None  # the causal criteria a decided not_causal circuit missed (not_causal only)
    floor: str | None = None  # why top-1 could not decide (its baseline at the floor) and what did
    upper_share: float | None = None
    saturates: bool | None = None
    row: Mapping = field(default_factory=dict, compare=False, repr=False)

    @property
    def decided(self) -> bool:
        return self.word in DECIDED and bool(self.heads)

    def control_text(self) -> str:
        """'all 70 matched sets (exact)' / '20 of 1820 matched sets (sampled)' / '20 matched sets
        (space size not recorded)' / 'no matched control'."""
        n = self.n_sets
        if not n:
            return "no matched control"
        if self.exact:
            return f"all {_plural(n, 'matched set')} (exact)"
        if self.exact is None or self.n_space is None:
            return f"{_plural(n, 'matched set')} (whether all: not recorded)"
        return f"{n} of {self.n_space} matched sets (sampled)"

    def p_text(self) -> str:
        """'p = 0.014 = 1/71' (the smallest p its sets allow) / 'p = 0.400'."""
        if _nan(self.p):
            return "p undefined"
        out = f"p = {self.p:.3f}"
        if self.n_sets and self.min_p is not None and abs(self.p - self.min_p) < 1e-12:
            out += f" = 1/{self.n_sets + 1}"
        return out


@dataclass(frozen=True)
class Statement:
    """One generated sentence, the (model, revision) pairs it rests on, and the checkpoint-integrity
    flags of those revisions ('toy-neox step1000: duplicate_of step900')."""
    text: str
    rests_on: tuple[tuple[str, str], ...] = ()
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    family: str
    n_revisions: int
    final_revision: str | None
    final_tokens: float | None
    circuit: Milestone
    sink10: Milestone
    sink50: Milestone
    gap50: Gap
    gap10: Gap
    final: Verdict | None  # the final circuit at the last ablated revision (None: not ablated)
    decided: tuple[Verdict, ...]  # every revision where the test decided, in token order
    undecided: tuple[Verdict, ...]  # every ablated induction circuit the test could not decide
    spread: str | None
    suspect: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    text_sink: TextSink | None = None  # None: no text probe ran for this model
    first_token: FT.FirstToken | None = None  # first-token heads at the last revision (report.first_token)

    # -- the final verdict, decided once
    @property
    def verdict(self) -> str:
        """causal | not_causal | underpowered | untested | no circuit | not ablated."""
        return "not ablated" if self.final is None else self.final.word

    @property
    def verdict_decided(self) -> bool:
        return self.final is not None and self.final.decided

    def reason(self) -> str:
        """Why the final verdict is what it is: the effect with its interval, p over how many sets
        (exact or sampled), and for ``underpowered`` the verdict's own reason."""
        v = self.final
        if v is None:
            return "no ablation at this revision"
        if not v.heads:
            return "no induction circuit at the final revision (nothing to ablate)"
        stats = f"effect {effect_text(v)}"
        if v.n_sets:
            stats += f", {v.p_text()} over {v.control_text()}"
        elif v.word != "underpowered":  # an underpowered verdict's reason already says so
            stats += ", no matched control"
        if v.upper_share is not None:
            stats += f"; {100 * v.upper_share:.0f}% of the upper bound's effect"
        if v.floor:  # the decision metric is not the one asked for: say why first
            stats = f"{v.floor}: {stats}"
        if v.word == "underpowered":
            return f"{v.why}; {stats}"
        if v.why_not:
            return f"{stats}; not causal: {v.why_not}"
        return stats

    def short_reason(self) -> str:
        """The reason in a few words, for the headline cell."""
        v = self.final
        if v is None or not v.heads:
            return ""
        if v.word == "underpowered":
            return v.why or ""
        return f"effect {effect_text(v)}" + (f", p={v.p:.3f} ({v.n_sets} sets{', exact' if v.exact else ''})"
                                             if v.n_sets and not _nan(v.p) else "")

    # -- decided verdicts over revisions
    def decided_words(self) -> str:
        """'causal at s2 and s3; not causal at s1, as top1 after ablation 0.297 > 0.5 x baseline 0.500':
        the revisions per decided verdict, each ``not_causal`` one with the criteria it missed
        (revisions that missed the same ones share the clause)."""
        by: dict[str, list[str]] = {}
        why: dict[str, list[str]] = {}
        for v in self.decided:
            if v.word == "not_causal":
                why.setdefault(v.why_not or "", [])
                if v.revision not in why[v.why_not or ""]:
                    why[v.why_not or ""].append(v.revision)
            elif v.revision not in by.setdefault(v.word, []):
                by[v.word].append(v.revision)
        out = [f"causal at {_names(by['causal'])}"] if by.get("causal") else []
        out += [f"not causal at {_names(revs)}" + (f", as {reason}" if reason else "") for reason, revs in why.items()]
        return "; ".join(out)

    @property
    def causal_at(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.decided if v.word == "causal")

    @property
    def best(self) -> Verdict | None:
        """The decided verdict with the smallest p (ties: the earliest)."""
        ok = [v for v in self.decided if not _nan(v.p)]
        return min(ok, key=lambda v: v.p) if ok else None

    def flags_of(self, revisions: Iterable[str]) -> tuple[str, ...]:
        """'rev: flag' for every flagged revision among ``revisions``."""
        out = []
        for r in revisions:
            out += [f"{self.model} {r}: {f}" for f in self.suspect.get(r, ())]
        return tuple(dict.fromkeys(out))

    @property
    def final_rests_on(self) -> tuple[str, ...]:
        return () if self.final is None else (self.final.revision,)


@dataclass(frozen=True)
class RunAnswer:
    models: tuple[ModelAnswer, ...]
    statements: tuple[Statement, ...]
    all_decided: bool  # every model's final verdict and gap decided (the last statement says so)
    groups: tuple["GroupAnswer", ...] = ()  # seed groups: one statement each, after the models'

    @property
    def sentences(self) -> list[str]:
        return [s.text for s in self.statements]

    @property
    def flags(self) -> tuple[str, ...]:
        out: list[str] = []
        for s in self.statements:
            out += [f for f in s.flags if f not in out]
        return tuple(out)


def effect_text(v: Verdict | Mapping) -> str:
    """The effect on the decision metric with its bootstrap interval. Top-1/top-5 effects are differences
    of two percentages, so in percentage points, with the relative drop beside them: '40.00 pp [30.00,
    50.00] (80% of the baseline)'; the cross-entropy in nats: '2.92 nats [2.19 nats, 3.70 nats]'."""
    row = v.row if isinstance(v, Verdict) else v
    if isinstance(v, Verdict):
        metric, x, lo, hi = v.metric, v.effect, v.effect_lo, v.effect_hi
    else:
        metric = v.get("metric") or "top1"
        x, lo, hi = v.get("effect"), v.get("effect_lo"), v.get("effect_hi")
    if metric not in ("top1", "top5") or _nan(x):
        ci = f" [{fmt_metric(metric, lo)}, {fmt_metric(metric, hi)}]" if not _nan(lo) else ""
        return fmt_metric(metric, x) + ci
    base = _get(row, "baseline_value", _get(row, "baseline_top1"))
    ci = f" [{100 * lo:.2f}, {100 * hi:.2f}]" if not _nan(lo) and not _nan(hi) else ""
    rel = f" ({x / base:.0%} of the baseline)" if base else ""
    return f"{100 * x:.2f} pp{ci}{rel}"


def fmt_metric(metric: str, x) -> str:
    """A metric's value as printed: top-1 as a percentage, logit and cross-entropy to 2 decimals."""
    return "nan" if _nan(x) else (f"{x:.2%}" if metric in ("top1", "top5") else f"{x:.2f}" + UNITS.get(metric, ""))


UNITS = {"ce": " nats"}


# ---------------------------------------------------------------------------------------------
# building


def verdict_word(v: Mapping | None) -> str:
    if v is None:
        return "not ablated"
    if not v.get("n_heads"):
        return "no circuit"
    return v.get("verdict") or ("causal" if v.get("causal") else "not_causal")


def underpowered_why(v: Mapping) -> str:
    """Why an ``underpowered`` row cannot decide: the verdict's own ``underpowered_reason`` when it
    has one (a control of other per-layer sizes, a full layer, too few sets); else, for older tables,
    the smallest p its sets allow, or no control at all."""
    own = v.get("underpowered_reason")
    if own:
        return str(own)
    n_sets = v.get("n_distinct_draws") or 0
    min_p = v.get("min_p")
    if n_sets and not _nan(min_p):
        return f"the smallest p {_plural(n_sets, 'matched set')} allow is {min_p:.3f} > alpha"
    return "no matched-random sets, nothing to compare with"


def _heads(v: Mapping | None) -> tuple[str, ...]:
    h = None if v is None else v.get("heads")
    if h is None:
        return ()
    return tuple(str(x) for x in (h.to_list() if hasattr(h, "to_list") else h))


def verdict_of(v: Mapping) -> Verdict:
    word = verdict_word(v)
    n_space = _get(v, "n_matched_sets")
    exact = v.get("control_exact")
    if n_space is None and exact:  # a table written before null meant 'not recorded'
        exact = None
    return Verdict(
        revision=v["revision"], tokens=_get(v, "tokens"), circuit=str(v.get("circuit") or "circuit"),
        heads=_heads(v), word=word, metric=v.get("metric") or "top1", effect=_get(v, "effect"),
        effect_lo=_get(v, "effect_lo"), effect_hi=_get(v, "effect_hi"), p=_get(v, "p_value"),
        n_sets=int(v.get("n_distinct_draws") or 0), n_space=None if n_space is None else int(n_space),
        exact=None if exact is None else bool(exact), min_p=_get(v, "min_p"),
        why=underpowered_why(v) if word == "underpowered" else None,
        why_not=(v.get("not_causal_reason") or None) if word == "not_causal" else None, floor=v.get("floor_reason"),
        upper_share=_get(v, "upper_bound_share"), saturates=v.get("upper_bound_saturates"), row=dict(v))


def _revisions(sizes: pl.DataFrame | None, model: str) -> list[tuple[str, float | None]]:
    """The model's screened (revision, tokens), in token order (unknown tokens last)."""
    if sizes is None or not sizes.height or "model" not in sizes.columns:
        return []
    g = sizes.filter(pl.col("model") == model).select("revision", "tokens").unique(maintain_order=True)
    return list(g.sort("tokens", nulls_last=True, maintain_order=True).iter_rows())


def _milestone(F: Mapping[str, pl.DataFrame], model: str, milestone: str,
               revs: list[tuple[str, float | None]], table: str = "f3_milestones") -> Milestone:
    d = {"revision": None, "tokens": None, "lo_revision": None, "lo_tokens": None, "refined": False,
         "reached": False, "known": False}
    ms = F.get(table)
    if ms is not None and ms.height:
        r = ms.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            d["known"] = True
            row = r.row(0, named=True)
            d["revision"], d["tokens"] = _get(row, "revision"), _get(row, "tokens")
            d["reached"] = d["revision"] is not None
    on = F.get("f3_onsets")
    if on is not None and on.height and d["reached"]:
        r = on.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            row = r.row(0, named=True)
            if _get(row, "hi_revision") is not None:
                d.update(revision=_get(row, "hi_revision"), tokens=_get(row, "hi_tokens", d["tokens"]),
                         lo_revision=_get(row, "lo_revision"), lo_tokens=_get(row, "lo_tokens"),
                         refined=bool(_get(row, "rounds", 0) or _get(row, "n_added", 0)))
                return Milestone(milestone, **d)
    if d["reached"]:
        names = [r for r, _ in revs]
        if d["revision"] in names:
            i = names.index(d["revision"])
            if i > 0:
                d["lo_revision"], d["lo_tokens"] = revs[i - 1]
    return Milestone(milestone, **d)


def _gap(F: Mapping[str, pl.DataFrame], model: str, later: Milestone, earlier: Milestone,
         final: tuple[str | None, float | None]) -> Gap:
    ratio = lo = hi = None
    row = None
    gaps = F.get("f3_gaps")
    if gaps is not None and gaps.height:
        r = gaps.filter((pl.col("model") == model) & (pl.col("later") == later.milestone)
                        & (pl.col("earlier") == earlier.milestone))
        if r.height:
            row = r.row(0, named=True)
            ratio = _get(row, "gap_ratio")
            lo, hi = _get(row, "gap_lo"), _get(row, "gap_hi")  # the findings job's, as written
    base = earlier.rests_on + later.rests_on
    mk = (lambda state, lo=lo, hi=hi, rests=base: Gap(later.milestone, earlier.milestone, state, ratio, lo, hi,
                                                      tuple(dict.fromkeys(rests))))
    if not earlier.reached:
        return mk("no_circuit", None, None, earlier.rests_on)
    final_rev, final_tok = final
    if not later.reached or (row is not None and _get(row, "later_right_censored")):
        if lo is None and earlier.tokens and final_tok:
            lo = float(final_tok) / float(earlier.tokens)
        return mk("no_sink", lo, None, earlier.rests_on + ((final_rev,) if final_rev else ()))
    if (row is not None and _get(row, "earlier_left_censored")) or (row is None and earlier.at_first):
        if row is None and lo is None and later.lo_tokens is not None and earlier.tokens:
            lo = float(later.lo_tokens) / float(earlier.tokens)
        return mk("circuit_at_first", lo, None)
    if lo is None and hi is None:
        if earlier.tokens and later.lo_tokens is not None:
            lo = float(later.lo_tokens) / float(earlier.tokens)
        if later.tokens is not None and earlier.lo_tokens:
            hi = float(later.tokens) / float(earlier.lo_tokens)
    same = _get(row, "same_revision") if row is not None else None
    return mk("same_revision" if (same or later.revision == earlier.revision) else "interval", lo, hi)


def _text_sink(F: Mapping[str, pl.DataFrame], model: str) -> TextSink | None:
    """The model's text sink rate at its last revision with a text probe (the first eps of
    ``measures_over_training``) and the ``text_sink_50pct`` onset of ``measures_onsets`` with its bracket."""
    over = F.get("measures_over_training")
    if over is None or not over.height:
        return None
    g = over.filter((pl.col("model") == model) & (pl.col("eps") == over["eps"][0])).drop_nulls("text_sink_rate")
    if not g.height:
        return None
    last = g.sort("tokens", nulls_last=True, maintain_order=True).tail(1).row(0, named=True)
    onset = Milestone(TEXT_SINK_MILESTONE)
    ons = F.get("measures_onsets")
    if ons is not None and ons.height:
        r = ons.filter((pl.col("model") == model) & (pl.col("milestone") == TEXT_SINK_MILESTONE))
        if r.height:
            row = r.row(0, named=True)
            reached = _get(row, "revision") is not None
            onset = Milestone(TEXT_SINK_MILESTONE, known=True, reached=reached, revision=_get(row, "revision"),
                              tokens=_get(row, "tokens"), lo_revision=_get(row, "lo_revision") if reached else None,
                              lo_tokens=_get(row, "lo_tokens") if reached else None)
    return TextSink(float(last["eps"]), float(last["text_sink_rate"]), last["revision"], _get(last, "tokens"), onset)


def _model_verdicts(verdicts: pl.DataFrame | None, model: str) -> tuple[Verdict | None, list[Verdict]]:
    """(the final circuit's verdict at the last ablated revision, every induction-circuit verdict
    in token order)."""
    if verdicts is None or not verdicts.height:
        return None, []
    g = verdicts.filter(pl.col("model") == model)
    if "circuit" in g.columns:
        g = g.filter(pl.col("circuit").is_in(list(INDUCTION_CIRCUITS)))
    if not g.height:
        return None, []
    g = g.sort("tokens", nulls_last=True, maintain_order=True)
    rows = [verdict_of(r) for r in g.iter_rows(named=True)]
    last = rows[-1].revision
    at_last = [v for v in rows if v.revision == last]
    final = next((v for v in at_last if v.circuit == "final_circuit"), at_last[0])
    return final, rows


def _label(F: Mapping[str, pl.DataFrame], model: str) -> str | None:
    spread = F.get("f2_layer_spread")
    if spread is None or not spread.height:
        return None
    sp = spread.filter(pl.col("model") == model)
    if "onset" in sp.columns:
        sp = sp.filter(pl.col("onset") == "first")
    return _get(sp.row(0, named=True), "label") if sp.height else None


def _models_of(F: Mapping[str, pl.DataFrame]) -> list[str]:
    seen: list[str] = []
    for name in ("circuit_size", "f3_milestones", "f3_gaps"):
        t = F.get(name)
        if t is not None and "model" in t.columns:
            seen += [m for m in t["model"].unique(maintain_order=True).to_list() if m not in seen]
    return seen


def model_answers(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None = None, *,
                  families: Mapping[str, str] | None = None, models: Iterable[str] | None = None,
                  circuit_milestone: str | None = None, sink_milestones: tuple[str, str] = SINK_MILESTONES,
                  suspect: Suspect | None = None) -> list[ModelAnswer]:
    """One :class:`ModelAnswer` per model. ``circuit_milestone``: default the ``earlier`` milestone of
    ``f3_gaps`` (``induction_3_heads`` when it has none). ``families``: the family each model resolved
    to (a model missing there: '—')."""
    F = dict(findings)
    gaps = F.get("f3_gaps")
    if circuit_milestone is None:
        earlier = gaps["earlier"].unique(maintain_order=True).to_list() if gaps is not None and gaps.height else []
        circuit_milestone = earlier[0] if earlier else CIRCUIT_MILESTONE
    models = list(models) if models is not None else _models_of(F)
    flags: dict[str, dict[str, tuple[str, ...]]] = {}
    for (m, r), fl in (suspect or {}).items():
        fl = tuple(str(f) for f in fl if f)
        if fl:
            flags.setdefault(m, {})[r] = fl
    out = []
    for m in models:
        revs = _revisions(F.get("circuit_size"), m)
        final_rev, final_tok = revs[-1] if revs else (None, None)
        circ = _milestone(F, m, circuit_milestone, revs)
        s10 = _milestone(F, m, sink_milestones[0], revs)
        s50 = _milestone(F, m, sink_milestones[1], revs)
        final, rows = _model_verdicts(verdicts, m)
        out.append(ModelAnswer(
            model=m, family=(families or {}).get(m) or "—", n_revisions=len(revs),
            final_revision=final_rev, final_tokens=final_tok, circuit=circ, sink10=s10, sink50=s50,
            gap50=_gap(F, m, s50, circ, (final_rev, final_tok)), gap10=_gap(F, m, s10, circ, (final_rev, final_tok)),
            final=final, decided=tuple(v for v in rows if v.decided),
            undecided=tuple(v for v in rows if v.word == "underpowered"),
            spread=_label(F, m), suspect=flags.get(m, {}), text_sink=_text_sink(F, m), first_token=FT.of(F, m)))
    return out


# ---------------------------------------------------------------------------------------------
# seed groups (headtrace.findings.groups): one answer per group, from its tables


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


# ---------------------------------------------------------------------------------------------
# the run's statements


def _statement(text: str, parts: Iterable[tuple[ModelAnswer, Iterable[str]]]) -> Statement:
    rests: list[tuple[str, str]] = []
    flags: list[str] = []
    for a, revs in parts:
        revs = [r for r in revs if r]
        rests += [(a.model, r) for r in revs if (a.model, r) not in rests]
        flags += [f for f in a.flags_of(revs) if f not in flags]
    return Statement(text, tuple(rests), tuple(flags))


def _formation(answers: list[ModelAnswer]) -> Statement:
    n = len(answers)
    total = sum(a.n_revisions for a in answers)
    formed = [a for a in answers if a.circuit.reached]
    ms = milestone_words(answers[0].circuit.milestone)
    s = f"This run screened {_plural(n, 'model')} over {_plural(total, 'revision')} in all; " + EC.formed_clause(len(formed), n, ms)
    parts: list[tuple[ModelAnswer, Iterable[str]]] = []
    known = [a for a in formed if a.circuit.tokens is not None]
    if known:
        first = min(known, key=lambda a: a.circuit.tokens)
        c = first.circuit
        when = (f"by {fmt_token_bound(c.tokens, 'hi')} tokens ({c.revision}, already at the first revision "
                "screened)" if c.lo_revision is None else
                f"after {fmt_token_bound(c.lo_tokens, 'lo')} and by {fmt_token_bound(c.tokens, 'hi')} tokens "
                f"({c.revision})")
        s += f", the earliest {first.model} {when}"
        parts.append((first, c.rests_on))
    never = [a for a in answers if a.circuit.known and not a.circuit.reached]
    if never:
        s += f"; {_names([a.model for a in never])} never did by the last revision screened"
        parts += [(a, (a.final_revision,)) for a in never]
    return _statement(s + ".", parts)


def _sink(answers: list[ModelAnswer]) -> Statement:
    n = len(answers)
    sinks = [a for a in answers if a.sink50.reached]
    ordered = [a for a in sinks if a.gap50.ordered]
    s = f"A first-token sink on half the heads came in {len(sinks)} of {n} models"
    parts: list[tuple[ModelAnswer, Iterable[str]]] = [(a, a.sink50.rests_on) for a in sinks]
    if ordered:
        lo = min(ordered, key=lambda a: a.gap50.lo)
        s += (f"; in {_names([a.model for a in ordered])} it came after the induction circuit whatever the "
              f"checkpoint spacing hides (at least {fmt_bound(lo.gap50.lo, 'lo')} more tokens at the ends of the "
              "brackets; each model's interval is in the table)")
        parts += [(a, a.gap50.rests_on) for a in ordered]
    return _statement(s + ".", parts)


def _text_sinks(answers: list[ModelAnswer]) -> Statement | None:
    """The text probe's sink rate (Gu et al. 2025) at each model's final revision and when it first reached
    half the heads; None when no model ran a text probe."""
    with_text = [a for a in answers if a.text_sink is not None]
    if not with_text:
        return None
    eps = with_text[0].text_sink.eps
    bits, parts = [], []
    for a in with_text:
        t = a.text_sink
        o = t.onset
        if o.reached and o.lo_revision is not None:
            when = f"half the heads after {fmt_token_bound(o.lo_tokens, 'lo')} and by {fmt_token_bound(o.tokens, 'hi')} tokens ({o.revision})"
        elif o.reached:
            when = f"half the heads already at the first revision ({o.revision})"
        elif o.known:
            when = "never half the heads by the last revision"
        else:
            when = "no onset computed"
        bits.append(f"{a.model} {100 * t.rate:.1f}% at {t.revision}, {when}")
        parts.append((a, t.rests_on))
    return _statement(f"On the text probe, the share of heads that are sinks (Gu et al.'s sink rate: mean attention "
                      f"to the first token above {eps:g}, per sequence) was: " + "; ".join(bits) + ".", parts)


def _where_decided(answers: list[ModelAnswer]) -> Statement:
    """Where the causal test (the recipe's third step) decided, per model: the revisions, the
    smallest p, over how many sets; then where it could not."""
    ablated = [a for a in answers if a.final is not None]
    if not ablated:
        return _statement("The causal test (ablating the induction circuit against matched-random head sets) "
                          "ran on no revision of this run.", [])
    said, parts = [], []
    for a in ablated:
        if not a.decided:
            continue
        best = a.best
        bit = f"{a.model}: {a.decided_words()}"
        if best is not None:
            on = "" if best.metric == "top1" else f" on {V.METRIC_WORDS.get(best.metric, best.metric)}"
            bit += (f" (smallest {best.p_text()}{on}: the {len(best.heads)}-head {best.circuit.replace('_', ' ')} at "
                    f"{best.revision}, over {best.control_text()})")
        said.append(bit)
        parts.append((a, [v.revision for v in a.decided]))
    none = [a.model for a in ablated if not a.decided]
    if said:
        s = "The causal test (ablating the induction circuit against matched-random head sets) decided in " \
            + "; ".join(said)
        if none:
            s += f"; it decided at no revision of {_names(none)}"
    else:
        s = ("The causal test (ablating the induction circuit against matched-random head sets) decided at no "
             f"revision of {_names(none)}")
    return _statement(s + ".", parts)


FINAL_SAY = (("causal", "causal"), ("not_causal", "not causal"), ("underpowered", "underpowered"),
             ("untested", "untested (no behaviour for top-1 to lose)"),
             ("no circuit", "no circuit to ablate"), ("not ablated", "not ablated"))


def _final(answers: list[ModelAnswer]) -> Statement:
    by: dict[str, list[ModelAnswer]] = {}
    for a in answers:
        by.setdefault(a.verdict, []).append(a)
    bits = [f"{say} in {_names([a.model for a in by[w]])}" for w, say in FINAL_SAY if by.get(w)]
    return _statement("Ablating the final circuit at the last revision: " + "; ".join(bits) + ".",
                      [(a, a.final_rests_on) for a in answers])


def _undecided(answers: list[ModelAnswer]) -> tuple[Statement, bool]:
    items, parts = [], []
    under = [a for a in answers if a.verdict == "underpowered"]
    if under:
        why: dict[str, list[str]] = {}
        for a in under:
            why.setdefault(a.final.why or "", []).append(a.model)
        items.append(f"whether the final circuit is causal in {_plural(len(under), 'model')} (underpowered — "
                     + "; ".join(f"{_names(ms)}: {w}" for w, ms in why.items()) + ")")
        parts += [(a, a.final_rests_on) for a in under]
    empty = [a for a in answers if a.verdict in ("no circuit", "not ablated")]
    if empty:
        nothing = [a.model for a in empty if a.verdict == "no circuit"]
        skipped = [a.model for a in empty if a.verdict == "not ablated"]
        items.append("whether an induction circuit is causal in " + "; ".join(
            ([f"{_names(nothing)} (no circuit at the final revision to ablate)"] if nothing else [])
            + ([f"{_names(skipped)} (not ablated)"] if skipped else [])))
        parts += [(a, a.final_rests_on) for a in empty]
    gaps: dict[str, list[ModelAnswer]] = {}
    for a in answers:
        w = a.gap50.why_undecided()
        if w is not None:
            gaps.setdefault(w, []).append(a)
    for w, ms in gaps.items():
        items.append(f"the gap between sink and circuit in {_names([a.model for a in ms])} ({w})")
        parts += [(a, a.gap50.rests_on) for a in ms]
    if items:
        return _statement(EC.could_not_decide(items), parts), False
    return _statement("Every model's final verdict and sink/circuit gap in this run was decided.",
                      [(a, a.final_rests_on + a.gap50.rests_on) for a in answers]), True


def run_answer(answers: list[ModelAnswer], groups: Iterable[GroupAnswer] = ()) -> RunAnswer:
    """The run's statements, in reading order: formation, the sink, where the causal test decided,
    the final circuit's verdicts, what could not be decided; then one per seed group."""
    groups = tuple(groups)
    if not answers:
        return RunAnswer((), (Statement("This run has no models with findings yet."),), False, groups)
    last, all_decided = _undecided(answers)
    ft = [(a, a.first_token) for a in answers if a.first_token is not None]
    first = FT.sentence([(a.model, f) for a, f in ft])
    text = [s for s in (first and _statement(first, [(a, f.rests_on) for a, f in ft]), _text_sinks(answers)) if s]
    return RunAnswer(tuple(answers), (_formation(answers), _sink(answers), *text,
                                      _where_decided(answers), _final(answers), last)
                     + tuple(g.statement() for g in groups), all_decided, groups)


def build(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None = None, *,
          families: Mapping[str, str] | None = None, suspect: Suspect | None = None,
          groups: Iterable[GroupAnswer] = (), **kw) -> RunAnswer:
    """The :class:`RunAnswer` of a run from its findings tables and verdict rows. ``suspect``:
    ``(model, revision) -> flags`` (checkpoint integrity: :func:`headtrace.report.lineage.suspect`);
    ``groups``: the seed groups' answers (:func:`group_answers`)."""
    return run_answer(model_answers(findings, verdicts, families=families, suspect=suspect, **kw), groups)
