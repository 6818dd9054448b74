"""How numbers are written in the summary, the figures and the console.

Bounds are rounded *outward* (:func:`fmt_bound`): a lower bound down, an upper bound up, so that a
printed interval always contains the computed one ("(5.1×, 27×]" for (5.13, 26.4]); a p-value is
rounded *up* (:func:`headtrace.core.rounding.fmt_p`). Both rules are :mod:`headtrace.core.rounding`'s, the one place they are
written. Point values are rounded to the nearest (:func:`fmt_ratio`, :func:`fmt_tokens`).
"""
from __future__ import annotations

import math
from decimal import Decimal

from headtrace.core import milestones
from headtrace.core.rounding import directed as _directed

__all__ = ["fmt_tokens", "fmt_ratio", "fmt_bound", "fmt_interval", "fmt_token_bound"]


milestone_words = milestones.words  # a milestone's name in words (headtrace.core.milestones)


def fmt_tokens(t: int | None) -> str:
    """2097152 -> '2.1M', 6291456000 -> '6.29B', 1350000000000 -> '1.35T'; None -> '?'."""
    if t is None:
        return "?"
    t = float(t)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if t >= scale:
            v = t / scale
            return f"{v:.3g}{unit}" if v < 100 else f"{v:.0f}{unit}"
    return f"{t:.0f}"


def fmt_ratio(x, unit: str = "×", sig: int = 2) -> str:
    """A point ratio, nearest, ``sig`` significant digits (at least one decimal below 10): 26.4 ->
    '26×', 5.13 -> '5.1×'; None/NaN -> '?'; inf -> '∞'."""
    if _bad(x):
        return "?"
    if math.isinf(x):
        return "∞"
    d = Decimal(repr(float(x)))
    if d == 0:
        return f"0{unit}"
    exp = d.copy_abs().adjusted()
    q = d.quantize(Decimal(1).scaleb(exp - sig + 1))
    if q.copy_abs().adjusted() > exp:
        exp += 1
    return f"{q:.{max(0, sig - 1 - exp)}f}{unit}"


def fmt_bound(x, side: str, unit: str = "×", sig: int = 2) -> str:
    """One end of an interval, rounded outward to ``sig`` significant digits: a lower bound
    (``side='lo'``) down, an upper bound (``'hi'``) up. 26.4 hi -> '27×', 12.67 lo -> '12×', 1.067 lo
    -> '1.0×', 5.1 lo -> '5.1×'; None/NaN -> '?' ; inf -> '∞'."""
    if _bad(x):
        return "?"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    q, decimals = _directed(x, side, sig)
    return f"{q:.{decimals}f}{unit}"


def fmt_interval(lo, hi, unit: str = "×", sig: int = 2, *, left: str = "(", right: str = "]") -> str:
    """'(5.1×, 27×]': both ends rounded outward; a missing end is open ('?' below, '∞' above)."""
    a = fmt_bound(lo, "lo", unit, sig) if not _bad(lo) else "?"
    b = fmt_bound(hi, "hi", unit, sig) if not _bad(hi) else "∞"
    return f"{left}{a}, {b}{right}"


def fmt_token_bound(t, side: str) -> str:
    """A token count that bounds something, as :func:`fmt_tokens` writes it but rounded outward:
    614400 as an upper end -> '615K', 2097152 as a lower end -> '2.09M'. Exact counts below 1000
    print whole."""
    if _bad(t):
        return "?"
    t = float(t)
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if t >= scale:
            v = t / scale
            q, _ = _directed(v, side, 3)
            return f"{q.normalize():f}{unit}"  # as fmt_tokens writes it: '1K', '2.09M', '615K'
    return f"{math.floor(t) if side == 'lo' else math.ceil(t):.0f}"


def fmt_chance(summary) -> str:
    """A group's Jaccard beside its within-layer null (``group_summary``): '; no more than chance
    (0.23 by placement within the layers alone)' / '; 1 of 3 pairs beyond chance (...)' / ''."""
    chance = summary.get("jaccard_chance_median") if summary else None
    if chance is None:
        return ""
    k, n = int(summary.get("jaccard_n_beyond_chance") or 0), int(summary.get("jaccard_n_pairs") or 0)
    said = "no more than chance" if k == 0 else f"{k} of {n} pair{'s' if n != 1 else ''} beyond chance"
    return f"; {said} ({chance:.2f} by placement within the layers alone)"


def _bad(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
