"""Paper B's findings, as pure aggregations over the per-head trajectory table.

Input everywhere: a ``trajectory`` table (``tables.SCHEMAS["trajectory"]``), one row per
model x revision x layer x head, as built by ``assemble`` from the per-cell screen and PR tables.
Several models may be mixed; every function groups by ``model``. Each finding function returns a
DataFrame with a schema in ``tables.SCHEMAS`` (named like the function).

Revision order: within a model, revisions are ordered by ``tokens`` (nulls last), ties broken by the
``step<N>`` number in the revision name, then by name. "First revision reaching X" means first in
that order. Thresholds default to the papers' (class 30x, induction circuit 50x) and are arguments.

Definitions (documented choices are marked *choice*):

* **BOS-attractor (first-token) head** = ``sel_first_token >= class_threshold``, whatever its best
  class (this is the published count: e.g. Pythia step3000 has 14 such heads of 128 = 10.9%, only 12
  of which have first-token as best class). The best-class count is given next to it
  (``*_best_class`` columns) for comparison. Selectivity is a ratio (attention to key 0 over the
  baseline's), so a head can pass it with little attention on key 0 at all (a previous-token head with
  0.5% there, against a baseline ten times smaller). Beside every count, ``n_first_token_key0`` counts
  the first-token heads that also put at least ``key0_mass`` (default ``KEY0_MASS`` = 0.3, Gu et al.'s
  epsilon for a sink) of their attention on key 0 at the probe's query (the screen's
  ``attn_first_token``, the mean over the probe sequences); null where the screen recorded no attention
  mass (the published panel). The paper's count stays F1's and F2's definition.
* **Induction circuit** at a revision = heads with ``sel_induction >= induction_threshold``.
"""
from __future__ import annotations


import numpy as np
import polars as pl

from headtrace.cell.measures import SINK_EPS
from headtrace.core import milestones
from headtrace.core.revisions import training_order_key
from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings import order as milestone_order

KEY = ["model", "revision", "tokens", "layer", "head"]
KEY0_MASS = SINK_EPS  # Gu et al.'s epsilon (0.3): a first-token head that is also a sink by mass
ONE_CHECKPOINT = "one checkpoint"  # F2's shape of a model screened at one revision: no trajectory
# the screen's columns a trajectory carries beside its schema when the screens have them
CARRIED = ("screen_baseline", "attn_first_token")


# ---------------------------------------------------------------------------------------------
# assembly and ordering


def revision_order(df: pl.DataFrame) -> pl.DataFrame:
    """(model, revision, tokens, rev_index) for every distinct revision of every model, in training
    order (``revisions.training_order_key``: tokens, nulls last; then step number; then name).
    rev_index is 0-based per model."""
    keys = df.select("model", "revision", "tokens")
    rows = sorted(keys.unique().rows(), key=lambda r: (r[0], training_order_key(r[1], r[2])))
    revs = pl.DataFrame(rows, schema=keys.schema, orient="row")
    return revs.with_columns(rev_index=pl.int_range(pl.len()).over("model").cast(pl.Int32))


def with_rev_index(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (any table with model, revision, tokens) plus its per-model ``rev_index``."""
    order = revision_order(df)
    return df.join(order.select("model", "revision", "rev_index"), on=["model", "revision"], how="left")


_ordered = with_rev_index


def assemble(screens: list[pl.DataFrame], prs: list[pl.DataFrame]) -> pl.DataFrame:
    """trajectory rows: every screen row joined (left) with its PR on model, revision, tokens,
    layer, head (null tokens match null tokens); PR is null where no PR cell exists. Ordered by
    model, tokens (nulls last), layer, head."""
    screen = pl.concat([conform(s, "screen") for s in screens], how="diagonal_relaxed")
    keep = [c for c in SCHEMAS["trajectory"] if c != "pr"]
    # which baseline (cell.screen); the attention mass on key 0 (F1's key0 count); not a column no
    # screen recorded (the published panel's)
    keep += [c for c in CARRIED if c in screen.columns and screen[c].null_count() < screen.height]
    screen = screen.select(keep)
    if prs:
        pr = pl.concat([conform(p, "pr").select(list(SCHEMAS["pr"])) for p in prs])
        if pr.select(KEY).is_duplicated().any():
            raise ValueError("duplicate (model, revision, tokens, layer, head) rows in the PR tables")
        out = screen.join(pr, on=KEY, how="left", nulls_equal=True)
    else:
        out = screen.with_columns(pr=pl.lit(None, dtype=pl.Float64))
    out = _ordered(out).sort(["model", "rev_index", "layer", "head"]).drop("rev_index")
    extra = [c for c in CARRIED if c in out.columns]
    return conform(out, "trajectory").select(list(SCHEMAS["trajectory"]) + extra)


# ---------------------------------------------------------------------------------------------
# F1 zero-BOS floor


def f1_bos_floor(traj: pl.DataFrame, class_threshold: float = 30.0, key0_mass: float = KEY0_MASS) -> pl.DataFrame:
    """Per model x revision x layer: first-token heads (``sel_first_token >= class_threshold``),
    heads whose best class is first-token at that threshold, heads in the layer, the first-token heads
    that also put ``>= key0_mass`` of their attention on key 0 (``n_first_token_key0``; null when a
    head of the layer has no recorded ``attn_first_token``) and the layer's largest first-token
    selectivity."""
    first = pl.col("sel_first_token") >= class_threshold
    mass = pl.col("attn_first_token") if "attn_first_token" in traj.columns else pl.lit(None, dtype=pl.Float64)
    out = traj.group_by("model", "revision", "tokens", "layer").agg(
        n_first_token=first.fill_null(False).sum().cast(pl.Int32),
        n_heads=pl.len().cast(pl.Int32),
        n_first_token_best_class=(first & (pl.col("best_class") == "first-token")).fill_null(False)
        .sum().cast(pl.Int32),
        n_first_token_key0=pl.when(mass.is_null().any()).then(None)
        .otherwise((first & (mass >= key0_mass)).fill_null(False).sum()).cast(pl.Int32),
        max_sel_first_token=pl.col("sel_first_token").max(),
    ).with_columns(key0_mass=pl.lit(float(key0_mass)))
    out = _ordered(out).sort("model", "rev_index", "layer").drop("rev_index")
    return conform(out, "f1_bos_floor")


def f1_floor_holds(f1: pl.DataFrame, floor_layers: tuple[int, ...] = (0, 1)) -> pl.DataFrame:
    """Per model: does every layer in ``floor_layers`` have zero first-token heads at every
    revision? ``max_first_token`` is the largest per-layer count seen in those layers."""
    sub = f1.filter(pl.col("layer").is_in(list(floor_layers)))
    out = sub.group_by("model").agg(
        n_revisions=pl.col("revision").n_unique().cast(pl.Int32),
        max_first_token=pl.col("n_first_token").max().cast(pl.Int32),
        max_sel_first_token=(pl.col("max_sel_first_token") if "max_sel_first_token" in sub.columns
                             else pl.lit(None, dtype=pl.Float64)).max(),
    ).with_columns(
        floor_layers=pl.lit(",".join(str(x) for x in floor_layers)),
        floor_holds=pl.col("max_first_token") == 0,
    ).sort("model")
    return conform(out, "f1_floor")


# ---------------------------------------------------------------------------------------------
# F2 BOS fraction and its shape


def f2_bos_fraction(traj: pl.DataFrame, class_threshold: float = 30.0, key0_mass: float = KEY0_MASS) -> pl.DataFrame:
    """Per model x revision: first-token heads / all heads (0-1), plus the best-class variant and the
    first-token heads with ``>= key0_mass`` of their attention on key 0 (null when a layer's is)."""
    f1 = f1_bos_floor(traj, class_threshold, key0_mass)
    key0 = pl.col("n_first_token_key0")
    out = f1.group_by("model", "revision", "tokens").agg(
        pl.col("n_first_token").sum().cast(pl.Int32),
        pl.col("n_heads").sum().cast(pl.Int32),
        pl.col("n_first_token_best_class").sum().cast(pl.Int32),
        pl.when(key0.is_null().any()).then(None).otherwise(key0.sum()).cast(pl.Int32).alias("n_first_token_key0"),
    ).with_columns(
        bos_fraction=pl.col("n_first_token") / pl.col("n_heads"),
        bos_fraction_best_class=pl.col("n_first_token_best_class") / pl.col("n_heads"),
    )
    out = _ordered(out).sort("model", "rev_index").drop("rev_index")
    return conform(out, "f2_bos_fraction")


def f2_shape(f2: pl.DataFrame, sharp_share: float = 0.5, fraction: str = "bos_fraction") -> pl.DataFrame:
    """Per model: the emergence shape of the BOS fraction.

    ``largest_jump_pp`` = largest increase between adjacent revisions (percentage points);
    ``rise_pp`` = final - first fraction; ``jump_share`` = largest_jump_pp / rise_pp.
    Rule (*choice*): **"sharp transition"** when one adjacent-checkpoint step carries at least
    ``sharp_share`` (default 0.5, i.e. half) of the whole rise, else **"gradual ramp"**; "no rise"
    when rise_pp <= 0. Why: a phase transition is a rise concentrated in one interval; a ramp spreads
    it over several. The rule uses the checkpoints as given (it cannot see inside an interval), so it
    labels the *resolved* shape. On the published panel the shares are far from 0.5 on both sides
    (OLMo ~0.8; Pythia and OLMoE ~0.3-0.4), so the label does not hinge on the threshold.
    ``monotone`` = no decrease between adjacent revisions (exact counts, no tolerance).
    **"one checkpoint"** (``ONE_CHECKPOINT``) for a model screened at a single revision: it has a
    fraction (``first_fraction`` = ``final_fraction``) but no trajectory, so no shape, rise, jump or
    monotonicity (all null), not "no rise".
    """
    rows = []
    for model, g in _ordered(f2).sort("model", "rev_index").group_by("model", maintain_order=True):
        fr = g[fraction].to_list()
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        diffs = [b - a for a, b in zip(fr[:-1], fr[1:])]
        rise = (fr[-1] - fr[0]) if fr else None
        if diffs:
            i = int(np.argmax(diffs))
            jump, frm, to, ft, tt = diffs[i], revs[i], revs[i + 1], toks[i], toks[i + 1]
        else:
            jump = frm = to = ft = tt = None
        share = (jump / rise) if (jump is not None and rise and rise > 0) else None
        shape = "no rise" if (rise is None or rise <= 0) else (
            "sharp transition" if share is not None and share >= sharp_share else "gradual ramp")
        if len(fr) == 1:  # no trajectory: nothing rose or fell
            rise, shape = None, ONE_CHECKPOINT
        rows.append(dict(model=model[0], n_revisions=len(fr), first_fraction=fr[0] if fr else None,
                         final_fraction=fr[-1] if fr else None, max_fraction=max(fr) if fr else None,
                         largest_jump_pp=None if jump is None else 100 * jump,
                         jump_from_revision=frm, jump_to_revision=to, jump_from_tokens=ft,
                         jump_to_tokens=tt, rise_pp=None if rise is None else 100 * rise,
                         jump_share=share, monotone=all(d >= 0 for d in diffs) if diffs else None, shape=shape))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f2_shape"]), "f2_shape")


# ---------------------------------------------------------------------------------------------
# F3 milestones


def circuit_size(traj: pl.DataFrame, class_threshold: float = 30.0,
                 induction_threshold: float = 50.0) -> pl.DataFrame:
    """Per model x revision: induction circuit size (sel_induction >= induction_threshold), heads
    with sel_induction >= class_threshold, and the specialized-head fraction (heads whose best
    selectivity reaches class_threshold, i.e. not unclassified, / all heads)."""
    ind = pl.col("sel_induction")
    out = traj.group_by("model", "revision", "tokens").agg(
        n_induction_circuit=(ind >= induction_threshold).fill_null(False).sum().cast(pl.Int32),
        n_induction_class_threshold=(ind >= class_threshold).fill_null(False).sum().cast(pl.Int32),
        n_specialized=(pl.col("best_selectivity") >= class_threshold).fill_null(False).sum().cast(pl.Int32),
        n_heads=pl.len().cast(pl.Int32),
    ).with_columns(specialized_fraction=pl.col("n_specialized") / pl.col("n_heads"))
    out = _ordered(out).sort("model", "rev_index").drop("rev_index")
    return conform(out, "circuit_size")


# The F3 milestones every panel reports, and the gaps between them (later, earlier). The toy
# panel's pair (first_token_25pct after induction_2_heads) is chosen in config/config.yaml.
INDUCTION_COUNTS = (2, 3, 5)
FIRST_TOKEN_FRACTIONS = (0.1, 0.25, 0.3, 0.5, 0.7)
GAPS = (("first_token_50pct", "induction_3_heads"), ("first_token_10pct", "induction_3_heads"))


def milestone_specs(induction_counts: tuple[int, ...] = INDUCTION_COUNTS,
                    first_token_fractions: tuple[float, ...] = FIRST_TOKEN_FRACTIONS) -> list[tuple[str, str, float]]:
    """The F3 milestones as (name, column, minimum): ``induction_{k}_heads`` on ``n_induction_circuit``
    and ``first_token_{p}pct`` on ``bos_fraction`` (1e-12 tolerance). One definition for the point
    estimate (``f3_milestones``) and the bootstrap (``onsets.onset_intervals``)."""
    marks = ([milestones.parse(milestones.name_of("induction", k)) for k in induction_counts]
             + [milestones.parse(milestones.name_of("first_token", p)) for p in first_token_fractions])
    return [(m.name, m.column, m.minimum) for m in marks]


def milestone_spec(name: str) -> tuple[str, str, float] | None:
    """(findings table, column, minimum) of one milestone named as :func:`milestone_specs` names them
    (``circuit_size.n_induction_circuit`` / ``f2_bos_fraction.bos_fraction``); None for another name."""
    try:
        m = milestones.parse(name)
    except ValueError:
        return None
    return (m.table, m.column, m.minimum) if m.kind in ("induction", "first_token") else None


def f3_milestones(traj: pl.DataFrame, class_threshold: float = 30.0, induction_threshold: float = 50.0,
                  induction_counts: tuple[int, ...] = INDUCTION_COUNTS,
                  first_token_fractions: tuple[float, ...] = FIRST_TOKEN_FRACTIONS) -> pl.DataFrame:
    """Per model x milestone: the first revision reaching it (null revision/tokens if never), and its
    checkpoint bracket.

    Milestones ``induction_{k}_heads`` (circuit size >= k at ``induction_threshold``) and
    ``first_token_{p}pct`` (BOS fraction >= p).

    Censored timing: the checkpoints only say the milestone was crossed somewhere in
    (``lo_tokens``, ``tokens``], ``lo_*`` being the last revision before the first one reaching it.
    ``left_censored``: already met at the model's first revision (``lo_*`` null: the crossing may lie
    anywhere before it). ``right_censored``: never reached (``revision``/``tokens`` null; ``lo_*`` =
    the last revision, the crossing, if any, lies after it).

    Persistence: ``lapses`` lists, in training order, the revisions after the first one reaching the
    milestone where it no longer holds (empty when it held at every later revision, or was never met)."""
    sizes = _ordered(circuit_size(traj, class_threshold, induction_threshold))
    bos = _ordered(f2_bos_fraction(traj, class_threshold))
    specs = [(name, sizes if col == "n_induction_circuit" else bos, pl.col(col) >= thr)
             for name, col, thr in milestone_specs(induction_counts, first_token_fractions)]
    order = revision_order(traj)
    models = traj["model"].unique(maintain_order=True).to_list()
    rows = []
    for model in models:
        revs = order.filter(pl.col("model") == model).sort("rev_index")
        rnames, rtoks = revs["revision"].to_list(), revs["tokens"].to_list()
        for name, table, cond in specs:
            held = set(table.filter((pl.col("model") == model) & cond)["rev_index"].to_list())
            first = min(held) if held else None
            rows.append(milestone_row(model, name, rnames, rtoks, first, lapses(first, held, rnames)))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f3_milestones"]), "f3_milestones")


def milestone_row(model: str, milestone: str, revisions: list, tokens: list, first: int | None,
                  lapsed: list[str] = ()) -> dict:
    """One ``f3_milestones`` row: ``first`` = the index (in training order, into ``revisions`` /
    ``tokens``) of the first revision reaching the milestone, None if none does; its bracket and
    censoring as :func:`f3_milestones` documents; ``lapsed``: the revisions where it is lost again
    (:func:`lapses`)."""
    lo = (first - 1) if first is not None else (len(revisions) - 1)
    return dict(model=model, milestone=milestone, revision=None if first is None else revisions[first],
                tokens=None if first is None else tokens[first], lo_revision=revisions[lo] if lo >= 0 else None,
                lo_tokens=tokens[lo] if lo >= 0 else None, left_censored=first == 0, right_censored=first is None,
                lapses=list(lapsed))


def lapses(first: int | None, held: set[int], revisions: list) -> list[str]:
    """The revisions after ``first`` (an index into ``revisions``, in training order) whose index is
    not in ``held`` (the indices where the milestone holds): where a milestone, once reached, is lost
    again. Empty when it was never reached (``first`` None)."""
    if first is None:
        return []
    return [r for i, r in enumerate(revisions) if i > first and i not in held]


def _gap_bounds(later_lo, later_hi, earlier_lo, earlier_hi, later_left, later_right, earlier_left,
                earlier_right) -> tuple[float | None, float | None, str]:
    """The interval of tokens(later) / tokens(earlier) given both crossings' brackets, each crossing
    lying in (lo, hi]: (lo_L / hi_E, hi_L / lo_E). A bound is null where its side is censored or a
    token count is unknown or 0 (no ratio against 0 tokens). Returns (gap_lo, gap_hi, kind); kind
    is "interval", "lower bound", "upper bound" or "unknown"."""
    def pos(x):
        return x is not None and x > 0
    glo = ghi = None
    if earlier_right is True or earlier_hi is None:
        return None, None, "unknown"
    if not later_left and pos(later_lo) and pos(earlier_hi):
        glo = later_lo / earlier_hi
    if not later_right and not earlier_left and later_hi is not None and pos(earlier_lo):
        ghi = later_hi / earlier_lo
    kind = ("interval" if glo is not None and ghi is not None else "lower bound" if glo is not None
            else "upper bound" if ghi is not None else "unknown")
    return glo, ghi, kind


def f3_gaps(milestones: pl.DataFrame, later: str = "first_token_50pct",
            earlier: str = "induction_3_heads") -> pl.DataFrame:
    """Per model: tokens(later) / tokens(earlier) (``gap_ratio``, the point read off the first
    revisions reaching each; null when either milestone is never reached, its tokens are unknown,
    or tokens(earlier) is 0), and what the checkpoints actually bound it to.

    ``gap_lo`` / ``gap_hi``: the gap's interval from both milestones' brackets (``f3_milestones``:
    each crossing lies in (lo_tokens, tokens]), i.e. (later_lo / earlier_hi, later_hi / earlier_lo).
    A left-censored earlier milestone (met at the first revision) has no lower token bound, so the
    gap has no upper bound: ``gap_bound`` = "lower bound" (OLMoE's published gap: >= 10.45x, not
    20.95x); a right-censored later milestone (never reached) gives a lower bound too; ``gap_bound``
    = "interval" when both ends are known; ``censored``: bounded on one side only. Tables without
    bracket columns give null bounds."""
    cols = ["lo_revision", "lo_tokens", "left_censored", "right_censored"]
    ms = milestones
    for c, t in (("lo_revision", pl.String), ("lo_tokens", pl.Int64), ("left_censored", pl.Boolean),
                 ("right_censored", pl.Boolean)):
        if c not in ms.columns:
            ms = ms.with_columns(pl.lit(None, dtype=t).alias(c))
    a = ms.filter(pl.col("milestone") == later).select(
        "model", later_revision="revision", later_tokens="tokens",
        **{f"later_{c}": c for c in cols})
    b = ms.filter(pl.col("milestone") == earlier).select(
        "model", earlier_revision="revision", earlier_tokens="tokens",
        **{f"earlier_{c}": c for c in cols})
    out = a.join(b, on="model", how="full", coalesce=True).with_columns(
        later=pl.lit(later), earlier=pl.lit(earlier),
        gap_ratio=pl.when(pl.col("earlier_tokens") > 0)
        .then(pl.col("later_tokens") / pl.col("earlier_tokens")).otherwise(None),
        same_revision=pl.col("later_revision") == pl.col("earlier_revision"),
    ).sort("model")
    bounds = [_gap_bounds(r["later_lo_tokens"], r["later_tokens"], r["earlier_lo_tokens"], r["earlier_tokens"],
                          r["later_left_censored"], r["later_right_censored"], r["earlier_left_censored"],
                          r["earlier_right_censored"]) for r in out.iter_rows(named=True)]
    out = out.with_columns(gap_lo=pl.Series([x[0] for x in bounds], dtype=pl.Float64),
                           gap_hi=pl.Series([x[1] for x in bounds], dtype=pl.Float64),
                           gap_bound=pl.Series([x[2] for x in bounds], dtype=pl.String))
    out = out.with_columns(censored=pl.col("gap_bound").is_in(["lower bound", "upper bound"]))
    orders = []
    for r in out.iter_rows(named=True):
        e, l_ = milestone_order.bounds_of_row(r, "earlier_"), milestone_order.bounds_of_row(r, "later_")
        o = milestone_order.order_of(e, l_)
        orders.append((o, milestone_order.basis_of(o, e, l_)))
    out = out.with_columns(order=pl.Series([o for o, _ in orders], dtype=pl.String),
                           order_basis=pl.Series([b for _, b in orders], dtype=pl.String),
                           gap_case=pl.Series([gap_case(r) for r in out.iter_rows(named=True)], dtype=pl.String))
    return conform(out, "f3_gaps")


# What an f3_gaps row can say of the gap, in the order they are tested (the first that applies):
GAP_CASES = ("earlier never met", "later never met", "earlier at first revision", "same revision", "interval")


def gap_case(row) -> str:
    """Which of :data:`GAP_CASES` an ``f3_gaps`` row is: the earlier milestone never met (no gap), the
    later one never met by the last revision (``gap_lo`` a lower bound), the earlier one already met at
    the first revision (a lower bound at most: the crossing may lie anywhere before it), both first met
    at one revision (the spacing does not separate them), or both met at different revisions (the
    interval ``gap_lo``/``gap_hi``). A row without censoring columns infers them: never met = no
    revision; at the first revision = met with no revision before it."""
    def flag(prefix, name, inferred):
        v = row.get(f"{prefix}_{name}")
        return inferred if v is None else bool(v)
    if row.get("earlier_revision") is None or flag("earlier", "right_censored", False):
        return GAP_CASES[0]
    if row.get("later_revision") is None or flag("later", "right_censored", False):
        return GAP_CASES[1]
    if flag("earlier", "left_censored", row.get("earlier_lo_revision") is None):
        return GAP_CASES[2]
    if row.get("same_revision") or row.get("later_revision") == row.get("earlier_revision"):
        return GAP_CASES[3]
    return GAP_CASES[4]


def f3_gap_table(milestones: pl.DataFrame, pairs=GAPS) -> pl.DataFrame:
    """``f3_gaps`` for every (later, earlier) milestone pair, pair by pair in the given order.
    A pair naming a milestone the table lacks is an error (a typo would otherwise read as
    'never reached')."""
    known = set(milestones["milestone"].unique().to_list())
    for later, earlier in pairs:
        bad = [m for m in (later, earlier) if m not in known]
        if bad and milestones.height:
            raise ValueError(f"findings.gaps: milestone(s) {bad} are not computed "
                             f"(known: {sorted(known)}; see findings.induction_counts / first_token_fractions)")
    if not pairs:
        return conform(pl.DataFrame(schema=SCHEMAS["f3_gaps"]), "f3_gaps")
    return pl.concat([f3_gaps(milestones, later, earlier) for later, earlier in pairs])


# ---------------------------------------------------------------------------------------------
# F4 recall of the final induction circuit


def final_circuit(traj: pl.DataFrame, induction_threshold: float = 50.0) -> pl.DataFrame:
    """(model, layer, head) of each model's final-revision induction circuit."""
    o = _ordered(traj)
    last = o.group_by("model").agg(pl.col("rev_index").max().alias("_last"))
    return (o.join(last, on="model").filter(pl.col("rev_index") == pl.col("_last"))
            .filter(pl.col("sel_induction") >= induction_threshold)
            .select("model", "layer", "head").sort("model", "layer", "head"))


def f4_final_circuit(traj: pl.DataFrame, induction_threshold: float = 50.0) -> pl.DataFrame:
    """Each model's final-revision induction circuit (:func:`final_circuit`), one row per head with the
    final ``revision`` and ``tokens``, its ``sel_induction`` there and the ``induction_threshold`` it
    was held to (recorded): the heads F4's recall follows and F5's figure draws. A model whose final
    revision has no such head has no row."""
    o = _ordered(traj)
    last = o.group_by("model").agg(pl.col("rev_index").max().alias("_last"))
    out = (o.join(last, on="model").filter(pl.col("rev_index") == pl.col("_last"))
           .join(final_circuit(traj, induction_threshold), on=["model", "layer", "head"], how="semi")
           .select("model", "layer", "head", "revision", "tokens", "sel_induction")
           .with_columns(induction_threshold=pl.lit(float(induction_threshold)))
           .sort("model", "layer", "head"))
    return conform(out, "f4_final_circuit")


def f4_recall(traj: pl.DataFrame, induction_threshold: float = 50.0,
              found_threshold: float = 30.0) -> pl.DataFrame:
    """Per model x revision: recall of the final circuit (heads >= ``induction_threshold`` at the
    final revision), a head counting as found where its sel_induction >= ``found_threshold``.

    Default found_threshold = the class threshold (30x), which reproduces the published "67%"
    column exactly; with found_threshold = induction_threshold (strict circuit membership) the 67%
    points move later for OLMo and OLMoE. The published 33% and 100% columns follow from neither
    rule (see summary.md)."""
    fin = final_circuit(traj, induction_threshold).with_columns(_final=pl.lit(True))
    n_final = fin.group_by("model").agg(n_final_circuit=pl.len().cast(pl.Int32))
    j = traj.join(fin, on=["model", "layer", "head"], how="inner")
    out = j.group_by("model", "revision", "tokens").agg(
        n_found=(pl.col("sel_induction") >= found_threshold).fill_null(False).sum().cast(pl.Int32))
    # revisions of models with an empty final circuit still appear, with null recall
    allrevs = traj.select("model", "revision", "tokens").unique()
    out = allrevs.join(out, on=["model", "revision", "tokens"], how="left", nulls_equal=True)
    out = out.join(n_final, on="model", how="left").with_columns(
        pl.col("n_found").fill_null(0), pl.col("n_final_circuit").fill_null(0))
    out = out.with_columns(recall=pl.when(pl.col("n_final_circuit") > 0)
                           .then(pl.col("n_found") / pl.col("n_final_circuit")).otherwise(None))
    out = _ordered(out).sort("model", "rev_index").drop("rev_index")
    return conform(out, "f4_recall")


def f4_recall_milestones(recall: pl.DataFrame, levels: tuple[float, ...] = (1 / 3, 2 / 3, 1.0)) -> pl.DataFrame:
    """Per model x level: first revision whose recall >= level (1e-9 tolerance), its tokens, the
    final revision's tokens and the share of final tokens (tokens / final tokens). A model screened
    at one revision has none (revision, tokens and share null): its final circuit's recall at that
    revision is 100% by construction, not early convergence."""
    o = _ordered(recall).sort("model", "rev_index")
    rows = []
    for (model,), g in o.group_by("model", maintain_order=True):
        final_tokens = g["tokens"][-1]
        for lv in levels:
            hit = g.filter(pl.col("recall") >= lv - 1e-9).head(1 if g.height > 1 else 0)
            tok = hit["tokens"][0] if hit.height else None
            share = (tok / final_tokens) if (tok is not None and final_tokens) else None
            rows.append(dict(model=model, level=float(lv), level_label=f"{round(100 * lv)}%",
                             revision=hit["revision"][0] if hit.height else None, tokens=tok,
                             final_tokens=final_tokens, token_share=share))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f4_recall_milestones"]), "f4_recall_milestones")


def specialized_fraction(traj: pl.DataFrame, class_threshold: float = 30.0) -> pl.DataFrame:
    """Per model x revision: heads with a class (best selectivity >= class_threshold) / all heads."""
    return circuit_size(traj, class_threshold).select(
        "model", "revision", "tokens", "n_specialized", "n_heads", "specialized_fraction")


__all__ = [
    "assemble", "revision_order", "f1_bos_floor", "f1_floor_holds", "f2_bos_fraction", "f2_shape",
    "circuit_size", "milestone_specs", "f3_milestones", "milestone_row", "lapses", "f3_gaps", "f3_gap_table",
    "GAP_CASES", "gap_case", "final_circuit", "f4_final_circuit", "f4_recall", "f4_recall_milestones",
    "specialized_fraction",
    "with_rev_index",
]
