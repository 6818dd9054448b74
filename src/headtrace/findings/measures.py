"""The field's own measures over training, and how they compare with the paper's (docs/measures.md).

Inputs: the per-cell ``measures`` tables (``headtrace.cell.patterns``) and the ``trajectory`` tables
(the synthetic screen). Three tables:

* ``measures_over_training``: per model x revision x sink threshold eps, the sink rate on the text probe
  (Gu et al.'s, the F2 analogue on text, as their released code computes it: each sequence's alpha
  thresholded, then averaged over sequences, layers and heads; beside it, named for what it is, the rate of
  the heads' alpha averaged over the sequences first) and on the repeated-random probe, the number of heads whose
  prefix-matching score is above ``prefix_threshold``, and beside them the paper's synthetic first-token
  fraction and induction-circuit size, and the Jaccard index of the induction circuit and the top
  prefix-matching heads (as many as the circuit has; null when the circuit is empty) beside its
  within-layer permutation null (``headtrace.findings.agreement``); and what the text probe was
  (:func:`text_probe_columns`): its sequences, their length, the documents they came from and how the
  windows were taken and what key 0 is, the tokenizer's BOS or the text's first token with the commonest
  of them (``text_probes``: the models' ``text_probe`` tables), and whether the model was
  trained only on a synthetic token stream (``synthetic``: the toy panel, models that never saw text).
* ``measures_onsets``: F3-style milestones with their checkpoint brackets (schema ``f3_milestones``):
  ``text_sink_{p}pct`` (text sink rate at the first eps >= p, p as F3's first-token fractions) and
  ``prefix_{k}_heads`` (prefix-matching heads >= k, k as F3's induction counts).
* ``measures_comparison``: per model, numbers with their uncertainty, not verdicts of agreement: the
  Spearman rank correlation over revisions of the synthetic first-token fraction and the text sink rate
  (a percentile bootstrap interval over revisions and a permutation p-value), the token gap between the
  onsets of ``first_token_{p}pct`` and ``text_sink_{p}pct`` bounded by both brackets (``f3_gaps``), and the
  final revision's Jaccard index.
* ``measures_circuit_copying`` (:func:`circuit_copying`): Olsson et al.'s induction head needs prefix
  matching *and* copying; per model, revision with an induction circuit and circuit head, the head's
  prefix-matching score (repeated-random probe) and both readings of its OV eigenvalues (the
  positive-eigenvalue share, which decides, and Elhage et al.'s ratio), whether it passes each and both,
  and, for scale, how many of all the cell's heads pass each.
"""
from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import polars as pl

from headtrace.cell import measures as formulas
from headtrace.core import milestones
from headtrace.core.tables import SCHEMAS, conform
from headtrace.findings import agreement
from headtrace.findings import trajectory as tr

N_BOOT = 2000
BOOT_SEED = 0
N_PERM = 10000
EXACT_PERM_MAX = 8  # revisions up to this: every permutation (8! = 40320)
INTERVAL = 0.9


def over_training(measures: pl.DataFrame, traj: pl.DataFrame, *, sink_eps=(formulas.SINK_EPS,),
                  prefix_threshold: float = 0.4, class_threshold: float = 30.0,
                  induction_threshold: float = 50.0, text_probes: pl.DataFrame | None = None,
                  synthetic=None) -> pl.DataFrame:
    """``measures_over_training`` (see the module docstring)."""
    rows = []
    bos = {(r["model"], r["revision"]): r for r in tr.f2_bos_fraction(traj, class_threshold).iter_rows(named=True)} \
        if traj.height else {}
    for (model, revision), g in measures.group_by("model", "revision", maintain_order=True):
        tokens = g["tokens"][0]
        text, rep = g.filter(pl.col("probe") == "text"), g.filter(pl.col("probe") == "repeated")
        t = traj.filter((pl.col("model") == model) & (pl.col("revision") == revision)) if traj.height else traj
        circuit = {(r["layer"], r["head"]) for r in t.filter(pl.col("sel_induction") >= induction_threshold)
                   .iter_rows(named=True)} if t.height else set()
        jac, n_top, null = _jaccard_top(circuit, rep)
        b = bos.get((model, revision))
        n_prefix = int((rep["prefix_matching"] > prefix_threshold).sum()) if rep.height else None
        text_seq, rep_seq = _alpha_per_sequence(text), _alpha_per_sequence(rep)
        for eps in sink_eps:
            rows.append(dict(
                model=model, revision=revision, tokens=tokens, eps=float(eps),
                text_sink_rate=formulas.sink_rate_per_sequence(text_seq, eps) if text.height else None,
                text_sink_rate_of_mean_alpha=formulas.sink_rate(text["sink_alpha"].to_numpy(), eps)
                if text.height else None,
                repeated_sink_rate=formulas.sink_rate_per_sequence(rep_seq, eps) if rep.height else None,
                repeated_sink_rate_of_mean_alpha=formulas.sink_rate(rep["sink_alpha"].to_numpy(), eps)
                if rep.height else None,
                n_prefix_heads=n_prefix, n_heads=int(max(text.height, rep.height)),
                first_token_fraction=None if b is None else b["bos_fraction"],
                n_induction_circuit=len(circuit) if t.height else None,
                n_top_prefix=n_top, jaccard_circuit_prefix=jac, jaccard_chance=null.get("null_mean"),
                jaccard_p_value=null.get("p_value")))
    out = text_probe_columns(pl.DataFrame(rows, schema={c: t for c, t in SCHEMAS["measures_over_training"].items()
                                                        if c not in TEXT_PROBE_COLUMNS}),
                             measures, text_probes, synthetic)
    order = {float(e): i for i, e in reversed(list(enumerate(sink_eps)))}  # the first eps first: the headline's
    out = out.with_columns(eps_order=pl.col("eps").replace_strict(order, return_dtype=pl.Int32))
    return conform(tr.with_rev_index(out).sort("model", "rev_index", "eps_order").drop("rev_index", "eps_order"),
                   "measures_over_training")


TEXT_PROBE_COLUMNS = ("text_n_sequences", "text_seq_len", "text_n_documents", "text_windows", "text_key0_bos",
                      "text_key0_tokens", "text_key0_counts", "synthetic_training")
KEY0_TOP = 3  # the commonest key-0 tokens kept per model


def text_probe_columns(over: pl.DataFrame, measures: pl.DataFrame, text_probes: pl.DataFrame | None = None,
                       synthetic=None) -> pl.DataFrame:
    """``over`` with what its model's text probe was (:data:`TEXT_PROBE_COLUMNS`): ``text_n_sequences`` and
    ``text_seq_len`` from the cell's text rows of ``measures``; ``text_n_documents``, ``text_windows`` and
    what key 0 is (:func:`key0`) from the model's rows of ``text_probes`` (null without them);
    ``synthetic_training`` true for a model of ``synthetic`` (trained only on a synthetic token stream),
    false for the others, null when ``synthetic`` is None (not known)."""
    shape = {"model": pl.String, "revision": pl.String, "text_n_sequences": pl.Int32, "text_seq_len": pl.Int32}
    text = measures.filter(pl.col("probe") == "text") if measures.height else measures
    cells = (text.group_by("model", "revision").agg(pl.col("n_sequences").first().alias("text_n_sequences"),
                                                    pl.col("seq_len").first().alias("text_seq_len"))
             if text.height else pl.DataFrame(schema=shape)).cast(shape)
    kinds = {"model": pl.String, "text_n_documents": pl.Int32, "text_windows": pl.String}
    probes = (text_probes.group_by("model").agg(pl.col("n_documents").first().alias("text_n_documents"),
                                                pl.col("windows").first().alias("text_windows"))
              if text_probes is not None and text_probes.height else pl.DataFrame(schema=kinds)).cast(kinds)
    flag = pl.lit(None, pl.Boolean) if synthetic is None else pl.col("model").is_in(list(synthetic))
    return (over.join(cells, on=["model", "revision"], how="left").join(probes, on="model", how="left")
            .join(key0(text_probes), on="model", how="left").with_columns(synthetic_training=flag))


def key0(text_probes: pl.DataFrame | None, top: int = KEY0_TOP) -> pl.DataFrame:
    """Per model, what key 0 of its text probe is (the key whose attention the sink rate measures):
    ``text_key0_bos``, true when the tokenizer puts a BOS before every sequence (``n_prefix`` > 0), false
    when key 0 is the text's own first token (a content token); ``text_key0_tokens`` and
    ``text_key0_counts``, the ``top`` commonest first tokens (``key0``, as text) and how many sequences open
    with each, most first, ties by text. Null for a probe table written before these columns.

    ``[{model: m, n_prefix: 0, key0: "And"} x 3, {.., key0: "But"}]`` -> ``m, False, ["And", "But"], [3, 1]``."""
    kinds = {"model": pl.String, "text_key0_bos": pl.Boolean, "text_key0_tokens": pl.List(pl.String),
             "text_key0_counts": pl.List(pl.Int64)}
    if text_probes is None or not text_probes.height or not {"n_prefix", "key0"} <= set(text_probes.columns):
        return pl.DataFrame(schema=kinds)
    rows = []
    for (model,), g in text_probes.drop_nulls(["n_prefix", "key0"]).group_by("model", maintain_order=True):
        counts = sorted(Counter(g["key0"].to_list()).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        rows.append(dict(model=model, text_key0_bos=bool((g["n_prefix"] > 0).all()),
                         text_key0_tokens=[t for t, _ in counts], text_key0_counts=[c for _, c in counts]))
    return pl.DataFrame(rows, schema=kinds)


def _alpha_per_sequence(probe_rows: pl.DataFrame) -> np.ndarray:
    """(n_sequences, n_heads) alpha of one cell's probe: every head's ``sink_alpha_per_sequence``."""
    if not probe_rows.height:
        return np.zeros((0, 0))
    lists = probe_rows["sink_alpha_per_sequence"].to_list()
    if any(v is None for v in lists) or len({len(v) for v in lists}) != 1:
        raise ValueError("measures: every head of a cell's probe needs the same sequences' alpha "
                         "(sink_alpha_per_sequence); rerun the cell's capture job")
    return np.asarray(lists, dtype=np.float64).T


def _jaccard_top(circuit: set, rep: pl.DataFrame) -> tuple[float | None, int | None, dict]:
    """Jaccard of the circuit and the ``len(circuit)`` heads of highest prefix-matching score (ties at the
    cut broken by layer, then head), its size, and the within-layer permutation null of the two sets
    (``agreement.jaccard_null``); None and {} for an empty circuit or no repeated-random probe."""
    if not circuit or not rep.height:
        return None, None, {}
    ranked = rep.drop_nulls("prefix_matching").sort(["prefix_matching", "layer", "head"],
                                                     descending=[True, False, False])
    top = {(r["layer"], r["head"]) for r in ranked.head(len(circuit)).iter_rows(named=True)}
    n_heads = {int(k): int(v) for k, v in Counter(rep["layer"].to_list()).items()}
    return len(circuit & top) / len(circuit | top), len(top), agreement.jaccard_null(circuit, top, n_heads)


def onsets(over: pl.DataFrame, *, induction_counts=tr.INDUCTION_COUNTS,
           fractions=tr.FIRST_TOKEN_FRACTIONS) -> pl.DataFrame:
    """``measures_onsets``: the first revision reaching each milestone, its bracket and the revisions
    where it lapses (as ``trajectory.f3_milestones``); the sink milestones read the first eps of ``over``."""
    rows = []
    if not over.height:
        return conform(pl.DataFrame(schema=SCHEMAS["f3_milestones"]), "f3_milestones")
    eps0 = over["eps"][0]
    o = tr.with_rev_index(over.filter(pl.col("eps") == eps0)).sort("model", "rev_index")
    marks = ([milestones.parse(milestones.name_of("text_sink", p)) for p in fractions]
             + [milestones.parse(milestones.name_of("prefix", k)) for k in induction_counts])
    specs = [(m.name, m.column, m.minimum) for m in marks]
    for (model,), g in o.group_by("model", maintain_order=True):
        revs, toks = g["revision"].to_list(), g["tokens"].to_list()
        for name, col, thr in specs:
            if g[col].null_count() == g.height:
                continue  # no such probe for this model (e.g. no text file)
            held = {j for j, v in enumerate(g[col].to_list()) if v is not None and v >= thr}
            i = min(held) if held else None
            rows.append(tr.milestone_row(model, name, revs, toks, i, tr.lapses(i, held, revs)))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["f3_milestones"]), "f3_milestones")


def spearman(x, y) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is constant or n < 3."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = _ranks(x), _ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size, dtype=float)
    for v in np.unique(x):  # ties: average rank
        m = x == v
        ranks[m] = ranks[m].mean()
    return ranks


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of ``x``, ``y`` (B, n), average ranks for ties; NaN for a row with
    a constant side."""
    def ranks(a):
        return (a[:, None, :] < a[:, :, None]).sum(-1) + ((a[:, None, :] == a[:, :, None]).sum(-1) - 1) / 2
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(1, keepdims=True), ry - ry.mean(1, keepdims=True)
    denom = np.sqrt((rx ** 2).sum(1) * (ry ** 2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx * ry).sum(1) / denom, np.nan)


def rank_correlation(x, y, *, n_boot: int = N_BOOT, seed: int = BOOT_SEED, interval: float = INTERVAL,
                     n_perm: int = N_PERM) -> dict:
    """Spearman's rho of paired values over revisions, with (1) a percentile bootstrap interval resampling
    the revision pairs with replacement (``n_boot`` draws, seeded; resamples with a constant side are
    dropped and counted) and (2) a two-sided permutation p-value of rho = 0 (every permutation up to
    ``EXACT_PERM_MAX`` revisions, else ``n_perm`` seeded ones). Both treat the revisions as exchangeable,
    which checkpoints of one run are not: they say how much rho rests on which checkpoints were taken."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = int(x.size)
    rho = spearman(x, y)
    out = {"value": rho, "lo": None, "hi": None, "p_value": None, "n": n, "n_valid_resamples": 0}
    if rho is None:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, (n_boot, n))  # every resample drawn at once, seeded
    boots = _spearman_rows(x[idx], y[idx])
    boots = boots[np.isfinite(boots)]  # a resample with a constant side has no rho
    if boots.size:
        q = (1 - interval) / 2
        out.update(lo=float(np.quantile(boots, q)), hi=float(np.quantile(boots, 1 - q)), n_valid_resamples=int(boots.size))
    if n <= EXACT_PERM_MAX:
        perms = np.array(list(itertools.permutations(range(n))))  # every permutation (identity included)
    else:
        perms = np.stack([rng.permutation(n) for _ in range(n_perm)])
    rx, ry = _ranks(x), _ranks(y)
    a = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    b = ry[perms] - ry.mean()  # (n_perms, n): the permuted ranks (a permutation keeps their mean and norm)
    null = b @ a / np.linalg.norm(ry - ry.mean())  # Spearman's rho of every permutation
    hits = int((np.abs(null) >= abs(rho) - 1e-12).sum())
    out["p_value"] = hits / len(perms) if n <= EXACT_PERM_MAX else (hits + 1) / (len(perms) + 1)
    return out


def comparison(over: pl.DataFrame, measure_onsets: pl.DataFrame, f3: pl.DataFrame, *,
               fractions=tr.FIRST_TOKEN_FRACTIONS, interval: float = INTERVAL) -> pl.DataFrame:
    """``measures_comparison``: per model, the rank correlation, the onset gaps and the final Jaccard."""
    rows = []
    if not over.height:
        return conform(pl.DataFrame(schema=SCHEMAS["measures_comparison"]), "measures_comparison")
    eps0 = over["eps"][0]
    o = tr.with_rev_index(over.filter(pl.col("eps") == eps0)).sort("model", "rev_index")
    both = pl.concat([f3.select(SCHEMAS["f3_milestones"].keys()), measure_onsets], how="vertical_relaxed") \
        if f3.height else measure_onsets
    for (model,), g in o.group_by("model", maintain_order=True):
        pair = g.drop_nulls(["first_token_fraction", "text_sink_rate"])
        if pair.height:
            rc = rank_correlation(pair["first_token_fraction"].to_numpy(), pair["text_sink_rate"].to_numpy(),
                                  interval=interval)
            rows.append(dict(model=model, measure="spearman_first_token_fraction_text_sink_rate", value=rc["value"],
                             lo=rc["lo"], hi=rc["hi"], p_value=rc["p_value"], n=rc["n"],
                             uncertainty=f"{round(100 * interval)}% percentile bootstrap over revisions "
                                         f"({rc['n_valid_resamples']} of {N_BOOT} resamples), permutation p "
                                         f"({'exact' if rc['n'] <= EXACT_PERM_MAX else f'{N_PERM} draws'})"))
        for p in fractions:
            later, earlier = milestones.name_of("text_sink", p), milestones.name_of("first_token", p)
            m = both.filter(pl.col("model") == model)
            if not {later, earlier} <= set(m["milestone"].to_list()):
                continue
            gap = tr.f3_gaps(m, later=later, earlier=earlier).row(0, named=True)
            rows.append(dict(model=model, measure=f"onset_gap_{later}_over_{earlier}", value=gap["gap_ratio"],
                             lo=gap["gap_lo"], hi=gap["gap_hi"], p_value=None, n=g.height,
                             uncertainty=f"checkpoint brackets of both onsets: {gap['gap_bound']}"))
        last = g.tail(1).row(0, named=True)
        if last["jaccard_circuit_prefix"] is not None:
            chance = last["jaccard_chance"]
            rows.append(dict(model=model, measure="jaccard_circuit_top_prefix_final", value=last["jaccard_circuit_prefix"],
                             lo=None, hi=None, p_value=last["jaccard_p_value"], n=last["n_induction_circuit"],
                             uncertainty=f"one revision ({last['revision']}), "
                                         f"{last['n_induction_circuit']} circuit heads vs the top {last['n_top_prefix']}; "
                                         f"p: P(Jaccard >= this) placing both sets at random within their layers "
                                         f"(chance {chance:.2f}: "
                                         f"{'beyond chance' if last['jaccard_p_value'] <= agreement.ALPHA else 'no more than chance'})"
                                         if chance is not None else "none"))
    return conform(pl.DataFrame(rows, schema=SCHEMAS["measures_comparison"]), "measures_comparison")


def circuit_copying(measures: pl.DataFrame, traj: pl.DataFrame, *, prefix_threshold: float = 0.4,
                    copying_threshold: float = formulas.COPYING_THRESHOLD,
                    induction_threshold: float = 50.0) -> pl.DataFrame:
    """``measures_circuit_copying`` (module docstring): one row per induction-circuit head (the trajectory's
    ``in_induction_circuit``, else induction selectivity >= ``induction_threshold``) of every revision
    that has both a circuit and a measures table. A head prefix-matches at a score > ``prefix_threshold``
    and copies at a positive-eigenvalue share > ``copying_threshold`` (:func:`formulas.copies`); a head
    with no score passes neither. ``copying_eigenvalue_ratio`` is null for cells written before it was
    stored."""
    schema = SCHEMAS["measures_circuit_copying"]
    if not measures.height or not traj.height:
        return conform(pl.DataFrame(schema=schema), "measures_circuit_copying")
    if "copying_eigenvalue_ratio" not in measures.columns:
        measures = measures.with_columns(copying_eigenvalue_ratio=pl.lit(None, pl.Float64))
    in_circuit = (pl.col("in_induction_circuit") if "in_induction_circuit" in traj.columns
                  else pl.col("sel_induction") >= induction_threshold)
    circuit = traj.filter(in_circuit.fill_null(False)).select("model", "revision", "layer", "head", "sel_induction")
    rows = []
    for (model, revision), g in measures.group_by("model", "revision", maintain_order=True):
        c = circuit.filter((pl.col("model") == model) & (pl.col("revision") == revision))
        if not c.height:
            continue
        sel = {(r["layer"], r["head"]): r["sel_induction"] for r in c.iter_rows(named=True)}
        cell = list(head_decisions(g, prefix_threshold=prefix_threshold,
                                   copying_threshold=copying_threshold).iter_rows(named=True))
        members = sorted((r for r in cell if (r["layer"], r["head"]) in sel), key=lambda r: (r["layer"], r["head"]))
        n_both = sum(r["prefix_matches"] and r["copies"] for r in members)
        for r in members:
            rows.append(dict(model=model, revision=revision, tokens=r["tokens"], layer=r["layer"], head=r["head"],
                             sel_induction=sel[(r["layer"], r["head"])], prefix_matching=r["prefix_matching"],
                             copying=r["copying"], copying_eigenvalue_ratio=r["copying_eigenvalue_ratio"],
                             prefix_matches=r["prefix_matches"], copies=r["copies"],
                             both=r["prefix_matches"] and r["copies"], n_circuit=len(members), n_both=n_both,
                             n_heads=len(cell), n_heads_prefix=sum(r["prefix_matches"] for r in cell),
                             n_heads_copying=sum(r["copies"] for r in cell),
                             prefix_threshold=float(prefix_threshold), copying_threshold=float(copying_threshold)))
    out = pl.DataFrame(rows, schema=schema)
    return conform(tr.with_rev_index(out).sort("model", "rev_index", "layer", "head").drop("rev_index"),
                   "measures_circuit_copying")


def head_decisions(cell: pl.DataFrame, *, prefix_threshold: float = 0.4,
                   copying_threshold: float = formulas.COPYING_THRESHOLD) -> pl.DataFrame:
    """One cell's heads from its ``measures`` rows, with Olsson et al.'s two properties decided:
    ``prefix_matches`` (prefix-matching score > ``prefix_threshold``) and ``copies`` (positive-eigenvalue
    share > ``copying_threshold``, :func:`formulas.copies`), a head with no score passing neither, and the
    two thresholds as columns. The heads are the repeated probe's rows (copying comes from the weights, the
    same on every probe's row; the repeated probe's rows carry the prefix-matching score too), else one row
    per head with no prefix-matching score. :func:`circuit_copying` and the console's circuit line
    (``report.copying.circuit_text``) read these."""
    rep = cell.filter(pl.col("probe") == "repeated")
    heads = (rep if rep.height else cell.unique(["layer", "head"], keep="first", maintain_order=True)
             .with_columns(prefix_matching=pl.lit(None, pl.Float64)))
    prefix = heads["prefix_matching"].cast(pl.Float64).fill_null(float("nan")).to_numpy() > prefix_threshold
    copy = formulas.copies(heads["copying"].cast(pl.Float64).fill_null(float("nan")).to_numpy(), copying_threshold)
    return heads.with_columns(prefix_matches=pl.Series(prefix, dtype=pl.Boolean),
                              copies=pl.Series(copy, dtype=pl.Boolean),
                              prefix_threshold=pl.lit(float(prefix_threshold)),
                              copying_threshold=pl.lit(float(copying_threshold)))
