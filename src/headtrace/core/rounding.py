"""How a number that tests or bounds something is rounded when it is printed: one rule, one place.

* A **p-value is rounded up** (:func:`fmt_p`): a printed p is never smaller than the p computed, so a
  reader never sees more evidence than there is (1/12 prints 0.084, not 0.083; 1/3024 prints 0.00034).
* The **ends of an interval are rounded outward** (:func:`directed`, :func:`fmt_share_bound`,
  :func:`fmt_share_interval`): a lower end down, an upper end up, so a printed interval always contains
  the computed one (a share's interval [0.4571, 0.7512] prints [45%, 76%], not [46%, 75%]).

Point values (an effect, a fraction of heads) are rounded to the nearest where they are printed.
Every layer prints through these (``headtrace.report.format`` builds its ratio and token bounds on
:func:`directed`); it lives in ``core`` so that the findings and causal layers can use it too.
"""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

__all__ = ["directed", "fmt_p", "fmt_share_bound", "fmt_share_interval"]


def directed(x: float, side: str, sig: int) -> tuple[Decimal, int]:
    """``x`` rounded to ``sig`` significant digits toward -inf (side 'lo') or +inf ('hi'), and the
    number of decimals to print."""
    if side not in ("lo", "hi"):
        raise ValueError(f"side must be 'lo' or 'hi', got {side!r}")
    d = Decimal(repr(float(x)))  # the float's shortest repr: 5.1 stays 5.1, not 5.0999...
    if d == 0:
        return d, 0
    exp = d.copy_abs().adjusted()  # 26.4 -> 1, 5.1 -> 0, 0.53 -> -1
    quantum = Decimal(1).scaleb(exp - sig + 1)
    q = d.quantize(quantum, rounding=ROUND_FLOOR if side == "lo" else ROUND_CEILING)
    if q.copy_abs().adjusted() > exp:  # 9.96 up -> 10.0: one digit fewer after the point
        exp += 1
    return q, max(0, sig - 1 - exp)


def fmt_p(p, sig: int = 2) -> str:
    """A p-value rounded **up** to ``sig`` significant digits: 1/12 -> '0.084', 1/3024 -> '0.00034',
    0.0498 -> '0.050', 0.0083 -> '0.0083', 0.493 -> '0.50'; a p the digits hold exactly prints as it is
    (0.5 -> '0.5', 0.05 -> '0.05'); below 1e-4 in exponent form, as ``.2g`` writes it (3.66e-14 ->
    '3.7e-14'); 1 (or a p that rounds up to 1) -> '1'; None/NaN -> '?'."""
    if _bad(p):
        return "?"
    if p >= 1:
        return "1"
    if p <= 0:
        return "0"
    q, decimals = directed(p, "hi", sig)
    if q >= 1:
        return "1"
    if q.adjusted() < -4:
        m, e = f"{q:.{sig - 1}e}".split("e")
        return f"{m}e-{abs(int(e)):02d}"
    if q == Decimal(repr(float(p))):  # nothing rounded: no trailing zeros to suggest it was
        return f"{q.normalize():f}"
    return f"{q:.{decimals}f}"


def fmt_share_bound(x, side: str, decimals: int = 0) -> str:
    """One end of an interval of a share (0-1) as a percentage, rounded **outward** to ``decimals``
    after the point: 0.4571 as a lower end -> '45%', as an upper end -> '46%'; None/NaN -> '?'."""
    if _bad(x):
        return "?"
    if side not in ("lo", "hi"):
        raise ValueError(f"side must be 'lo' or 'hi', got {side!r}")
    d = Decimal(repr(float(x))) * 100
    q = d.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_FLOOR if side == "lo" else ROUND_CEILING)
    return f"{q:.{decimals}f}%"


def fmt_share_interval(lo, hi, decimals: int = 0, sep: str = " to ") -> str:
    """'45% to 76%': both ends of a share's interval rounded outward (:func:`fmt_share_bound`)."""
    return f"{fmt_share_bound(lo, 'lo', decimals)}{sep}{fmt_share_bound(hi, 'hi', decimals)}"


def _bad(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))
