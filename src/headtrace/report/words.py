"""Small pieces every answer module says alike: a missing number, a plural, a list of names, and the
milestones the answers read (:mod:`headtrace.report.answers` and the modules it is split into)."""
from __future__ import annotations

import math
from typing import Mapping

CIRCUIT_MILESTONE = "induction_3_heads"
SINK_MILESTONES = ("first_token_10pct", "first_token_50pct")


def is_nan(x) -> bool:
    """None or a float NaN: a number a table does not have."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def get(row: Mapping | None, key: str, default=None):
    """``row[key]``, ``default`` when the row, the key or its number is missing."""
    if row is None:
        return default
    v = row.get(key, default)
    return default if is_nan(v) else v


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def names(ms: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(ms) <= 1:
        return "".join(ms)
    return ", ".join(ms[:-1]) + " and " + ms[-1]
