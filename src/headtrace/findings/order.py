"""Which of two milestones came first, as the checkpoint brackets decide it: the one rule every table and
page reads (``f3_gaps.order``, the seed groups' counts, the headline's sentences).

A milestone crossed at revision r is only known to lie in the bracket (previous revision, r]:
``lo`` = the previous revision's tokens (0 when the milestone was already met at the first revision:
left-censored), ``hi`` = r's tokens (infinite when it was never met: right-censored, ``lo`` then the last
revision's tokens). Two brackets order the milestones when one ends where, or before, the other
begins. A censored end decides an order as well as a seen one: a circuit at the first revision and a
sink seen later are ordered (only the gap's size stays open); a circuit seen and a sink never met by
the last revision are ordered too, but only because the sink did not come: ``basis`` says which
(docs/statistics.md#the-order-of-two-milestones).
"""
from __future__ import annotations

import math
from typing import Mapping

INF = math.inf

EARLIER_FIRST, LATER_FIRST, UNDECIDED, ABSENT = "earlier first", "later first", "undecided", "absent"
SEEN, CENSORING = "seen", "censoring"  # basis: both milestones met / the second one never met


def bounds(lo_tokens, tokens, left_censored, right_censored) -> tuple[float, float]:
    """A milestone's crossing interval (lo, hi]: left-censored (or no lower end) -> lo 0, right-censored
    (or no upper end) -> hi inf."""
    lo = 0.0 if left_censored or lo_tokens is None else float(lo_tokens)
    hi = INF if right_censored or tokens is None else float(tokens)
    return lo, hi


def bounds_of_row(row: Mapping | None, prefix: str = "") -> tuple[float, float] | None:
    """:func:`bounds` of an ``f3_milestones`` row (``prefix`` "later_" / "earlier_" for an ``f3_gaps``
    row's halves); None when the row is missing."""
    if row is None:
        return None
    tok = row.get(f"{prefix}tokens")
    right = row.get(f"{prefix}right_censored")
    if right is None:
        right = tok is None
    return bounds(row.get(f"{prefix}lo_tokens"), tok, row.get(f"{prefix}left_censored"), right)


def order_of(earlier: tuple[float, float] | None, later: tuple[float, float] | None) -> str:
    """"earlier first" when the earlier milestone's bracket ends at or before the later one's begins,
    "later first" in the mirror case, "undecided" when the brackets overlap (the same bracket, both at
    the first revision, neither met), "absent" when a milestone has no row."""
    if earlier is None or later is None:
        return ABSENT
    (e_lo, e_hi), (l_lo, l_hi) = earlier, later
    if e_hi != INF and e_hi <= l_lo:
        return EARLIER_FIRST
    if l_hi != INF and l_hi <= e_lo:
        return LATER_FIRST
    return UNDECIDED


def basis_of(order: str, earlier: tuple[float, float] | None, later: tuple[float, float] | None) -> str | None:
    """What a decided order rests on: "seen" when the milestone that came second was met too,
    "censoring" when it was never met by the last revision (the order then says only that it did not
    come: no sign test or sentence should count it as an observed order); None when undecided."""
    if order == EARLIER_FIRST:
        return SEEN if later[1] != INF else CENSORING
    if order == LATER_FIRST:
        return SEEN if earlier[1] != INF else CENSORING
    return None
