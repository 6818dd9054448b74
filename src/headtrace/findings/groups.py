"""Seed groups: the findings of n training runs of one recipe, answered as one.

Pure functions over the members' own findings tables (``findings.compute.all_findings``) and
trajectories; nothing is re-run. Every statistic says how many members it rests on (``n_used``);
a member with no bracket for a statistic (no trajectory, a milestone it has no row for, a gap with
no bound) is carried in the member tables and counted out of that statistic.

Order statistics of bracketed values: member i's value is only known to lie in [l_i, h_i]
(a crossing in (lo, hi]: left-censored -> l = 0, right-censored -> h = inf; a gap: its
``gap_lo`` / ``gap_hi``, a missing end 0 / inf). The k-th smallest of the values then lies in
[l_(k), h_(k)] (the k-th smallest lower end, the k-th smallest upper end), and that range is sharp.
The median (n even: the mean of the two middle order statistics), the minimum and the maximum are
reported that way; an end resting on an infinite bound is null. docs/statistics.md#seed-groups.
"""
from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import polars as pl

from headtrace.core.heads import as_heads, head_name, jaccard
from headtrace.findings import agreement
from headtrace.findings import order as milestone_order
from headtrace.core.tables import SCHEMAS as SCHEMAS_GROUP
from headtrace.core.tables import conform
from headtrace.findings.trajectory import ONE_CHECKPOINT, final_circuit, revision_order

INF = math.inf

# Every table of a group (results/groups/{group}/{name}.parquet), in report order.
GROUP_TABLES = ["group_summary", "group_members", "group_milestones", "group_member_milestones", "group_gaps",
                "group_member_gaps", "group_recall", "group_recall_levels", "group_jaccard"]


def binomial_p(k: int, n: int) -> float:
    """Exact two-sided binomial p of ``k`` successes in ``n`` trials against 50%:
    min(1, 2 P(X <= min(k, n - k))); NaN for n = 0 (nothing decided, nothing tested)."""
    if n <= 0:
        return math.nan
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def bracket_stats(los: Sequence[float | None], his: Sequence[float | None]) -> dict:
    """Median, minimum and maximum of values each known only to lie in [lo_i, hi_i] (None: lo 0,
    hi unbounded) as intervals ``(median_lo, median_hi, min_lo, min_hi, max_lo, max_hi)``; an
    unbounded end is None. Empty input: every end None."""
    lo = [0.0 if x is None else float(x) for x in los]
    hi = [INF if x is None else float(x) for x in his]
    if not lo:
        return dict.fromkeys(("median_lo", "median_hi", "min_lo", "min_hi", "max_lo", "max_hi"))

    def fin(x):
        return None if x == INF else x
    return dict(median_lo=fin(_order_median(lo)), median_hi=fin(_order_median(hi)),
                min_lo=fin(min(lo)), min_hi=fin(min(hi)), max_lo=fin(max(lo)), max_hi=fin(max(hi)))


def member_milestones(group: str, members: Mapping[str, int], ms: pl.DataFrame) -> pl.DataFrame:
    """``group_member_milestones``: every member x milestone, the member's bracket (``onset_lo`` /
    ``onset_hi``: the crossing's interval, 0 and null at the censored ends); a member with no row
    for the milestone is carried with ``present`` false."""
    names = ms["milestone"].unique(maintain_order=True).to_list() if ms.height else []
    by = _rows_by_member(ms, list(members), "milestone")
    rows = []
    for name in names:
        for m, seed in members.items():
            r = by.get((m, name))
            lo, hi = _bounds(r) if r else (None, None)
            rows.append(dict(group=group, member=m, seed=seed, milestone=name, present=r is not None,
                             revision=r and r["revision"], tokens=r and r["tokens"],
                             lo_revision=r and r["lo_revision"], lo_tokens=r and r["lo_tokens"],
                             left_censored=r and r["left_censored"], right_censored=r and r["right_censored"],
                             onset_lo=lo, onset_hi=None if hi == INF else hi))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_member_milestones"]), "group_member_milestones")


def milestone_table(group: str, member_ms: pl.DataFrame, n_members: int) -> pl.DataFrame:
    """``group_milestones``: per milestone, over the members with a bracket for it (``n_used``):
    the median onset as an interval, the range [earliest lower end, latest upper end], how many
    members reached it, how many are left- and right-censored."""
    rows = []
    for (name,), g in member_ms.group_by("milestone", maintain_order=True):
        g = g.filter(pl.col("present"))
        st = bracket_stats(g["onset_lo"].to_list(), g["onset_hi"].to_list())
        rows.append(dict(group=group, milestone=name, n_members=n_members, n_used=g.height,
                         n_reached=int((~g["right_censored"]).sum()) if g.height else 0,
                         n_left_censored=int(g["left_censored"].sum()) if g.height else 0,
                         n_right_censored=int(g["right_censored"].sum()) if g.height else 0,
                         median_lo=st["median_lo"], median_hi=st["median_hi"],
                         range_lo=st["min_lo"], range_hi=st["max_hi"]))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_milestones"]), "group_milestones")


def member_gaps(group: str, members: Mapping[str, int], ms: pl.DataFrame, gaps: pl.DataFrame,
                pairs: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """``group_member_gaps``: every member x (later, earlier) pair: the member's gap bracket
    (``f3_gaps``), which milestone its brackets put first and what that order rests on
    (:mod:`headtrace.findings.order`: one rule for the models' rows and the groups')."""
    by_ms = _rows_by_member(ms, list(members), "milestone")
    by_gap = {(r["model"], r["later"], r["earlier"]): r for r in gaps.iter_rows(named=True)} if gaps.height else {}
    rows = []
    for later, earlier in pairs:
        for m, seed in members.items():
            g = by_gap.get((m, later, earlier))
            e = milestone_order.bounds_of_row(by_ms.get((m, earlier)))
            l_ = milestone_order.bounds_of_row(by_ms.get((m, later)))
            o = milestone_order.order_of(e, l_)
            rows.append(dict(group=group, member=m, seed=seed, later=later, earlier=earlier, present=g is not None,
                             gap_ratio=g and g["gap_ratio"], gap_lo=g and g["gap_lo"], gap_hi=g and g["gap_hi"],
                             gap_bound=g and g["gap_bound"],
                             order=o, order_basis=milestone_order.basis_of(o, e, l_)))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_member_gaps"]), "group_member_gaps")


def gap_table(group: str, member_g: pl.DataFrame, n_members: int) -> pl.DataFrame:
    """``group_gaps``: per (later, earlier) pair: in how many members the earlier milestone comes
    first, the later first, undecided or absent, and how many of the decided orders rest on censoring
    alone (``n_by_censoring``: the milestone that came second was never met, so the order says only
    that it did not come); the exact two-sided binomial p against 50% over the orders seen
    (``p_sign``: the decided orders less those by censoring; null when none was seen); the median, smallest and largest gap as intervals over the
    members whose gap has a bound (``n_gap``; a gap "unknown" is counted out)."""
    rows = []
    for (later, earlier), g in member_g.group_by("later", "earlier", maintain_order=True):
        c = Counter(g["order"].to_list())
        k, n = c["earlier first"], c["earlier first"] + c["later first"]
        seen = g.filter(pl.col("order_basis") == milestone_order.SEEN)  # the sign test counts orders seen only
        k_seen = int((seen["order"] == milestone_order.EARLIER_FIRST).sum())
        b = g.filter(pl.col("present") & pl.col("gap_bound").is_in(["interval", "lower bound", "upper bound"]))
        st = bracket_stats(b["gap_lo"].to_list(), b["gap_hi"].to_list())
        rows.append(dict(group=group, later=later, earlier=earlier, n_members=n_members, n_decided=n,
                         n_earlier_first=k, n_later_first=c["later first"], n_undecided=c["undecided"],
                         n_absent=c["absent"], n_by_censoring=int((g["order_basis"] == milestone_order.CENSORING).sum()),
                         p_sign=binomial_p(k_seen, seen.height), n_gap=b.height,
                         median_gap_lo=st["median_lo"], median_gap_hi=st["median_hi"],
                         smallest_gap_lo=st["min_lo"], smallest_gap_hi=st["min_hi"],
                         largest_gap_lo=st["max_lo"], largest_gap_hi=st["max_hi"]))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_gaps"]), "group_gaps")


def final_circuits(traj: pl.DataFrame | None, members: Sequence[str], induction_threshold: float) -> dict:
    """Member -> (final revision, its final induction circuit as ``LxHy`` names); members without a
    trajectory are left out."""
    if traj is None or not traj.height:
        return {}
    sub = traj.filter(pl.col("model").is_in(list(members)))
    fin = final_circuit(sub, induction_threshold)
    last = revision_order(sub).sort("rev_index").group_by("model").agg(pl.col("revision").last(), pl.col("tokens").last())
    by = {r["model"]: r for r in last.iter_rows(named=True)}
    out = {}
    for m in members:  # in the group's order
        if m in by:
            heads = fin.filter(pl.col("model") == m)
            out[m] = (by[m]["revision"], by[m]["tokens"],
                      [head_name(a, b) for a, b in zip(heads["layer"].to_list(), heads["head"].to_list())])
    return out


def check_geometry(traj: pl.DataFrame, members: Sequence[str], group: str) -> None:
    """The members' trajectories have the same layers x heads (a hub member's geometry is known only
    once its cells have run); raises ValueError naming the member and what differs."""
    ref = None
    for m in members:
        g = traj.filter(pl.col("model") == m)
        if not g.height:
            continue
        geo = (int(g["layer"].n_unique()), int(g["head"].n_unique()))
        if ref is None:
            ref = (m, geo)
        elif geo != ref[1]:
            raise ValueError(f"groups.{group}.members.{m}: {geo[0]} layers x {geo[1]} heads, but {ref[0]} has "
                             f"{ref[1][0]} x {ref[1][1]}; a seed group's members share their architecture")


def member_table(group: str, members: Mapping[str, int], findings: Mapping[str, pl.DataFrame],
                 circuits: Mapping) -> pl.DataFrame:
    """``group_members``: one row per member: present (it has findings), revisions, final revision,
    F1 floor held, the most first-token heads at any revision (0: the floor and the shape had nothing
    to test), F2 shape and jump share, its final induction circuit."""
    shape = _rows_by_member(findings.get("f2_shape"), list(members))
    floor = _rows_by_member(findings.get("f1_floor"), list(members))
    bos = findings.get("f2_bos_fraction")
    most = ({} if bos is None or not bos.height else
            dict(bos.group_by("model").agg(pl.col("n_first_token").max()).iter_rows()))
    rows = []
    for m, seed in members.items():
        s, f = shape.get(m), floor.get(m)
        rev, tok, circ = circuits.get(m, (None, None, None))
        rows.append(dict(group=group, member=m, seed=seed, present=s is not None,
                         n_revisions=s and s["n_revisions"], final_revision=rev, final_tokens=tok,
                         floor_holds=f and f["floor_holds"], max_first_token_heads=most.get(m),
                         shape=s and s["shape"], jump_share=s and s["jump_share"],
                         circuit=circ, n_circuit=None if circ is None else len(circ)))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_members"]), "group_members")


def recall_tables(group: str, members: Mapping[str, int], rec: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``group_recall`` (member x F4 level: the first revision whose recall of the member's own final
    circuit reaches the level, its tokens and share of the final tokens) and ``group_recall_levels``
    (per level: members with recall rows, members reaching it, median / smallest / largest share)."""
    levels = rec["level_label"].unique(maintain_order=True).to_list() if rec is not None and rec.height else []
    by = _rows_by_member(rec, list(members), "level_label")
    rows, summ = [], []
    for lv in levels:
        shares = []
        n_used = 0
        for m, seed in members.items():
            r = by.get((m, lv))
            n_used += r is not None
            if r is not None and r["token_share"] is not None:
                shares.append(float(r["token_share"]))
            rows.append(dict(group=group, member=m, seed=seed, level_label=lv, present=r is not None,
                             revision=r and r["revision"], tokens=r and r["tokens"], token_share=r and r["token_share"]))
        summ.append(dict(group=group, level_label=lv, n_members=len(members), n_used=n_used, n_reached=len(shares),
                         share_median=float(np.median(shares)) if shares else None,
                         share_min=min(shares) if shares else None, share_max=max(shares) if shares else None))
    return (conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_recall"]), "group_recall"),
            conform(pl.DataFrame(summ, schema=SCHEMAS_GROUP["group_recall_levels"]), "group_recall_levels"))


def jaccard_table(group: str, circuits: Mapping, n_heads: Mapping[int, int] | None = None) -> pl.DataFrame:
    """``group_jaccard``: every pair of members with a final circuit: the Jaccard of their head
    sets (null when both circuits are empty), shared heads, each circuit's size, and beside it the
    within-layer permutation null (``headtrace.findings.agreement``; null without ``n_heads``,
    heads per layer)."""
    rows = []
    for a, b in combinations(list(circuits), 2):
        ca, cb = circuits[a][2], circuits[b][2]
        j = jaccard(ca, cb)
        null = agreement.jaccard_null(ca, cb, n_heads) if n_heads else {}
        rows.append(dict(group=group, member_a=a, member_b=b, jaccard=None if math.isnan(j) else j,
                         n_shared=len(set(ca) & set(cb)), n_a=len(ca), n_b=len(cb),
                         jaccard_chance=null.get("null_mean"), p_value=null.get("p_value"),
                         beyond_chance=null.get("beyond_chance")))
    return conform(pl.DataFrame(rows, schema=SCHEMAS_GROUP["group_jaccard"]), "group_jaccard")


def forced_recurrence(circuits: Sequence[Sequence[str]], n_heads: Mapping[int, int] | None) -> int | None:
    """The fewest heads that must recur in more than one of ``circuits`` (``LxHy`` names) by their sizes
    alone: per layer with H heads and circuit sizes s_1..s_n (n >= 2), ``ceil((sum s - H) / (n - 1))`` when
    positive (10 and 11 heads of a 12-head layer share at least 9). None without the layer sizes."""
    if n_heads is None:
        return None
    sized = [c for c in circuits if c]
    if len(sized) < 2:
        return 0
    per_layer: Counter = Counter()
    for c in sized:
        per_layer.update(l for l, _ in as_heads(c))
    return sum(max(0, math.ceil((total - n_heads.get(l, 0)) / (len(sized) - 1))) for l, total in per_layer.items())


def summary_row(group: str, members: Mapping[str, int], mem: pl.DataFrame, jac: pl.DataFrame,
                circuits: Mapping, n_heads: Mapping[int, int] | None = None) -> pl.DataFrame:
    """``group_summary``: F1 floor held in k of n members; the commonest F2 shape and how many members
    share it; the circuits' median / smallest / largest pairwise Jaccard (over the pairs with one),
    and of the distinct (layer, head) positions in any member's final circuit, how many recur in
    more than one member's, beside how many the circuits' sizes force to (:func:`forced_recurrence`)."""
    p = mem.filter(pl.col("present"))
    fl = p.filter(pl.col("floor_holds").is_not_null())
    # a member screened at one checkpoint has no shape to agree on (trajectory.ONE_CHECKPOINT)
    shapes = Counter(s for s in p["shape"].to_list() if s is not None and s != ONE_CHECKPOINT)
    modal, n_modal = (shapes.most_common(1)[0] if shapes else (None, 0))
    tied = sorted(s for s, c in shapes.items() if c == n_modal)  # a tie: the first label alphabetically, said so
    js = [x for x in jac["jaccard"].to_list() if x is not None] if jac.height else []
    chance = [x for x in jac["jaccard_chance"].to_list() if x is not None] if jac.height else []
    seen = Counter(h for _, _, c in circuits.values() for h in set(c))
    row = dict(group=group, n_members=len(members), n_present=p.height,
               floor_n_used=fl.height, floor_n_held=int(fl["floor_holds"].sum()) if fl.height else 0,
               floor_n_vacuous=int((fl["floor_holds"] & (fl["max_first_token_heads"].fill_null(0) == 0)).sum())
               if fl.height else 0,
               shape_n_used=sum(shapes.values()), shape_modal=tied[0] if tied else None, shape_n_agree=n_modal,
               shape_tied=len(tied) > 1, circuit_n_used=len(circuits), jaccard_n_pairs=len(js),
               jaccard_median=float(np.median(js)) if js else None, jaccard_min=min(js) if js else None,
               jaccard_max=max(js) if js else None,
               jaccard_chance_median=float(np.median(chance)) if chance else None,
               jaccard_n_beyond_chance=int(jac["beyond_chance"].fill_null(False).sum()) if chance else None,
               n_distinct_heads=len(seen),
               n_recurring_heads=sum(1 for c in seen.values() if c > 1),
               n_recurring_forced=forced_recurrence([c for _, _, c in circuits.values()], n_heads),
               recurring_share=(sum(1 for c in seen.values() if c > 1) / len(seen)) if seen else None)
    return conform(pl.DataFrame([row], schema=SCHEMAS_GROUP["group_summary"]), "group_summary")


def group_findings(group: str, members: Mapping[str, int], findings: Mapping[str, pl.DataFrame],
                   traj: pl.DataFrame | None, pairs: Sequence[Sequence[str]],
                   induction_threshold: float = 50.0) -> dict[str, pl.DataFrame]:
    """Every group table by schema name (``GROUP_TABLES``), from the panel's findings tables
    (``f3_milestones``, ``f3_gaps``, ``f2_shape``, ``f1_floor``, ``f4_recall_milestones``) and the
    members' trajectories (final circuits; None: no circuits). ``pairs``: the (later, earlier) F3
    pairs (``findings.gaps``)."""
    members = dict(members)
    pairs = [tuple(p) for p in pairs]
    if traj is not None and traj.height:
        check_geometry(traj, list(members), group)
    ms = findings["f3_milestones"]
    member_ms = member_milestones(group, members, ms)
    member_g = member_gaps(group, members, ms, findings["f3_gaps"], pairs)
    circuits = final_circuits(traj, list(members), induction_threshold)
    mem = member_table(group, members, findings, circuits)
    rec, rec_levels = recall_tables(group, members, findings.get("f4_recall_milestones"))
    per_layer = agreement.heads_per_layer(traj, next(iter(circuits))) if circuits else None
    jac = jaccard_table(group, circuits, per_layer)
    return {
        "group_summary": summary_row(group, members, mem, jac, circuits, per_layer),
        "group_members": mem,
        "group_milestones": milestone_table(group, member_ms, len(members)),
        "group_member_milestones": member_ms,
        "group_gaps": gap_table(group, member_g, len(members)),
        "group_member_gaps": member_g,
        "group_recall": rec,
        "group_recall_levels": rec_levels,
        "group_jaccard": jac,
    }


def _order_median(values: Sequence[float]) -> float:
    """Median of finite-or-infinite values (n even: mean of the two middle ones)."""
    v = sorted(values)
    n = len(v)
    if n % 2:
        return v[n // 2]
    a, b = v[n // 2 - 1], v[n // 2]
    return INF if INF in (a, b) else (a + b) / 2


def _bounds(row: Mapping) -> tuple[float, float]:
    """A milestone row's crossing interval (lo, hi]: left-censored -> lo 0; right-censored -> hi inf."""
    return milestone_order.bounds_of_row(row)


def _rows_by_member(df: pl.DataFrame | None, members: Sequence[str], key: str | None = None) -> dict:
    if df is None or not df.height:
        return {}
    sub = df.filter(pl.col("model").is_in(list(members)))
    out: dict = {}
    for r in sub.iter_rows(named=True):
        out[(r["model"], r[key]) if key else r["model"]] = r
    return out
