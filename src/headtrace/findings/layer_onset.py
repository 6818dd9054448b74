"""Finding 2b: how the first-token (BOS) sink spreads through the layers.

Paper B states that first-token attractors crystallize in the middle layers first and spread
outwards, the layers just above the L0/L1 floor last. This module turns that into two tables
computed from F1's per-layer counts (``trajectories.f1_bos_floor``):

* ``f2_layer_onset`` - per model x layer: the first revision with >= 1 first-token head
  (``first_*``) and the first revision where >= 50% of the layer's heads are first-token heads
  (``half_*``); null when never reached in the revisions screened.
* ``f2_layer_spread`` - per model x onset kind (``first``, ``half``): which layers lead, the
  Spearman rank correlations of a layer's onset with its distance from the middle layer
  (``rho_middle``) and with its depth (``rho_depth``), a permutation p-value and a label.

The rule (fixed by argument before it was run on any data; it has no tuned constant):

1. **Ranked layers** = every layer above the floor (``floor_layers``, default 0 and 1, F1's floor).
   The floor is F1's subject and has no onset on the published panel; including it would make any
   model look "top-down" or "middle-out" merely because of the floor.
2. **Middle** = the network's middle layer, (first + last layer of the model) / 2 (16 layers: 7.5),
   floor included: "middle-out" is a claim about the network, not about the ranked layers (whose
   midpoint, 8.5 for 16 layers, would bend "middle" upwards by the floor's width).
3. **Onset value** = the onset's revision index in training order (the ranking is the same as by
   tokens, and it also works for revisions with unknown tokens). A layer that **never** reaches the
   onset gets the index one past the last revision: it is later than every layer that did (it had
   all of training to get a sink and did not), and tied with the other never-reached layers (their
   order is unknown). Dropping them instead would discard exactly the layers the claim is about.
4. Spearman rho with average ranks for ties: ``rho_middle`` = rho(onset, |layer - middle|)
   (> 0: layers far from the middle come later, i.e. middle-out); ``rho_depth`` = rho(onset, layer)
   (> 0: bottom-up; < 0: top-down).
5. Three candidate orders with scores ``middle-out`` = rho_middle, ``bottom-up`` = rho_depth,
   ``top-down`` = -rho_depth. **Omnibus test** (``p_value``): the best score, against permutations of
   the onset values across the ranked layers (``n_permutations`` seeded draws; the same statistic,
   max of the three scores, on every draw, so picking the best of three is paid for: a max-T test).
   p = (1 + #draws with statistic >= observed) / (1 + n_permutations). What it rejects is only
   that onsets are **exchangeable across layers**; it does not say which order fits best.
6. **Pairwise comparisons** (``pairwise``, ``p_vs_runner_up``): the best order's score minus each
   alternative's, against the same draws' differences (paired on the same permutations);
   p = (1 + #draws with difference >= observed) / (1 + n_permutations). ``p_vs_runner_up`` is the
   largest of these (the weakest comparison).
7. **Holm correction** (``p_holm``) of the omnibus p within a **family stated before the run**
   (``families``, config ``findings.spread_families``: a name -> the models whose tests form one
   family; the published panel's three models x two onset kinds = six tests). A model no family
   names is a family of its own two tests. The family's size is fixed by that statement, not by what
   the run holds: a member whose test gives no p (not in the run, no sink, every onset tied, one
   checkpoint) counts as p = 1. So adding a model to a run never moves another model's p_holm
   (``holm_family``, ``holm_m`` say which family and how many tests).
8. Label = the best-scoring order (ties go to the order listed first above) only when
   ``p_holm <= alpha`` **and** it beats each alternative (every pairwise p <= alpha; an
   intersection-union test, no further correction needed); ``"onsets are not exchangeable across
   layers (p = ...)"`` when ``p_holm <= alpha`` but some alternative order fits about as well
   (``NOT_EXCHANGEABLE`` is the prefix); else ``"no clear order"``; ``"no sink"`` when no ranked
   layer reaches the onset; ``"no clear order"`` also when every ranked layer has the same onset
   (rho undefined); ``"one checkpoint"`` (``ONE_CHECKPOINT``) for a model screened at one revision.

**One checkpoint** (``single_checkpoint``): a model screened at a single revision has no onset (an
onset is the first revision *after* one without; with one revision there is none before it) and no
order to test. It gets no ``f2_layer_onset`` rows, one ``f2_layer_spread`` row per onset kind labelled
``"one checkpoint"`` with every statistic null, and it takes part in no test (a family that names it
counts its tests as untested, p = 1, as for any member without a p).

What it can and cannot decide: with 10 checkpoints many layers share an onset revision (ties), so
the test sees a coarse ranking; a named order says that order fits better than the other two by more
than exchangeable layers would produce, not that the spread is strictly monotone, and the pairwise
null is exchangeability too (it cannot reject "the other order, plus noise"). ``leading_layers`` /
``lead_ratio`` say by how much the first layers lead (next onset's tokens / leading onset's tokens;
null on a 0-token leading revision).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from headtrace.core.revisions import training_order_key
from headtrace.core.rounding import fmt_p
from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings.trajectory import ONE_CHECKPOINT, f1_bos_floor, with_rev_index

ORDERS = ("middle-out", "bottom-up", "top-down")
NO_ORDER, NO_SINK = "no clear order", "no sink"
NOT_EXCHANGEABLE = "onsets are not exchangeable across layers"
ONSETS = {"first": "n_first_token >= 1", "half": "n_first_token >= 50% of n_heads"}


def single_checkpoint_models(df: pl.DataFrame) -> list[str]:
    """The models of ``df`` (any table with model, revision) screened at exactly one revision, in
    order of appearance."""
    n = df.group_by("model", maintain_order=True).agg(pl.col("revision").n_unique().alias("_n"))
    return n.filter(pl.col("_n") == 1)["model"].to_list()


def f2_layer_onset(traj: pl.DataFrame, class_threshold: float = 30.0,
                   f1: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per model x layer: first revision with >= 1 first-token head and with >= 50% of the layer's
    heads first-token heads (``sel_first_token >= class_threshold``); null when never reached. A model
    screened at one revision has no onset and no rows (module docstring, "One checkpoint")."""
    f1 = f1_bos_floor(traj, class_threshold) if f1 is None else f1
    f1 = f1.filter(~pl.col("model").is_in(single_checkpoint_models(f1)))
    o = with_rev_index(f1)
    half = 2 * pl.col("n_first_token") >= pl.col("n_heads")

    def first_where(cond, prefix):
        hit = (o.filter(cond).sort("rev_index").group_by("model", "layer", maintain_order=True)
               .agg(pl.col("revision").first(), pl.col("tokens").first(), pl.col("rev_index").first()))
        return hit.rename({"revision": f"{prefix}_revision", "tokens": f"{prefix}_tokens",
                           "rev_index": f"_{prefix}_index"})

    layers = o.group_by("model", "layer").agg(pl.col("n_heads").max().cast(pl.Int32))
    out = (layers.join(first_where(pl.col("n_first_token") >= 1, "first"), on=["model", "layer"], how="left")
           .join(first_where(half & (pl.col("n_heads") > 0), "half"), on=["model", "layer"], how="left"))
    order = o["model"].unique(maintain_order=True).to_list()
    out = out.with_columns(_m=pl.col("model").replace_strict(order, list(range(len(order)))))
    return conform(out.sort("_m", "layer").drop("_m", "_first_index", "_half_index"), "f2_layer_onset")


def spread_order(layers, onset, *, alpha: float = 0.05, n_permutations: int = 10000,
                 seed: int = 0, middle: float | None = None) -> dict:
    """Steps 3-6 of the module docstring on one model's ranked layers (the label here uses the
    uncorrected p; :func:`f2_layer_spread` applies Holm over the run and relabels).

    ``layers``: layer indices above the floor; ``onset``: their onset values (revision index, with
    never-reached layers already set past the last revision; ``None``/nan means never reached and
    is set here to max + 1); ``middle``: the network's middle layer (default: the midpoint of
    ``layers``). Returns middle, rho_middle, rho_depth, p_value, best_order, runner_up,
    p_vs_runner_up, pairwise, label."""
    layers = np.asarray(layers, float)
    raw = np.array([np.nan if v is None else float(v) for v in onset])
    n_reached = int(np.isfinite(raw).sum())
    if middle is None:
        middle = float(layers.min() + layers.max()) / 2 if layers.size else float("nan")
    empty = dict(middle=middle, rho_middle=None, rho_depth=None, p_value=None, best_order=None,
                 runner_up=None, p_vs_runner_up=None, pairwise="")
    if n_reached == 0:
        return {**empty, "label": NO_SINK}
    never = (np.nanmax(raw) + 1) if n_reached else 0.0
    vals = np.where(np.isfinite(raw), raw, never)
    r = _avg_ranks(vals)
    dist = _avg_ranks(np.abs(layers - middle))
    depth = _avg_ranks(layers)
    rho_mid = float(_pearson_rows(r[None], dist)[0])
    rho_dep = float(_pearson_rows(r[None], depth)[0])
    if math.isnan(rho_mid) or math.isnan(rho_dep):  # every ranked layer has the same onset
        return {**empty, "label": NO_ORDER}
    scores = np.array([rho_mid, rho_dep, -rho_dep])
    best = int(np.argmax(scores))
    stat = scores[best]
    rng = np.random.default_rng(seed)
    perm = rng.permuted(np.broadcast_to(r, (n_permutations, r.size)).copy(), axis=1)
    pm, pd_ = _pearson_rows(perm, dist), _pearson_rows(perm, depth)
    pm, pd_ = np.nan_to_num(pm), np.nan_to_num(pd_)
    null_scores = np.stack([pm, pd_, -pd_])  # (3, P), same draws for every order
    null = null_scores.max(0)
    p = float((1 + np.sum(null >= stat - 1e-12)) / (1 + n_permutations))
    pair, parts = {}, []
    for a in range(3):
        if a == best:
            continue
        d_obs = scores[best] - scores[a]
        d_null = null_scores[best] - null_scores[a]
        pa = float((1 + np.sum(d_null >= d_obs - 1e-12)) / (1 + n_permutations))
        pair[ORDERS[a]] = pa
        parts.append(f"vs {ORDERS[a]}: {d_obs:+.2f} (p = {fmt_p(pa)})")
    runner = max((a for a in range(3) if a != best), key=lambda a: scores[a])
    p_pair = max(pair.values())
    label = _label(ORDERS[best], p, p_pair, alpha)
    return dict(middle=middle, rho_middle=rho_mid, rho_depth=rho_dep, p_value=p, best_order=ORDERS[best],
                runner_up=ORDERS[runner], p_vs_runner_up=p_pair, pairwise="; ".join(parts), label=label)


def holm(pvalues: list[float | None], m: int | None = None) -> list[float | None]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1); None stays None. ``m``: the family's
    size as stated before the run (default: the p-values given); the tests it counts beyond them are
    taken as p = 1 (untested), which is Holm over the whole stated family."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    if m is None:
        m = len(idx)
    if m < len(idx):
        raise ValueError(f"holm: a family of {m} tests cannot hold {len(idx)} p-values")
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for k, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - k) * pvalues[i]))
        out[i] = running
    return out


def f2_layer_spread(onset: pl.DataFrame, floor_layers: tuple[int, ...] = (0, 1), *, alpha: float = 0.05,
                    n_permutations: int = 10000, seed: int = 0,
                    families: Mapping[str, Sequence[str]] | None = None,
                    single_checkpoint: Sequence[str] = ()) -> pl.DataFrame:
    """Per model x onset kind (``first``, ``half``): the spread summary of the module docstring,
    from an ``f2_layer_onset`` table. Holm (step 7) runs within each family of ``families`` (name ->
    models, stated before the run) over its stated size; a model no family names is a family of its own
    two tests. ``single_checkpoint``: models screened at one revision (no onset rows): a row per onset
    kind labelled ``ONE_CHECKPOINT``, every statistic null. Revision indices come from the onset
    table's own revisions; a model's revisions are those of its rows."""
    family_of = _family_of(families or {})
    rows = []
    for (model,), g in onset.group_by("model", maintain_order=True):
        network_middle = float(g["layer"].min() + g["layer"].max()) / 2
        g = g.filter(~pl.col("layer").is_in(list(floor_layers))).sort("layer")
        for kind in ONSETS:
            revs, toks = g[f"{kind}_revision"].to_list(), g[f"{kind}_tokens"].to_list()
            # onset values: rank of the onset revision among the model's onset revisions, by tokens then name
            idx = _revision_index(revs, toks)
            layers = g["layer"].to_list()
            res = spread_order(layers, idx, alpha=alpha, n_permutations=n_permutations, seed=seed,
                               middle=network_middle)
            reached = [(i, l, t) for i, l, t in zip(idx, layers, toks) if i is not None]
            never = [l for l, i in zip(layers, idx) if i is None]
            lead = next_t = ratio = None
            leading, last = [], []
            if reached:
                first = min(i for i, _, _ in reached)
                leading = [l for i, l, _ in reached if i == first]
                lead = next(t for i, _, t in reached if i == first)
                later = [(i, t) for i, _, t in reached if i > first]
                next_t = min(later)[1] if later else None
                ratio = next_t / lead if (lead and next_t is not None) else None
                latest = max(i for i, _, _ in reached)
                last = never if never else [l for i, l, _ in reached if i == latest]
            rows.append(dict(model=model, onset=kind, n_layers_ranked=len(layers), floor_layers=_names(floor_layers),
                             middle_layer=res["middle"], n_never=len(never), leading_layers=_names(leading),
                             lead_tokens=lead, next_tokens=next_t, lead_ratio=ratio, last_layers=_names(last),
                             never_layers=_names(never), rho_middle=res["rho_middle"], rho_depth=res["rho_depth"],
                             p_value=res["p_value"], label=res["label"], best_order=res["best_order"],
                             runner_up=res["runner_up"], p_vs_runner_up=res["p_vs_runner_up"],
                             pairwise=res["pairwise"]))
    done = {r["model"] for r in rows}
    for model in single_checkpoint:
        if model in done:
            continue
        for kind in ONSETS:
            rows.append(dict(model=model, onset=kind, n_layers_ranked=0, floor_layers=_names(floor_layers),
                             middle_layer=None, n_never=0, leading_layers="", lead_tokens=None, next_tokens=None,
                             lead_ratio=None, last_layers="", never_layers="", rho_middle=None, rho_depth=None,
                             p_value=None, label=ONE_CHECKPOINT, best_order=None, runner_up=None,
                             p_vs_runner_up=None, pairwise=""))
    # Holm within each family stated before the run, over its stated size; then the labels from the
    # corrected p
    for key, m in _families_in(rows, family_of, families or {}).items():
        members = [r for r in rows if (family_of.get(r["model"]) or ("", r["model"])) == key]
        for r, ph in zip(members, holm([r["p_value"] for r in members], m)):
            r["p_holm"], r["holm_family"], r["holm_m"] = ph, key[1], m
            if r["label"] not in (NO_SINK, ONE_CHECKPOINT) and r["p_value"] is not None:
                r["label"] = _label(r["best_order"], ph, r["p_vs_runner_up"], alpha)
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f2_layer_spread"]), "f2_layer_spread")


def _avg_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, ties get their average rank."""
    order = np.argsort(x, kind="stable")
    xs = np.take_along_axis(x, order, -1)
    ranks = np.empty_like(x, dtype=float)
    n = x.shape[-1]
    pos = np.arange(1, n + 1, dtype=float)
    # average rank per run of equal values
    out = np.empty(n)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and xs[j + 1] == xs[i]:
            j += 1
        out[i:j + 1] = pos[i:j + 1].mean()
        i = j + 1
    np.put_along_axis(ranks, order, out, -1)
    return ranks


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r of each row of ``a`` (P, n) with the vector ``b`` (n,); nan where a row is constant."""
    a = a - a.mean(-1, keepdims=True)
    b = b - b.mean()
    den = np.sqrt((a * a).sum(-1) * (b * b).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(-1) / np.where(den > 0, den, 1.0), np.nan)


def _label(best: str | None, p: float | None, p_pair: float | None, alpha: float) -> str:
    """Step 8: the order's name only when the (corrected) omnibus p and every pairwise p pass."""
    if best is None or p is None or p > alpha:
        return NO_ORDER
    if p_pair is not None and p_pair <= alpha:
        return best
    return f"{NOT_EXCHANGEABLE} (p = {fmt_p(p)})"


def _names(layers) -> str:
    return ",".join(f"L{l}" for l in layers)


def _family_of(families: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, str]]:
    """model -> ("family", name) for every model a stated family names; a model in two is an error."""
    out: dict[str, tuple[str, str]] = {}
    for name, members in families.items():
        for m in members:
            if m in out:
                raise ValueError(f"spread families: '{m}' is in '{out[m][1]}' and '{name}'; one family at most")
            out[m] = ("family", name)
    return out


def _families_in(rows: list[dict], family_of: Mapping[str, tuple[str, str]],
                 families: Mapping[str, Sequence[str]]) -> dict[tuple[str, str], int]:
    """Every Holm family the rows belong to -> its stated size (tests per model x models named; a model
    no family names: its own onset kinds)."""
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        key = family_of.get(r["model"]) or ("", r["model"])
        out[key] = len(ONSETS) * (len(families[key[1]]) if key[0] else 1)
    return out


def _revision_index(revs: list, toks: list) -> list[int | None]:
    """Dense rank (0-based) of each onset revision in training order (``training_order_key``);
    None stays None."""
    seen = sorted({(training_order_key(r, t), r) for r, t in zip(revs, toks) if r is not None})
    pos = {name: i for i, (_, name) in enumerate(seen)}
    return [None if r is None else pos[r] for r in revs]
