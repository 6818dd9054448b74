"""The run's answers, decided once: one :class:`ModelAnswer` per model and one :class:`RunAnswer`.

Every statement the headline, ``summary.md``, ``summary.html`` and the console make about a run is
decided here, from the tables the findings and ablation jobs wrote (nothing is recomputed):

* ``circuit_size``    -> the revisions screened per model (and the screened revision before a
  milestone, the lower end of its bracket when ``f3_onsets`` did not refine that milestone);
* ``f3_milestones``   -> the first revision reaching each milestone, and the later revisions where it
  lapses (``lapses``: a milestone that does not persist is said to);
* ``f3_onsets``       -> the refined bracket (last revision before, first revision at) of a milestone;
* ``f3_gaps``         -> the timing gap (first-token milestone / induction milestone): its case
  (``gap_case``), point value, interval (``gap_lo``/``gap_hi``), the order of the two milestones
  (``order``, ``order_basis``) and the brackets it rests on, all as written;
* ``f2_layer_spread`` -> the spread label of the sink over layers (``first`` onset);
* ``measures_over_training`` / ``measures_onsets`` -> the text probe's sink rate (Gu et al. 2025) at the
  final revision and the first revision reaching ``text_sink_50pct`` with its bracket (docs/measures.md);
* ``verdict``         -> every cell's causal verdict: the final circuit's at the last ablated revision,
  and every revision where the test decided (``causal`` / ``not_causal`` of a non-empty induction
  circuit).

The renderers (:mod:`headtrace.report.headline`, :mod:`~headtrace.report.html`,
:mod:`~headtrace.report.console`) only format these structures: a sentence is worded once (the run's
statements in :mod:`headtrace.report.statements`, put in reading order by :func:`run_answer`), and every
renderer prints the same words. A verdict row in words is :mod:`headtrace.report.verdicts`, a seed
group's answers :mod:`headtrace.report.group_answers`; this module re-exports their names.

A milestone reached at revision r is only known to lie in the bracket (previous screened revision,
r]; the gap is therefore an interval: later in (lo_l, hi_l], earlier in (lo_e, hi_e] gives a ratio
in (lo_l / hi_e, hi_l / lo_e). The findings job decides it once (``f3_gaps``, from ``f3_milestones``'
brackets: :func:`headtrace.findings.trajectory.f3_gaps`, the order by :mod:`headtrace.findings.order`);
a pair without an ``f3_gaps`` row is ``unknown``. Printed bounds are rounded outward
(:func:`headtrace.report.format.fmt_bound`).

**Checkpoint integrity** (``suspect``): a mapping ``(model, revision) -> [flag, ...]`` (e.g.
``"duplicate_of step900"``, ``"not_descended_from_init"``). Every statement records the revisions it
rests on (``rests_on``); one resting on a flagged revision carries the flags, and the renderers
mark it (a dagger and a note naming the flag). The workflow fills it from the checkpoint-lineage
tables (:func:`headtrace.report.lineage.suspect`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import polars as pl

from headtrace.findings import order as milestone_order
from headtrace.report import first_token as FT
from headtrace.report import statements as S
from headtrace.report.format import fmt_bound, fmt_interval, fmt_ratio, fmt_token_bound
from headtrace.report.group_answers import GroupAnswer, group_answers
from headtrace.report.statements import Statement
from headtrace.report.verdicts import (DECIDED, Verdict, effect_text, fmt_metric, fmt_p, say, underpowered_why,
                                       verdict_of, verdict_word)
from headtrace.report.words import CIRCUIT_MILESTONE, SINK_MILESTONES
from headtrace.report.words import get as _get
from headtrace.report.words import is_nan as _nan
from headtrace.report.words import names as _names

__all__ = ["Milestone", "Gap", "Verdict", "Statement", "ModelAnswer", "RunAnswer", "GroupAnswer", "build",
           "model_answers", "group_answers",
           "run_answer", "verdict_of", "verdict_word", "underpowered_why",
           "effect_text", "fmt_metric", "fmt_p", "CIRCUIT_MILESTONE", "SINK_MILESTONES", "DECIDED",
           "INDUCTION_CIRCUITS", "TextSink", "TEXT_SINK_MILESTONE"]

TEXT_SINK_MILESTONE = "text_sink_50pct"  # measures_onsets: the text sink rate reaches half the heads
INDUCTION_CIRCUITS = ("circuit", "final_circuit")  # the verdict rows that answer "is the induction circuit causal"

Suspect = Mapping[tuple[str, str], Iterable[str]]


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
    lapses: tuple[str, ...] = ()  # later revisions where the milestone no longer held (f3_milestones.lapses)

    @property
    def rests_on(self) -> tuple[str, ...]:
        return tuple(r for r in (self.lo_revision, self.revision) if r is not None)

    def lapse_text(self) -> str:
        """'not persistent: below it again at step700' / '' (it held at every later revision)."""
        return f"not persistent: below it again at {_names(list(self.lapses))}" if self.lapses else ""

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
            out = f"{self.revision} ({hi}; at the first revision screened)"
        else:
            out = f"{self.revision} ({fmt_token_bound(self.lo_tokens, 'lo')}–{hi}]"
        return out + (f"; {self.lapse_text()}" if self.lapses else "")


@dataclass(frozen=True)
class TextSink:
    """The text probe's sink rate (Gu et al. 2025) of one model: ``rate`` (0-1) at eps at ``revision``,
    the last revision with a text probe, and ``onset``, the first revision reaching half the heads; what the
    probe was (None where not recorded), whether the model was trained only on a synthetic stream, the
    rate at the table's other eps at that revision (``others``: (eps, rate)), the repeated-random probe's
    rate there at eps, and what key 0 is (``key0_bos``: the tokenizer's BOS, or False: the text's own first
    token; ``key0``: the commonest first tokens with their counts, most first)."""
    eps: float
    rate: float | None
    revision: str | None
    tokens: float | None
    onset: Milestone
    n_sequences: int | None = None
    seq_len: int | None = None
    n_documents: int | None = None
    windows: str | None = None  # start (each document's first seq_len tokens) | consecutive
    synthetic: bool = False  # trained only on a synthetic token stream: it never saw text like the probe's
    others: tuple[tuple[float, float], ...] = ()  # (eps, rate) at the table's other thresholds, same revision
    repeated_rate: float | None = None  # the repeated-random probe's sink rate at eps, same revision
    key0_bos: bool | None = None  # key 0 is the tokenizer's BOS (True) or the text's first token (False)
    key0: tuple[tuple[str, int], ...] = ()  # the commonest key-0 tokens and how many sequences open with each

    @property
    def rests_on(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(((self.revision,) if self.revision else ()) + self.onset.rests_on))

    def text(self) -> str:
        """'25.0% at step1500 (ε = 0.3); half the heads: step1200 (512K–615K]' / '—'."""
        if self.rate is None:
            return "—"
        onset = self.onset.text() if self.onset.known else "—"
        return f"{100 * self.rate:.1f}% at {self.revision} (ε = {self.eps:g}); half the heads: {onset}"


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
    order: str = milestone_order.ABSENT  # headtrace.findings.order: earlier first | later first | undecided | absent
    basis: str | None = None  # what a decided order rests on: seen | censoring (the later milestone never met)

    @property
    def ordered(self) -> bool:
        """The circuit (earlier milestone) first whatever the spacing hides: its bracket ends where or
        before the sink's begins, a censored end included (:mod:`headtrace.findings.order`)."""
        return self.order == milestone_order.EARLIER_FIRST

    @property
    def seen(self) -> bool:
        """Ordered, and both milestones were met (not an order that holds only because no sink came)."""
        return self.order in (milestone_order.EARLIER_FIRST, milestone_order.LATER_FIRST) \
            and self.basis == milestone_order.SEEN

    @property
    def decided(self) -> bool:
        """The order is decided (either way; seen or by censoring)."""
        return self.order in (milestone_order.EARLIER_FIRST, milestone_order.LATER_FIRST)

    def why_undecided(self) -> str | None:
        """Why the order is not decided, in a clause; None when it is."""
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
            if self.lo is None and self.hi is None:  # f3_gaps: no bound against, or of, 0 tokens
                return "not separated: same revision (no bound either way)"
            return f"not separated: same revision (between {iv[1:-1].replace(', ', ' and ')})"
        head = fmt_ratio(self.ratio)
        if not self.decided:  # the one rule (headtrace.findings.order), as the sentences read it
            return f"{head}, in {iv}: order not settled by the spacing"
        return f"{head}, in {iv}"


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
    continues: str | None = None  # the model whose training run this one continues (not an independent run)

    @property
    def sink_possible(self) -> bool:
        """Some layer lies above Finding 1's floor, so a sink milestone can be met without contradicting
        it (a 2-layer model has none); True when the layers are unknown."""
        above = None if self.first_token is None else self.first_token.layers_above_floor
        return above is None or above > 0

    # -- the final verdict, decided once
    @property
    def verdict(self) -> str:
        """causal | partial | not_causal | underpowered | untested | no circuit | not ablated."""
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
        elif v.word not in ("underpowered", "untested"):  # their reasons already say so
            stats += ", no reference set"
        boost = v.boost_text()
        if boost and not (v.word == "untested" and v.row.get("shows_behaviour") is False):  # said in its reason
            stats = f"{boost}; {stats}"
        if v.upper_share_text():
            stats += f"; {v.upper_share_text()}"
        if v.floor and v.word != "untested":  # the decision metric is not the one asked for: say why first
            stats = f"{v.floor}: {stats}"
        if v.word in ("underpowered", "untested"):
            return f"{v.why}; {stats}"
        methods = v.methods_text()
        if methods:
            stats += f"; {methods}"
        if v.why_not:
            return f"{stats}; {say(v.word)}: {v.why_not}"
        return stats

    def short_reason(self) -> str:
        """The reason in a few words, for the headline cell."""
        v = self.final
        if v is None or not v.heads:
            return ""
        if v.word in ("underpowered", "untested"):
            return v.why or ""
        return f"effect {effect_text(v)}" + (f", p = {fmt_p(v.p)} ({v.n_sets} {'sets, exact' if v.exact else 'draws'})"
                                             if v.n_sets and not _nan(v.p) else "")

    # -- decided verdicts over revisions
    def decided_words(self) -> str:
        """'causal at s2 and s3; necessary in part at s1, as it beats ...; not causal at s0, as p = ...':
        the revisions per decided verdict, each ``partial`` / ``not_causal`` one with its reason
        (revisions with the same reason share the clause)."""
        by: dict[str, list[str]] = {}
        why: dict[str, list[str]] = {}
        for v in self.decided:
            if v.word in ("not_causal", "partial"):
                key = (v.word, v.why_not or "")
                if v.revision not in why.setdefault(key, []):
                    why[key].append(v.revision)
            elif v.revision not in by.setdefault(v.word, []):
                by[v.word].append(v.revision)
        out = [f"causal at {_names(by['causal'])}"] if by.get("causal") else []
        out += [f"{say(w)} at {_names(revs)}" + (f", as {reason}" if reason else "")
                for (w, reason), revs in sorted(why.items(), key=lambda kv: kv[0][0] != "partial")]
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
    lapses: tuple[str, ...] = ()
    ms = F.get(table)
    if ms is not None and ms.height:
        r = ms.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            d["known"] = True
            row = r.row(0, named=True)
            d["revision"], d["tokens"] = _get(row, "revision"), _get(row, "tokens")
            d["reached"] = d["revision"] is not None
            lapses = tuple(_get(row, "lapses") or ()) if d["reached"] else ()  # decided by findings.trajectory
    on = F.get("f3_onsets")
    if on is not None and on.height and d["reached"]:
        r = on.filter((pl.col("model") == model) & (pl.col("milestone") == milestone))
        if r.height:
            row = r.row(0, named=True)
            if _get(row, "hi_revision") is not None:
                d.update(revision=_get(row, "hi_revision"), tokens=_get(row, "hi_tokens", d["tokens"]),
                         lo_revision=_get(row, "lo_revision"), lo_tokens=_get(row, "lo_tokens"),
                         refined=bool(_get(row, "rounds", 0) or _get(row, "n_added", 0)))
                return Milestone(milestone, **d, lapses=lapses)
    if d["reached"]:
        names = [r for r, _ in revs]
        if d["revision"] in names:
            i = names.index(d["revision"])
            if i > 0:
                d["lo_revision"], d["lo_tokens"] = revs[i - 1]
    return Milestone(milestone, **d, lapses=lapses)


# f3_gaps.gap_case (headtrace.findings.trajectory.gap_case, decided there) -> the Gap's state
_STATE = {"earlier never met": "no_circuit", "later never met": "no_sink",
          "earlier at first revision": "circuit_at_first", "same revision": "same_revision", "interval": "interval"}
_ENDS = ("earlier_lo_revision", "earlier_revision", "later_lo_revision", "later_revision")


def _gap(F: Mapping[str, pl.DataFrame], model: str, later: str, earlier: str) -> Gap:
    """The ``f3_gaps`` row of (``later``, ``earlier``) as the findings job decided it: its case, point
    value, interval, order and what the order rests on, and the revisions of both brackets (none where
    the earlier milestone was never met). No row: ``unknown``, order ``absent``."""
    gaps = F.get("f3_gaps")
    r = None if gaps is None or not gaps.height else gaps.filter(
        (pl.col("model") == model) & (pl.col("later") == later) & (pl.col("earlier") == earlier))
    if r is None or not r.height:
        return Gap(later, earlier)
    row = r.row(0, named=True)
    state = _STATE.get(_get(row, "gap_case"), "unknown")
    rests = () if state == "no_circuit" else tuple(dict.fromkeys(v for v in (_get(row, c) for c in _ENDS) if v))
    return Gap(later, earlier, state, _get(row, "gap_ratio"), _get(row, "gap_lo"), _get(row, "gap_hi"), rests,
               _get(row, "order", milestone_order.ABSENT), _get(row, "order_basis"))


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
    same = over.filter((pl.col("model") == model) & (pl.col("revision") == last["revision"])
                       & (pl.col("eps") != last["eps"])).drop_nulls("text_sink_rate")
    others = tuple(dict.fromkeys((float(e), float(r)) for e, r in same.select("eps", "text_sink_rate").rows()))
    key0 = tuple(zip(_get(last, "text_key0_tokens") or (), _get(last, "text_key0_counts") or ()))
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
    return TextSink(float(last["eps"]), float(last["text_sink_rate"]), last["revision"], _get(last, "tokens"), onset,
                    *(_get(last, c) for c in ("text_n_sequences", "text_seq_len", "text_n_documents", "text_windows")),
                    bool(_get(last, "synthetic_training", False)), others, _get(last, "repeated_sink_rate"),
                    _get(last, "text_key0_bos"), tuple((str(t), int(n)) for t, n in key0))


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
                  suspect: Suspect | None = None, continues: Mapping[str, str] | None = None) -> list[ModelAnswer]:
    """One :class:`ModelAnswer` per model. ``circuit_milestone``: default the ``earlier`` milestone of
    ``f3_gaps`` (``induction_3_heads`` when it has none). ``families``: the family each model resolved
    to (a model missing there: '—'). ``continues``: model -> the model whose training run it continues
    (its first revision is that model's weights), so the run is counted once."""
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
            gap50=_gap(F, m, s50.milestone, circ.milestone), gap10=_gap(F, m, s10.milestone, circ.milestone),
            final=final, decided=tuple(v for v in rows if v.decided),
            undecided=tuple(v for v in rows if v.word in ("underpowered", "untested")),
            spread=_label(F, m), suspect=flags.get(m, {}), text_sink=_text_sink(F, m), first_token=FT.of(F, m),
            continues=(continues or {}).get(m)))
    return out


def run_answer(answers: list[ModelAnswer], groups: Iterable[GroupAnswer] = ()) -> RunAnswer:
    """The run's statements, in reading order: formation, the sink, where the causal test decided,
    the final circuit's verdicts, what could not be decided; then one per seed group."""
    groups = tuple(groups)
    if not answers:
        return RunAnswer((), (Statement("This run has no models with findings yet."),), False, groups)
    last, all_decided = S.undecided(answers)
    ft = [(a, a.first_token) for a in answers if a.first_token is not None]
    first = FT.sentence([(a.model, f) for a, f in ft])
    text = [s for s in (first and S.statement(first, [(a, f.rests_on) for a, f in ft]), S.text_sinks(answers)) if s]
    return RunAnswer(tuple(answers), (S.formation(answers), S.sink(answers), *text,
                                      S.where_decided(answers), S.final(answers), last)
                     + tuple(g.statement() for g in groups), all_decided, groups)


def build(findings: Mapping[str, pl.DataFrame], verdicts: pl.DataFrame | None = None, *,
          families: Mapping[str, str] | None = None, suspect: Suspect | None = None,
          groups: Iterable[GroupAnswer] = (), **kw) -> RunAnswer:
    """The :class:`RunAnswer` of a run from its findings tables and verdict rows. ``suspect``:
    ``(model, revision) -> flags`` (checkpoint integrity: :func:`headtrace.report.lineage.suspect`);
    ``groups``: the seed groups' answers (:func:`group_answers`)."""
    return run_answer(model_answers(findings, verdicts, families=families, suspect=suspect, **kw), groups)
