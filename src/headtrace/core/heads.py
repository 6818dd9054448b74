"""Head identity: the ``(layer, head)`` pair, its ``LxHy`` name, and sets of heads.

The one home for naming and parsing heads; every module that takes a head list (circuits, controls,
experiments, the published reference files) goes through ``as_heads``.
"""
from __future__ import annotations

import math
import re
from typing import Iterable, Sequence

Head = tuple[int, int]

_NAME = re.compile(r"L(\d+)_?H(\d+)")  # ours: L4H4; the author's result files: L4_H4


def head_name(layer: int, head: int) -> str:
    """``L{layer}H{head}``, the name used in every table and figure."""
    return f"L{layer}H{head}"


def parse_head(name: str) -> Head:
    """``'L4H4'`` (or the author's ``'L4_H4'``) -> ``(4, 4)``; a ``ValueError`` naming the string otherwise."""
    m = _NAME.fullmatch(str(name).strip())
    if not m:
        raise ValueError(f"cannot parse head name '{name}' (expected like 'L4H4')")
    return int(m.group(1)), int(m.group(2))


def as_heads(heads: Iterable) -> tuple[Head, ...]:
    """Sorted, de-duplicated ``(layer, head)`` tuple from names or pairs."""
    out = set()
    for h in heads:
        if isinstance(h, str):
            out.add(parse_head(h))
        else:
            layer, head = h
            out.add((int(layer), int(head)))
    return tuple(sorted(out))


def layers_of(heads: Sequence[Head]) -> list[int]:
    """The sorted layers a head set touches."""
    return sorted({l for l, _ in heads})


def upper_bound(heads: Sequence[Head], n_heads_per_layer: int) -> tuple[Head, ...]:
    """Every head of the layers ``heads`` touches."""
    return tuple((l, h) for l in layers_of(heads) for h in range(n_heads_per_layer))


def jaccard(a: Iterable, b: Iterable) -> float:
    """|A & B| / |A | B| of two head sets (pairs or ``LxHy`` names); NaN if both are empty."""
    sa, sb = set(as_heads(a)), set(as_heads(b))
    union = sa | sb
    return len(sa & sb) / len(union) if union else math.nan
