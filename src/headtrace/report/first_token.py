"""First-token heads at each model's last revision, and the layer where they begin: a statement of the
run's answers (``headtrace.report.answers``), from Finding 1's per-layer table (``f1_bos_floor``) and
its floor verdict (``f1_floor``). For a model screened at one checkpoint this is all F1 and F2 can say;
for a trajectory it is where the sink ended. Pure: tables in, words out.

Beside the paper's count (a ratio: ``sel_first_token`` at or above the class threshold) it says how many of
those heads also put at least Gu et al.'s epsilon of their attention on key 0 (``n_first_token_key0``,
``key0_mass``: decided in ``headtrace.findings.trajectory``). For a model screened at one checkpoint,
Finding 1's floor is said as what it is: at that checkpoint, on one synthetic probe, with the largest
first-token selectivity the floor layers reach (``f1_floor.max_sel_first_token``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import polars as pl

from headtrace.report.format import fmt_ratio


@dataclass(frozen=True)
class FirstToken:
    """One model's first-token heads (``sel_first_token`` at or above the class threshold) at ``revision``."""
    revision: str
    n_first: int
    n_heads: int
    lowest_layer: int | None   # the lowest layer holding one (None: no first-token head)
    floor_layers: str | None   # F1's floor layers ("0,1"), as f1_floor names them
    floor_holds: bool | None   # no first-token head in those layers at any revision (None: not computed)
    n_layers: int | None = None  # the model's layers (None: unknown)
    n_key0: int | None = None  # of n_first, those with >= key0_mass of their attention on key 0 (None: not recorded)
    key0_mass: float | None = None  # that share (Gu et al.'s epsilon, 0.3)
    n_revisions: int | None = None  # revisions F1's floor was checked at (None: unknown)
    floor_max_sel: float | None = None  # the largest first-token selectivity in the floor layers

    @property
    def one_checkpoint(self) -> bool:
        """Screened at a single revision: F1's floor is a statement about that checkpoint only."""
        return self.n_revisions == 1

    @property
    def layers_above_floor(self) -> int | None:
        """Layers outside F1's floor, where a first-token head may form without contradicting it (None:
        unknown). A 2-layer model has none: any sink milestone there would contradict F1 by construction."""
        if self.n_layers is None or self.floor_layers is None:
            return None
        floor = {int(x) for x in self.floor_layers.split(",") if x.strip()}
        return sum(1 for layer in range(self.n_layers) if layer not in floor)

    @property
    def rests_on(self) -> tuple[str, ...]:
        return (self.revision,)

    def floor_words(self) -> str | None:
        """'layers 0–1' (F1's floor layers), or None when F1's floor was not computed."""
        if self.floor_layers is None or self.floor_holds is None:
            return None
        lo, hi = self.floor_layers.split(",")[0], self.floor_layers.split(",")[-1]
        return f"layer {lo}" if lo == hi else f"layers {lo}–{hi}"

    def key0_words(self) -> str:
        """'; 153 of them with at least 0.3 of their attention on key 0' / '' (not recorded)."""
        if self.n_key0 is None or self.key0_mass is None:
            return ""
        return f"; {self.n_key0} of them with at least {self.key0_mass:g} of their attention on key 0"

    def floor_clause(self) -> str:
        """'; none in layers 0–1 at any revision' / '; none in layers 0–1 at this one checkpoint, on one
        synthetic probe (largest first-token selectivity there 1.74×)' / '; some in layers 0–1' / ''."""
        where = self.floor_words()
        if not where:
            return ""
        if not self.floor_holds:
            return f"; some in {where}"
        if not self.one_checkpoint:
            return f"; none in {where} at any revision"
        most = ("" if self.floor_max_sel is None else
                f" (largest first-token selectivity there {fmt_ratio(self.floor_max_sel, sig=3)})")
        return f"; none in {where} at this one checkpoint ({self.revision}), on one synthetic probe{most}"

    def text(self, floor: bool = True) -> str:
        """'79.3% (214 of 270; 153 of them with at least 0.3 of their attention on key 0) at instruct-q4_1,
        from layer 2 up; none in layers 0–1 at any revision' / 'none at step1000' (``floor=False``: without
        the floor clause)."""
        if not self.n_first:
            return f"none at {self.revision}"
        out = (f"{100 * self.n_first / self.n_heads:.1f}% ({self.n_first} of {self.n_heads}{self.key0_words()}) "
               f"at {self.revision}, from layer {self.lowest_layer} up")
        return out + (self.floor_clause() if floor else "")


def of(F: Mapping[str, pl.DataFrame], model: str) -> FirstToken | None:
    """The model's :class:`FirstToken` at its last revision with a screen; None without F1's table."""
    f1 = F.get("f1_bos_floor")
    if f1 is None or not f1.height:
        return None
    g = f1.filter(pl.col("model") == model)
    if not g.height:
        return None
    last = g.sort("tokens", nulls_last=True, maintain_order=True)["revision"][-1]
    rows = g.filter(pl.col("revision") == last)
    with_first = rows.filter(pl.col("n_first_token") > 0)
    floor = F.get("f1_floor")
    fl = floor.filter(pl.col("model") == model) if floor is not None and floor.height else None
    key0 = rows["n_first_token_key0"] if "n_first_token_key0" in rows.columns else None
    mass = rows["key0_mass"] if "key0_mass" in rows.columns else None

    def floor_col(name):
        return fl[name][0] if fl is not None and fl.height and name in fl.columns else None
    return FirstToken(
        revision=str(last), n_first=int(rows["n_first_token"].sum()), n_heads=int(rows["n_heads"].sum()),
        lowest_layer=int(with_first["layer"].min()) if with_first.height else None,
        floor_layers=str(fl["floor_layers"][0]) if fl is not None and fl.height else None,
        floor_holds=bool(fl["floor_holds"][0]) if fl is not None and fl.height else None,
        n_layers=int(rows["layer"].n_unique()),
        n_key0=None if key0 is None or key0.null_count() else int(key0.sum()),
        key0_mass=None if mass is None or mass.null_count() else float(mass[0]),
        n_revisions=None if floor_col("n_revisions") is None else int(floor_col("n_revisions")),
        floor_max_sel=floor_col("max_sel_first_token"))


def sentence(named: list[tuple[str, FirstToken]]) -> str | None:
    """'First-token heads at each model's last revision: m1 79.3% (...); m2 none at step1000.'; None
    when no model has F1's table. Models with none are named together."""
    if not named:
        return None
    with_first = [(m, ft) for m, ft in named if ft.n_first]
    wheres = {ft.floor_words() for _, ft in with_first}
    shared = (len(with_first) > 1 and len(wheres) == 1 and None not in wheres
              and all(ft.floor_holds and not ft.one_checkpoint for _, ft in with_first))
    some = [f"{m} {ft.text(floor=not shared)}" for m, ft in with_first]
    none = [m for m, ft in named if not ft.n_first]
    bits = some + ([f"none in {', '.join(none)}"] if none else [])
    tail = (f"; where there are any, none is in {wheres.pop()} at any revision (Finding 1's floor)"
            if shared else "")
    return ("First-token heads (at or above the class threshold) at each model's last revision: " + "; ".join(bits)
            + tail + ".")
