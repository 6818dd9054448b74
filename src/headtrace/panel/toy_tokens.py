"""A toy model's token axis, from its recipe: the ``tokens_schedule`` its phases imply and the check that a
config's own token keys agree with it (part of the config check, :func:`headtrace.panel.config.check`)."""
from __future__ import annotations

from headtrace.core import revisions as revs
from headtrace.core.errors import ConfigError
from headtrace.models.toy import recipe as toy


def schedule(spec: dict, where: str) -> list[dict] | None:
    """The ``tokens_schedule`` a toy model's recipe implies (batch_size x seq_len, phase by phase:
    :func:`headtrace.models.toy.recipe.token_schedule`); None for a non-toy model or a data-shift continuation
    (its tokens are set by ``experiments.expand_models``)."""
    train = spec.get("train") or {}
    if spec["source"] != "toy" or train.get("shift_from"):
        return None
    try:
        steps = [revs.toy_step(r) for r in spec["revisions"]]
    except ValueError as err:
        raise ConfigError(f"{where}.revisions: {err}") from None
    try:
        r = toy.recipe(spec["family"], train)
        toy.check_schedule(r["optim"], max(steps))
        return toy.token_schedule(r["data"], r["optim"], r["curriculum"], max(steps))
    except ValueError as err:
        raise ConfigError(f"{where}.train: {err}") from None


def check(spec: dict, where: str) -> None:
    """A toy's token keys must be its recipe's: the tokens seen, never a second, different axis."""
    derived = schedule(spec, where)
    if derived is None:
        return
    for key in ("tokens", "tokens_from_name"):
        if spec.get(key) is not None:
            raise ConfigError(f"{where}.{key}: a toy model's tokens follow from its recipe; drop '{key}'")
    per_step, given = spec.get("tokens_per_step"), spec.get("tokens_schedule")
    if per_step is not None and (len(derived) != 1 or derived[0]["tokens_per_step"] != int(per_step)):
        raise ConfigError(f"{where}.tokens_per_step: {per_step}, but the toy recipe trains on "
                          f"{_describe(derived)}: drop tokens_per_step (the token axis is derived from the recipe)")
    if given is not None and [dict(p) for p in given] != derived:
        raise ConfigError(f"{where}.tokens_schedule: {given}, but the toy recipe trains on "
                          f"{_describe(derived)}: drop tokens_schedule (the token axis is derived from the recipe)")


def _describe(schedule: list[dict]) -> str:
    if len(schedule) == 1:
        return f"{schedule[0]['tokens_per_step']} tokens a step"
    parts, prev = [], 0
    for ph in schedule:
        end = ph.get("until")
        parts.append(f"{ph['tokens_per_step']} a step {'from' if end is None else 'in'} "
                     f"{prev if end is None else f'[{prev}, {end})'}")
        prev = end
    return "tokens " + ", ".join(parts)
