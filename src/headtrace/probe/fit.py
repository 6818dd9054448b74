"""A probe against a model: every way a probe misfits the model, said at once, with a probe that fits.

A probe misfits a model when it is longer than the model's context, when its token ids reach past
the vocabulary (a bare ``IndexError`` from the embedding), or when its own keys disagree (``ab_range``
running into the query window of a ``seq_len``-token sequence, a BOS that is not set). Positions
beyond the context are positions the model never trained on: rotary (Pythia, OLMo, Llama) and ALiBi
(BLOOM) models return numbers from them without an error, learned position tables (GPT-2) have no
row for them. :func:`misfit` lists every misfit in one message, in the words of whoever typed the
probe (the config's keys, ``headtrace cell``'s flags or ``analyze``'s ``probe=`` dict), and ends
with a probe that fits (:func:`fitting_probe`: the misfitting keys replaced, in the paper's
proportions, :func:`derived_settings`). It is the one check behind

* the config check before any job (``headtrace.panel.config.check``): toy models (the toy
  architecture) and local checkpoints (``config.json`` of each revision's folder, when it is there);
* ``headtrace cell`` and ``headtrace.analyze``, before the weights are read / the batch is built;
* the job start (``headtrace.models.hub.load_model`` reads ``config.json`` before the weights),
  which is where hub checkpoints are checked.

What the model allows, :class:`Limits`, is read from a checkpoint's configuration by
:func:`headtrace.models.context.limits_of`. ``probe.seq_len`` is the length as fed, BOS included
(``make_batch`` builds ``seq_len - 1`` tokens and prepends the BOS), so it is compared with the context
length as it is.

``derive: true`` (:func:`derive`) asks for the probe derived from the model: ``seq_len``,
``ab_range`` and ``token_range`` that the probe does not set come from the context length and
``vocab_size`` (:func:`derived_settings`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from headtrace.core import schema
from headtrace.probe.synthetic import MIN_SEQ_LEN, N_BASELINE_POSITIONS

WORDS = ("config", "cli", "api")  # whose words a message speaks: the config's keys, headtrace cell's flags, analyze's
CLI_FLAGS = {"seq_len": "--seq-len", "ab_range": "--ab-range", "token_range": "--token-range",
             "n_sequences": "--n-sequences", "seed": "--probe-seed"}
RANGES = ("ab_range", "token_range")
BEYOND = ("beyond its context a model runs at positions it never trained on: rotary (Pythia, OLMo, Llama) "
          "and ALiBi (BLOOM) models return numbers from them without an error, learned position tables "
          "(GPT-2) have no row for them")
PAPER_SEQ_LEN, PAPER_AB_RANGE, PAPER_TOKEN_RANGE = 256, (20, 128), (100, 10000)  # the derived probe's proportions


def misfit(model: str, settings: Mapping, limits: Limits, words: str = "config", *,
           given: Iterable[str] | None = None, derivable: bool = True) -> str | None:
    """The one message for every misfit of ``settings`` against ``limits`` (:func:`misfits`), ending
    with a probe that fits (:func:`fitting_probe`) in the words of ``words`` (``config``: the probe
    keys, globally or in ``models.{model}.probe``; ``cli``: ``headtrace cell``'s flags; ``api``:
    ``analyze``'s ``probe=`` dict) and, where ``derivable``, the derived probe's switch; None when it fits.
    ``given``: the keys the user set, so that a default is called one."""
    if words not in WORDS:
        raise ValueError(f"words: one of {WORDS}, not {words!r}")
    found = misfits(settings, limits, words, given)
    if not found:
        return None
    where = f"models.{model}" if words == "config" else model
    text = f"{where}: " + "; ".join(sentence for _, sentence in found)
    try:
        fix = fitting_probe(settings, limits)
    except ValueError as err:
        return f"{text}. No probe fits this model: {err}"
    text += f". A probe that fits: {setting(fix, words)}"
    if words == "config":
        text += f" (globally or in models.{model}.probe)"
    if derivable:
        text += {"config": "; or probe: {derive: true}, which derives seq_len, ab_range and token_range from the model",
                 "cli": "; or --probe auto, which derives --seq-len, --ab-range and --token-range from the model",
                 "api": "; or probe={'derive': True}, which derives them from the model"}[words]
    if any(key == "seq_len" and "exceeds" in sentence for key, sentence in found):
        text += f". {BEYOND[0].upper()}{BEYOND[1:]}"
    return text


def misfits(settings: Mapping, limits: Limits, words: str = "config",
            given: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """Every way ``settings`` (probe keys; a subset is checked as far as it goes) misfits the model of
    ``limits`` or itself, as ``(key, sentence)`` pairs in the order of the probe's keys; [] when it fits.
    ``given``: the keys the user set (the others are marked as defaults); None: not known."""
    out: list[tuple[str, str]] = []
    typed = None if given is None else set(given)

    def _said(key, value, words):
        return _say(key, value, words) + ("" if typed is None or key in typed else " (the default)")

    s = settings
    if "n_sequences" in s and int(s["n_sequences"]) < 1:
        out.append(("n_sequences", f"{_said('n_sequences', s['n_sequences'], words)} is not a number of "
                                   "sequences (>= 1)"))
    seq_len = int(s["seq_len"]) if s.get("seq_len") is not None else None
    if seq_len is not None:
        if seq_len < MIN_SEQ_LEN:
            out.append(("seq_len", f"{_said('seq_len', seq_len, words)} is shorter than the shortest probe, "
                                   f"{MIN_SEQ_LEN} tokens ({N_BASELINE_POSITIONS} baseline positions "
                                   "and the query window)"))
        elif limits.context is not None and seq_len > limits.context:
            n = limits.context
            out.append(("seq_len", f"{_said('seq_len', seq_len, words)} (tokens as fed, BOS included) exceeds the "
                                   f"model's context length of {n} positions ({limits.context_key} = {n} in "
                                   f"{limits.context_where})"))
    if s.get("ab_range") is not None:
        lo, hi = int(s["ab_range"][0]), int(s["ab_range"][1])
        if not 0 <= lo < hi:
            out.append(("ab_range", f"{_said('ab_range', (lo, hi), words)} is empty"))
        elif seq_len is not None:
            body = seq_len - (1 if s.get("prepend_bos") else 0)
            if hi > body - 7:
                out.append(("ab_range", f"{_said('ab_range', (lo, hi), words)} ends after {body - 7} = "
                                        f"{_name('seq_len', words)} - {seq_len - body + 7}: in a {seq_len}-token "
                                        "probe A B must stay clear of the query window"))
    if s.get("token_range") is not None:
        lo, hi = int(s["token_range"][0]), int(s["token_range"][1])
        if hi - lo < 2:
            out.append(("token_range", f"{_said('token_range', (lo, hi), words)} needs at least two tokens"))
        elif limits.vocab is not None and hi > limits.vocab:
            out.append(("token_range", f"{_said('token_range', (lo, hi), words)} reaches token id {hi - 1}, but the "
                                       f"model's vocabulary has {limits.vocab} tokens (vocab_size in "
                                       f"{limits.vocab_where})"))
    if s.get("prepend_bos"):
        bos = s.get("bos_token_id")
        if bos is None:
            out.append(("bos_token_id", f"{_name('prepend_bos', words)} is true but {_name('bos_token_id', words)} "
                                        "is not set"))
        elif limits.vocab is not None and not 0 <= int(bos) < limits.vocab:
            out.append(("bos_token_id", f"{_said('bos_token_id', bos, words)} is not a token of the model's "
                                        f"{limits.vocab}-token vocabulary (vocab_size in {limits.vocab_where})"))
    return out


def fitting_probe(settings: Mapping, limits: Limits) -> dict:
    """The keys to set so that ``settings`` fits (every misfitting key replaced by the derived
    probe's, :func:`derived_settings`; ``ab_range`` also when a shorter
    ``seq_len`` leaves it no room); {} when it fits. Raises ``ValueError`` when the model is too
    small for any probe."""
    bad = {key for key, _ in misfits(settings, limits)}
    fix: dict = {}
    if "n_sequences" in bad:
        fix["n_sequences"] = schema.defaults("$defs", "probe")["n_sequences"]
    seq_len = settings.get("seq_len")
    if "seq_len" in bad:
        seq_len = fix["seq_len"] = derived_settings(limits.context, limits.vocab)["seq_len"]
    bos = bool(settings.get("prepend_bos")) and "bos_token_id" not in bad
    if "bos_token_id" in bad:
        fix["prepend_bos"] = False  # the paper's probe has no BOS
    if seq_len is not None and settings.get("ab_range") is not None:
        trial = {"seq_len": seq_len, "ab_range": settings["ab_range"], "prepend_bos": bos}
        if misfits(trial, Limits()):
            fix["ab_range"] = derived_settings(limits.context, limits.vocab, seq_len=int(seq_len))["ab_range"]
    if "token_range" in bad:
        fix["token_range"] = derived_settings(limits.context, limits.vocab)["token_range"]
    return fix


def derive(settings: Mapping, given: Iterable[str], limits: Limits) -> dict:
    """``settings`` with the probe derived from the model (``derive: true``): ``seq_len``,
    ``ab_range`` and ``token_range`` not in ``given`` (the keys the user set) from ``limits``
    (:func:`derived_settings`; ``ab_range`` in proportion to the ``seq_len``
    set, when one is). ``settings`` unchanged without ``derive``. Raises ``ValueError`` when the
    model is too small for any probe."""
    out = dict(settings)
    if not out.get("derive"):
        return out
    given = set(given)
    derived = derived_settings(limits.context, limits.vocab,
                                     seq_len=int(out["seq_len"]) if "seq_len" in given else None)
    out.update({key: value for key, value in derived.items() if key not in given})
    return out


def too_long(model: str, seq_len: int, limit: tuple[int, str] | None, where: str) -> str | None:
    """The message when a ``seq_len``-token probe does not fit the context ``limit`` (``(n, field)``
    read in ``where``); None when it fits or the limit is unknown."""
    limits = Limits(*limit, where) if limit else Limits()
    return misfit(model, {"seq_len": seq_len}, limits, derivable=False)


def setting(fix: Mapping, words: str) -> str:
    """Probe keys to set, as the user would type them (``probe: {seq_len: 160}``, ``--seq-len 160``,
    ``probe={'seq_len': 160}``)."""
    if words == "cli":
        return " ".join(_say(k, v, words) for k, v in fix.items())
    if words == "api":
        return "probe={" + ", ".join(f"{k!r}: {list(v) if k in RANGES else v!r}" for k, v in fix.items()) + "}"

    def value(key, v):
        if key in RANGES:
            return str(list(v))
        return {True: "true", False: "false", None: "null"}.get(v, v) if isinstance(v, (bool, type(None))) else v

    return "probe: {" + ", ".join(f"{k}: {value(k, v)}" for k, v in fix.items()) + "}"


@dataclass(frozen=True)
class Limits:
    """What a probe must fit: the model's context length and vocabulary (None: unknown), and where
    each was read (a config.json, the toy architecture, "the model's config")."""

    context: int | None = None
    context_key: str | None = None
    context_where: str | None = None
    vocab: int | None = None
    vocab_where: str | None = None

    @property
    def known(self) -> bool:
        return self.context is not None or self.vocab is not None


def derived_settings(context: int | None, vocab: int | None, *, seq_len: int | None = None) -> dict:
    """The probe derived from a model: ``{"seq_len", "ab_range", "token_range"}`` inside its
    ``context`` (positions) and ``vocab`` (tokens), in the paper's proportions (None: unknown, the
    paper's value). A model that fits the paper's probe gets it unchanged.

    * ``seq_len`` = min(256, context) (``seq_len`` given: that one, e.g. set by the config);
    * ``ab_range`` = [floor(20 T / 256), floor(T / 2)): the paper's [20, 128) of T = 256, A's first
      position in the first half, clear of the query window at every T >= 64 (BOS or not);
    * ``token_range`` = [high // 100, high) with high = min(10000, vocab): the paper's [100, 10000)
      cut to the vocabulary, keeping its 1:100 ratio (the lowest ids, often special or byte tokens,
      stay out).

    Raises ``ValueError`` when the model is too small for any probe (context < 64, vocabulary < 3).
    """
    if seq_len is None:
        if context is not None and context < MIN_SEQ_LEN:
            raise ValueError(f"a context of {context} positions is shorter than the shortest probe "
                             f"({MIN_SEQ_LEN} tokens: {N_BASELINE_POSITIONS} baseline positions and the query window)")
        seq_len = PAPER_SEQ_LEN if context is None else min(PAPER_SEQ_LEN, context)
    high = PAPER_TOKEN_RANGE[1] if vocab is None else min(PAPER_TOKEN_RANGE[1], vocab)
    low = high * PAPER_TOKEN_RANGE[0] // PAPER_TOKEN_RANGE[1]
    if high - low < 2:
        raise ValueError(f"a vocabulary of {vocab} tokens is too small for the probe's two tokens A and B and filler")
    ab = (PAPER_AB_RANGE[0] * seq_len // PAPER_SEQ_LEN, PAPER_AB_RANGE[1] * seq_len // PAPER_SEQ_LEN)
    return {"seq_len": int(seq_len), "ab_range": [int(ab[0]), int(ab[1])], "token_range": [int(low), int(high)]}


def _name(key: str, words: str) -> str:
    if words == "cli":
        return CLI_FLAGS.get(key, f"probe.{key}")
    return key if words == "api" else f"probe.{key}"


def _say(key: str, value, words: str) -> str:
    """``key value`` as the user typed it: ``probe.token_range [2, 256)``, ``--token-range 2 256``."""
    if key in RANGES:
        lo, hi = int(value[0]), int(value[1])
        if words == "cli" and key in CLI_FLAGS:
            return f"{_name(key, words)} {lo} {hi}"
        return f"{_name(key, words)} [{lo}, {hi})"
    return f"{_name(key, words)} {value}"
