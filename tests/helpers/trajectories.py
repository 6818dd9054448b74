"""Hand-built trajectories with known answers, shared by the tests of several rooms.

* ``one_layer_trajectory``: one layer whose induction and first-token heads switch on at given
  revisions, so every bracket is known (tests/panel/test_refine.py, tests/cell/test_bootstrap.py);
* ``seed_group_trajectory``: three toy seeds A, B, C of 4 layers x 4 heads with known onsets
  (``MEMBERS``, the milestone pair ``PAIRS``), tabulated in tests/findings/test_groups.py's docstring
  (tests/findings/test_groups.py, tests/report/test_parity.py);
* ``final_circuit_trajectory``: two models whose final induction circuit and F4 recall at the class and
  the circuit threshold are known (tests/findings/test_final_circuit.py, tests/report/test_final_circuit_words.py);
* ``RENDER_SETTINGS``: the thresholds ``all_findings`` computes with when given none, which the pages
  (``summary.render``, ``figures.plot_all``) must be told: report/ holds no threshold default.
"""
from __future__ import annotations

import inspect

import polars as pl

from headtrace.core.tables import CLASS_COLUMNS, SCHEMAS
from headtrace.findings.compute import all_findings

RENDER_SETTINGS = {k: inspect.signature(all_findings).parameters[k].default
                   for k in ("class_threshold", "induction_threshold", "sharp_share", "pr_rise_factor", "spread_alpha")}


def one_layer_trajectory(model: str, revisions: list[tuple[str, int]], n_induction: dict[str, int],
                         bos: dict[str, int] | None = None, n_heads: int = 8) -> pl.DataFrame:
    """A trajectory of one layer of ``n_heads`` heads: at each revision the first n_induction[rev]
    heads have induction selectivity 100 (others 1), the last bos[rev] heads first-token 100."""
    rows = []
    for rev, tokens in revisions:
        k, b = n_induction.get(rev, 0), (bos or {}).get(rev, 0)
        for h in range(n_heads):
            ind, first = (100.0 if h < k else 1.0), (100.0 if h >= n_heads - b else 1.0)
            best = "induction" if ind >= first else "first_token"
            rows.append(dict(model=model, revision=rev, tokens=tokens, layer=0, head=h, pr=None,
                             sel_induction=ind, sel_duplicate_token=1.0, sel_previous_token=1.0,
                             sel_first_token=first, sel_self=1.0, sel_local=1.0, best_class=best,
                             best_selectivity=max(ind, first), classification=best if max(ind, first) >= 30 else "unclassified",
                             in_induction_circuit=ind >= 50))
    return pl.DataFrame(rows, schema=SCHEMAS["trajectory"])


# the seed group: three members, revisions step1..step5 (C lacks step4)
TOKENS = {"step1": 100, "step2": 200, "step3": 400, "step4": 800, "step5": 1600}
SINK_SLOTS = [(2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 2), (3, 3), (3, 0)]
SPEC = {  # member: (revisions, induction onset, circuit, sink counts per revision, extra L0 sink at)
    "A": (["step1", "step2", "step3", "step4", "step5"], "step2", [(1, 0), (1, 1), (2, 0)], [0, 0, 0, 8, 8], None),
    "B": (["step1", "step2", "step3", "step4", "step5"], "step1", [(1, 0), (2, 1), (2, 2)], [0, 3, 6, 8, 9], None),
    "C": (["step1", "step2", "step3", "step5"], "step3", [(1, 0), (1, 1), (2, 3)], [0, 0, 4, 4], "step5"),
}
MEMBERS = {"A": 0, "B": 1, "C": 2}
PAIRS = [("first_token_50pct", "induction_3_heads")]


def seed_group_trajectory() -> pl.DataFrame:
    rows = []
    for m, (revs, onset, circuit, sinks, l0_at) in SPEC.items():
        for i, r in enumerate(revs):
            on = revs.index(r) >= revs.index(onset)
            n_sink = sinks[i]
            sink = set(SINK_SLOTS[:min(n_sink, 8)])
            if n_sink == 9:  # B's ninth sink head sits in layer 1, a floor layer: B's F1 floor fails
                sink = set(SINK_SLOTS[:8]) | {(1, 3)}
            if l0_at == r:
                sink |= {(0, 3)}
            for layer in range(4):
                for head in range(4):
                    ind = 100.0 if on and (layer, head) in circuit else 0.0
                    ft = 40.0 if (layer, head) in sink else 0.0
                    sel = {f"sel_{c}": 0.0 for c in CLASS_COLUMNS}
                    sel.update(sel_induction=ind, sel_first_token=ft)
                    best = max(ind, ft)
                    rows.append(dict(model=m, revision=r, tokens=TOKENS[r], layer=layer, head=head, pr=1.0, **sel,
                                     best_class="induction" if ind >= ft and ind else ("first-token" if ft else "none"),
                                     best_selectivity=best, classification="x", in_induction_circuit=ind >= 50))
    return pl.DataFrame(rows, schema=SCHEMAS["trajectory"])


# model "m", 2 layers x 2 heads, induction selectivity per head (L0H0, L0H1, L1H0, L1H1) at each revision:
# the final circuit (>= 50x at s2) is L0H0 (60x), L0H1 (80x), L1H0 (55x); L1H1 (40x) is found at the class
# threshold (30x) only, and is no circuit head. Recall, found at >= 30x: s1 2 of 3 (L0H0 60, L0H1 35), s2 3 of 3;
# at >= 50x: s1 1 of 3, s2 3 of 3. Model "none": no head reaches 50x at its final revision (45x at most).
FINAL_CIRCUIT_PLAN = {"m": {"s0": (0, [1, 1, 1, 1]), "s1": (100, [60, 35, 1, 1]), "s2": (1000, [60, 80, 55, 40])},
                      "none": {"s0": (0, [1, 1, 1, 1]), "s1": (100, [45, 1, 1, 1])}}


def final_circuit_trajectory() -> pl.DataFrame:
    """The trajectory of ``FINAL_CIRCUIT_PLAN`` (every other class 1x, PR 1), classified at 30x / 50x."""
    rows = []
    for model, plan in FINAL_CIRCUIT_PLAN.items():
        for rev, (tok, sels) in plan.items():
            for i, s in enumerate(sels):
                sel = {f"sel_{c}": float(s if c == "induction" else 1.0) for c in CLASS_COLUMNS}
                rows.append(dict(model=model, revision=rev, tokens=tok, layer=i // 2, head=i % 2, pr=1.0, **sel,
                                 best_class="induction" if s > 1 else "none", best_selectivity=float(s),
                                 classification="induction" if s >= 30 else "unclassified",
                                 in_induction_circuit=s >= 50))
    return pl.DataFrame(rows, schema=SCHEMAS["trajectory"])
