"""The run's statements over its models' answers, each worded once: formation, the sink, where the causal
test decided, the final verdicts, what could not be decided (:class:`Statement`: a sentence and the
revisions it rests on); :func:`headtrace.report.answers.run_answer` puts them in reading order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from headtrace.core import metrics
from headtrace.findings import order as milestone_order
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


def _bracket(m) -> str:
    """A milestone's bracket in tokens, '(358K, 512K]' or '≤ 2T (at its first revision)', ends rounded outward."""
    hi = fmt_token_bound(m.tokens, "hi")
    return f"≤ {hi} (at its first revision)" if m.lo_revision is None else f"({fmt_token_bound(m.lo_tokens, 'lo')}, {hi}]"


def earliest(answers: list[ModelAnswer]) -> tuple[ModelAnswer | None, list[ModelAnswer]]:
    """(the model whose circuit milestone came first, None when the brackets do not say; the models
    whose brackets overlap the earliest-ending one). A model is the earliest only when its bracket ends
    before every other model's begins (a milestone met at a first revision begins at 0)."""
    known = [a for a in answers if a.circuit.reached and a.circuit.tokens is not None]
    if not known:
        return None, []
    first = min(known, key=lambda a: a.circuit.tokens)
    # the one rule of which milestone came first (brackets that touch are ordered)
    overlap = [a for a in known if a is not first
               and milestone_order.order_of(_circuit_bounds(first), _circuit_bounds(a))
               != milestone_order.EARLIER_FIRST]
    return (None if overlap else first), [first] + overlap


def _circuit_bounds(a: ModelAnswer) -> tuple[float, float]:
    """The circuit milestone's bracket (lo, hi] of a model that reached it: lo 0 at its first revision."""
    c = a.circuit
    return milestone_order.bounds(c.lo_tokens, c.tokens, c.lo_revision is None, False)


def formation(answers: list[ModelAnswer]) -> Statement:
    """How many independent runs formed the circuit (a run continuing another model's counts once),
    the earliest where the brackets name one, and the milestones that did not persist."""
    total = sum(a.n_revisions for a in answers)
    runs = [a for a in answers if a.continues is None]
    formed = [a for a in runs if a.circuit.reached]
    ms = milestone_words(answers[0].circuit.milestone)
    s = f"This run screened {_plural(len(answers), 'model')} over {_plural(total, 'revision')} in all"
    cont = [a for a in answers if a.continues is not None]
    if cont:
        s += (f" ({_plural(len(runs), 'independent training run')}: "
              + "; ".join(f"{a.model} continues {a.continues}'s run" for a in cont) + ")")
    s += "; " + EC.formed_clause(len(formed), len(runs), ms, noun="run" if cont else "model")
    parts: list[tuple[ModelAnswer, Iterable[str]]] = []
    first, tied = earliest(formed)
    if first is not None:
        c = first.circuit
        when = (f"by {fmt_token_bound(c.tokens, 'hi')} tokens ({c.revision}, already at the first revision "
                "screened)" if c.lo_revision is None else
                f"after {fmt_token_bound(c.lo_tokens, 'lo')} and by {fmt_token_bound(c.tokens, 'hi')} tokens "
                f"({c.revision})")
        s += f", the earliest {first.model} {when}"
        parts.append((first, c.rests_on))
    elif len(tied) > 1:
        s += ("; which formed it first the checkpoint spacing does not say: the brackets of "
              + _names([f"{a.model} {_bracket(a.circuit)}" for a in tied]) + " overlap")
        parts += [(a, a.circuit.rests_on) for a in tied]
    never = [a for a in runs if a.circuit.known and not a.circuit.reached]
    if never:
        s += f"; {_names([a.model for a in never])} never did by the last revision screened"
        parts += [(a, (a.final_revision,)) for a in never]
    lapsed = [a for a in answers if a.circuit.lapses]
    if lapsed:
        s += ("; not persistent (below the milestone again at a later revision): "
              + "; ".join(f"{a.model} at {_names(list(a.circuit.lapses))}" for a in lapsed))
        parts += [(a, a.circuit.lapses) for a in lapsed]
    return statement(s + ".", parts)


def sink(answers: list[ModelAnswer]) -> Statement:
    """Which models reached the sink milestone and, per model, what the brackets say of its order
    against the circuit (one rule: :attr:`Gap.order`, :mod:`headtrace.findings.order`), orders seen and
    orders that hold only because no sink came counted apart. Models with no layer above Finding 1's
    floor are left out, and said to be."""
    runs = [a for a in answers if a.continues is None]  # a continued run is counted with the run it continues
    noun = "run" if len(runs) < len(answers) else "model"
    able = [a for a in runs if a.sink_possible]
    floor_only = [a for a in runs if not a.sink_possible]
    sinks = [a for a in able if a.sink50.reached]
    s = (f"A first-token sink on half the heads came in {len(sinks)} of {_plural(len(able), noun)}" if len(able) != 1
         else f"A first-token sink on half the heads {'came' if sinks else 'did not come'} in the one {noun} that could "
              "form one")
    if floor_only:
        s += (f" ({_names([a.model for a in floor_only])} left out: every layer of "
              f"{'a 2-layer model' if len(floor_only) == 1 else '2-layer models'} is a floor layer of Finding 1, "
              "so a sink milestone there could only contradict it)")
    parts: list[tuple[ModelAnswer, Iterable[str]]] = [(a, a.sink50.rests_on) for a in sinks]
    after = [a for a in sinks if a.gap50.ordered]
    if after:
        lo = min((a for a in after if a.gap50.lo is not None), key=lambda a: a.gap50.lo, default=None)
        left = [a.model for a in after if a.gap50.state == "circuit_at_first"]
        bits = [] if lo is None else [f"at least {fmt_bound(lo.gap50.lo, 'lo')} more tokens at the ends of the brackets"]
        if left:
            bits.append(f"{_names(left)} had the circuit at {'its' if len(left) == 1 else 'their'} first revision, "
                        "so the gap has no upper bound")
        s += (f"; in {_names([a.model for a in after])} it came after the induction circuit whatever the "
              f"checkpoint spacing hides ({'; '.join(bits + ['each interval is in the table'])})")
        parts += [(a, a.gap50.rests_on) for a in after]
    before = [a for a in sinks if a.gap50.order == "later first" and a.gap50.seen]
    if before:
        s += f"; in {_names([a.model for a in before])} it came before the induction circuit"
        parts += [(a, a.gap50.rests_on) for a in before]
    no_circuit = [a for a in sinks if a.gap50.order == "later first" and not a.gap50.seen]
    if no_circuit:
        s += (f"; in {_names([a.model for a in no_circuit])} it came and no induction circuit did by the last "
              "revision (an order by censoring, not an order seen)")
        parts += [(a, a.gap50.rests_on) for a in no_circuit]
    unordered = [a for a in sinks if not a.gap50.decided]
    if unordered:
        s += (f"; in {_names([a.model for a in unordered])} the spacing does not order sink and circuit "
              f"({'; '.join(dict.fromkeys(a.gap50.why_undecided() for a in unordered))})")
        parts += [(a, a.gap50.rests_on) for a in unordered]
    censored = [a for a in able if not a.sink50.reached and a.gap50.ordered]
    if censored:
        s += (f"; {_names([a.model for a in censored])} had no such sink by the last revision, so "
              f"{'its' if len(censored) == 1 else 'their'} circuit came first only in that no sink came "
              "(an order by censoring, not an order seen)")
        parts += [(a, a.gap50.rests_on) for a in censored]
    return statement(s + ".", parts)


def text_sinks(answers: list[ModelAnswer]) -> Statement | None:
    """The text probe's sink rate (Gu et al. 2025) at each model's final revision and when it first reached
    half the heads, after what the probe was (where recorded: one description when every model read the
    same, else one per model), with beside it the rate at the other thresholds and the repeated-random
    probe's rate (where recorded); then what key 0, the key the rate measures, is for each model (the
    tokenizer's BOS, or the text's first token and the commonest ones); then the models trained only on a
    synthetic token stream, whose rate on text means little. None when no model ran a text probe."""
    with_text = [a for a in answers if a.text_sink is not None]
    if not with_text:
        return None
    eps = with_text[0].text_sink.eps

    def probe_words(t) -> str | None:
        if t.n_sequences is None or t.seq_len is None:
            return None
        if t.windows == "start":
            return f"the first {t.seq_len} tokens of each of {_plural(t.n_sequences, 'document')}"
        if t.windows == "consecutive" and t.n_documents is not None:
            return (f"{_plural(t.n_sequences, 'window')} of {t.seq_len} tokens cut one after another from "
                    f"{_plural(t.n_documents, 'document')}, so only a document's first window starts at its start")
        return f"{_plural(t.n_sequences, 'sequence')} of {t.seq_len} tokens"

    probes = {probe_words(a.text_sink) for a in with_text}
    shared = probes.pop() if len(probes) == 1 else None
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
        own = None if shared is not None else probe_words(t)
        beside = ([f"at ε = {e:g}: {100 * r:.1f}%" for e, r in t.others]
                  + ([f"repeated-random probe: {100 * t.repeated_rate:.1f}%"] if t.repeated_rate is not None else []))
        bits.append(f"{a.model} {100 * t.rate:.1f}% at {t.revision}" + (f" ({'; '.join(beside)})" if beside else "")
                    + f", {when}" + (f" (on {own})" if own else ""))
        parts.append((a, t.rests_on))
    said = (f"On the text probe{f' ({shared})' if shared else ''}, the share of heads that are sinks (Gu et al.'s "
            f"sink rate: mean attention to the first token above {eps:g}, per sequence) was: " + "; ".join(bits) + ".")
    said += key0_words([a for a in with_text if a.text_sink.key0_bos is not None])
    synthetic = [a.model for a in with_text if a.text_sink.synthetic]
    if synthetic:
        said += (f" {_names(synthetic)} {'was' if len(synthetic) == 1 else 'were'} trained only on a synthetic token "
                 f"stream: {'it is' if len(synthetic) == 1 else 'each is'} a model that has never seen text like it, "
                 "so its rate on text means little.")
    return statement(said, parts)


def key0_words(answers: list[ModelAnswer]) -> str:
    """' Key 0, the key the rate measures, is …': per model (models alike together), the tokenizer's BOS,
    or no BOS but the text's own first token, a content token, with the commonest openers and how many of
    the sequences open with each (``measures_over_training``'s ``text_key0_*``); '' for no such model."""
    said: dict[str, list[str]] = {}
    for a in answers:
        t = a.text_sink
        if t.key0_bos:
            what = "the tokenizer's BOS"
        else:
            openers = ", ".join(f"{_code(tok)} ({n})" for tok, n in t.key0)
            what = ("no BOS (the tokenizer adds none) but each text's own first token, a content token"
                    + (f"; the commonest openers of the {t.n_sequences} sequences: {openers}" if openers and t.n_sequences
                       else f"; the commonest openers: {openers}" if openers else ""))
        said.setdefault(what, []).append(a.model)
    if not said:
        return ""
    return " Key 0, the key the rate measures, is " + "; ".join(
        f"for {_names(models)} {what}" for what, models in said.items()) + "."


def _code(token: str) -> str:
    """A token as inline code, its whitespace made visible (a token with a backtick in quotes)."""
    shown = token.replace("\n", "\\n").replace("\t", "\\t")
    shown = shown if shown.strip() == shown and shown else repr(token)
    return f"'{shown}'" if "`" in shown else f"`{shown}`"


def where_decided(answers: list[ModelAnswer]) -> Statement:
    """Where the causal test (the recipe's third step) decided, per model: the revisions, the
    smallest p, over which reference sets; then where it could not. The test's level (the verdicts'
    ``alpha``) is said once."""
    ablated = [a for a in answers if a.final is not None]
    test = "The causal test (ablating the induction circuit against every head set of its shape in its layers"
    if not ablated:
        return statement(test + ") ran on no revision of this run.", [])
    alphas = sorted({float(a.final.row["alpha"]) for a in ablated if a.final.row.get("alpha") is not None})
    test += (f", at alpha = {alphas[0]:g})" if len(alphas) == 1 else
             f", at alpha = {', '.join(f'{x:g}' for x in alphas)} by model)" if alphas else ")")
    said, parts = [], []
    for a in ablated:
        if not a.decided:
            continue
        best = a.best
        bit = f"{a.model}: {a.decided_words()}"
        if best is not None:
            on = "" if best.metric == "top1" else f" on {metrics.words(best.metric)}"
            bit += (f" (smallest {best.p_text()}{on}: the {len(best.heads)}-head {best.circuit.replace('_', ' ')} at "
                    f"{best.revision}, over {best.control_text()})")
        said.append(bit)
        parts.append((a, [v.revision for v in a.decided]))
    none = [a.model for a in ablated if not a.decided]
    if said:
        s = test + " decided in " + "; ".join(said)
        if none:
            s += f"; it decided at no revision of {_names(none)}"
    else:
        s = test + f" decided at no revision of {_names(none)}"
    return statement(s + ".", parts)


FINAL_SAY = (("causal", "causal"), ("partial", "necessary in part (it beats its reference set but is not shown "
             "to halve the behaviour)"), ("not_causal", "not causal"),
             ("no circuit", "no circuit to ablate"), ("not ablated", "not ablated"))
OPEN_SAY = (("underpowered", "underpowered, so the test cannot decide"), ("untested", "untested"))


def final(answers: list[ModelAnswer]) -> Statement:
    """The final circuit's verdict at the last revision, once per model: the decided ones, then the open
    ones (underpowered, untested), each with its reasons."""
    by: dict[str, list[ModelAnswer]] = {}
    for a in answers:
        by.setdefault(a.verdict, []).append(a)
    bits = [f"{say} in {_names([a.model for a in by[w]])}" for w, say in FINAL_SAY if by.get(w)]
    for word, say in OPEN_SAY:
        open_ = by.get(word, [])
        if open_:
            why: dict[str, list[str]] = {}
            for a in open_:
                why.setdefault(a.final.why or "", []).append(a.model)
            bits.append(f"{say}, in {_plural(len(open_), 'model')} ("
                        + "; ".join(f"{_names(ms)}: {w}" for w, ms in why.items()) + ")")
    return statement("Ablating the final circuit at the last revision: " + "; ".join(bits) + ".",
                      [(a, a.final_rests_on) for a in answers])


def undecided(answers: list[ModelAnswer]) -> tuple[Statement, bool]:
    """What the run could not decide beyond the open final verdicts (:func:`final` gives those with their
    reasons): models with no circuit to ablate, and sink/circuit orders the brackets leave open (models with
    no layer above Finding 1's floor have no sink order to decide; a continued run is its base's)."""
    items, parts = [], []
    open_ = [a for a in answers if a.verdict in ("underpowered", "untested")]  # said, with reasons, by final()
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
        w = a.gap50.why_undecided() if a.sink_possible and a.continues is None else None
        if w is not None:
            gaps.setdefault(w, []).append(a)
    for w, ms in gaps.items():
        items.append(f"the order of sink and circuit in {_names([a.model for a in ms])} ({w})")
        parts += [(a, a.gap50.rests_on) for a in ms]
    if items:
        return statement(EC.could_not_decide(items), parts), False
    if open_:
        return statement("Every sink/circuit order in this run was decided; the open final verdicts are in the "
                         "sentence before.", [(a, a.gap50.rests_on) for a in answers]), False
    return statement("Every model's final verdict and sink/circuit order in this run was decided.",
                      [(a, a.final_rests_on + a.gap50.rests_on) for a in answers]), True
