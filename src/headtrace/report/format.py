"""How numbers are written in the summary, the figures and the console."""
from __future__ import annotations


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
