"""The run's statements over its models' answers, each worded once: formation, the sink, where the causal
test decided, the final verdicts, what could not be decided (:class:`Statement`: a sentence and the
revisions it rests on); :func:`headtrace.report.answers.run_answer` puts them in reading order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from headtrace.causal import verdict as V
from headtrace.report import empty_case as EC
from headtrace.report.format import fmt_bound, fmt_token_bound, milestone_words
from headtrace.report.words import names as _names
from headtrace.report.words import plural as _plural

# The models' answers (headtrace.report.answers.ModelAnswer; that module imports this one, so the type
# is named here only in words).
ModelAnswer = Any


@dataclass(frozen=True)
class Statement:
    """One generated sentence, the (model, revision) pairs it rests on, and the checkpoint-integrity
    flags of those revisions ('toy-neox step1000: duplicate_of step900')."""
    text: str
    rests_on: tuple[tuple[str, str], ...] = ()
    flags: tuple[str, ...] = ()



def statement(text: str, parts: Iterable[tuple[ModelAnswer, Iterable[str]]]) -> Statement:
    rests: list[tuple[str, str]] = []
    flags: list[str] = []
    for a, revs in parts:
        revs = [r for r in revs if r]
        rests += [(a.model, r) for r in revs if (a.model, r) not in rests]
        flags += [f for f in a.flags_of(revs) if f not in flags]
    return Statement(text, tuple(rests), tuple(flags))


def formation(answers: list[ModelAnswer]) -> Statement:
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
    return statement(s + ".", parts)


def sink(answers: list[ModelAnswer]) -> Statement:
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
    return statement(s + ".", parts)


def text_sinks(answers: list[ModelAnswer]) -> Statement | None:
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
    return statement(f"On the text probe, the share of heads that are sinks (Gu et al.'s sink rate: mean attention "
                      f"to the first token above {eps:g}, per sequence) was: " + "; ".join(bits) + ".", parts)


def where_decided(answers: list[ModelAnswer]) -> Statement:
    """Where the causal test (the recipe's third step) decided, per model: the revisions, the
    smallest p, over how many sets; then where it could not."""
    ablated = [a for a in answers if a.final is not None]
    if not ablated:
        return statement("The causal test (ablating the induction circuit against matched-random head sets) "
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
    return statement(s + ".", parts)


FINAL_SAY = (("causal", "causal"), ("partial", "necessary in part (it beats its matched controls but is not shown "
             "to halve top-1)"), ("not_causal", "not causal"), ("underpowered", "underpowered"),
             ("untested", "untested"),
             ("no circuit", "no circuit to ablate"), ("not ablated", "not ablated"))


def final(answers: list[ModelAnswer]) -> Statement:
    by: dict[str, list[ModelAnswer]] = {}
    for a in answers:
        by.setdefault(a.verdict, []).append(a)
    bits = [f"{say} in {_names([a.model for a in by[w]])}" for w, say in FINAL_SAY if by.get(w)]
    return statement("Ablating the final circuit at the last revision: " + "; ".join(bits) + ".",
                      [(a, a.final_rests_on) for a in answers])


def undecided(answers: list[ModelAnswer]) -> tuple[Statement, bool]:
    items, parts = [], []
    for word in ("underpowered", "untested"):  # the test could not decide / did not run: each with its reasons
        under = [a for a in answers if a.verdict == word]
        if under:
            why: dict[str, list[str]] = {}
            for a in under:
                why.setdefault(a.final.why or "", []).append(a.model)
            items.append(f"whether the final circuit is causal in {_plural(len(under), 'model')} ({word} — "
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
        return statement(EC.could_not_decide(items), parts), False
    return statement("Every model's final verdict and sink/circuit gap in this run was decided.",
                      [(a, a.final_rests_on + a.gap50.rests_on) for a in answers]), True


