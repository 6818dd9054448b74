"""The milestones' names: one type, one parser, one place each name is built, read and said.

A milestone is a level a model's trajectory reaches at some revision: an induction circuit of at
least k heads (``induction_{k}_heads``, on ``circuit_size.n_induction_circuit``), first-token heads
on at least p% of the heads (``first_token_{p}pct``, on ``f2_bos_fraction.bos_fraction``), or a text
sink rate of at least p% (``text_sink_{p}pct``, on the measures' ``text_sink_rate``), or at least k
prefix-matching heads (``prefix_{k}_heads``, on the measures' ``n_prefix_heads``). The findings
build the names (:func:`name_of`), refinement and the pages read them back (:func:`parse`), and the
pages say them (:meth:`Milestone.words`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Milestone", "parse", "name_of", "words", "KINDS", "TOLERANCE"]

TOLERANCE = 1e-12  # a fraction reaches p% when it is >= p / 100 - TOLERANCE (p / 100 in floating point)

# kind -> (name pattern, findings table, column, whether the level is a percentage)
KINDS = {
    "induction": ("induction_{level}_heads", "circuit_size", "n_induction_circuit", False),
    "first_token": ("first_token_{level}pct", "f2_bos_fraction", "bos_fraction", True),
    "text_sink": ("text_sink_{level}pct", "measures_over_training", "text_sink_rate", True),
    "prefix": ("prefix_{level}_heads", "measures_over_training", "n_prefix_heads", False),
}
_NAME = re.compile(r"^(?:induction_(?P<induction>[1-9]\d*)_heads|first_token_(?P<first_token>[1-9]\d?|100)pct"
                   r"|text_sink_(?P<text_sink>[1-9]\d?|100)pct|prefix_(?P<prefix>[1-9]\d*)_heads)$")


@dataclass(frozen=True)
class Milestone:
    """``kind`` (one of :data:`KINDS`) at ``level``: a head count, or a percentage of the heads."""
    kind: str
    level: int

    @property
    def name(self) -> str:
        return KINDS[self.kind][0].format(level=self.level)

    @property
    def table(self) -> str:
        """The findings table whose ``column`` the milestone reads."""
        return KINDS[self.kind][1]

    @property
    def column(self) -> str:
        return KINDS[self.kind][2]

    @property
    def minimum(self) -> float:
        """The value of ``column`` that reaches the milestone: k heads, or p / 100 less :data:`TOLERANCE`."""
        return self.level / 100 - TOLERANCE if KINDS[self.kind][3] else self.level

    def words(self) -> str:
        """'an induction circuit of at least 3 heads', 'first-token heads on at least 50% of the heads',
        'a text sink rate of at least 50%'."""
        if self.kind == "induction":
            return f"an induction circuit of at least {self.level} head{'s' if self.level != 1 else ''}"
        if self.kind == "first_token":
            return f"first-token heads on at least {self.level}% of the heads"
        if self.kind == "prefix":
            return f"at least {self.level} prefix-matching head{'s' if self.level != 1 else ''}"
        return f"a text sink rate of at least {self.level}%"


def parse(name: str) -> Milestone:
    """``"induction_3_heads"`` -> ``Milestone("induction", 3)``; ValueError for a name that is not a milestone."""
    m = _NAME.match(str(name))
    if not m:
        raise ValueError(f"unknown milestone '{name}' (expected induction_<k>_heads, first_token_<p>pct, "
                         "text_sink_<p>pct or prefix_<k>_heads, e.g. induction_3_heads, first_token_50pct)")
    kind = next(k for k, v in m.groupdict().items() if v is not None)
    return Milestone(kind, int(m[kind]))


def name_of(kind: str, level: float) -> str:
    """The name of ``kind`` at ``level``: a head count, or a fraction of the heads (0.5 -> ``..._50pct``)."""
    return Milestone(kind, round(100 * level) if KINDS[kind][3] else int(level)).name


def words(name: str) -> str:
    """A milestone's name in words (:meth:`Milestone.words`); any other name with its underscores as spaces."""
    try:
        return parse(name).words()
    except ValueError:
        return name.replace("_", " ")
