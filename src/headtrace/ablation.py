"""Causal group ablation (PAPERS.md, paper A step 3): zero heads, measure induction at the query.

**Ablation.** A head is ablated by zeroing its slice of the *input* to the attention output
projection (``Family.out_proj``), i.e. its output before it is mixed into the residual stream.
The output projection's bias (if any) stays. The measurement is the induction task at the query
(the last position, target B): ``top1`` (B is the arg-max logit), ``top5`` (B among the 5 largest
logits), ``ce`` (mean cross-entropy of B, nats) and ``logit_b`` (mean logit of B), each averaged
over *all* sequences of the probe batch (valid or not), logits in fp32.

**Conditions** (``build_conditions``; one ``Condition`` each, draws numbered 1..K, non-random 0):

- ``baseline``: nothing ablated.
- ``circuit``: the cell's induction circuit, heads with ``sel_induction >= induction_threshold`` (50).
- ``matched_random`` x K: per draw and per circuit layer, ``min(k_l, n_free_l)`` heads drawn without
  replacement from that layer's non-circuit heads (``k_l`` circuit heads in layer l, ``n_free_l``
  non-circuit heads there: the draw is *capped* when a layer has too few).
- ``upper_bound``: every head of the circuit's layers.
- ``final_circuit``: the final revision's induction circuit (omitted when ``final_circuit=None``).
- ``previous_token_circuit``: heads whose ``best_class`` is previous-token with
  ``best_selectivity >= previous_token_threshold`` (100); ``previous_token_matched_random`` x K are
  drawn from the non-previous-token-circuit heads of its layers, and ``previous_token_upper_bound``
  is every head of its layers (one extra pass, so the verdict has an upper bound for it too).
- with ``final_controls=True`` (off by default, +K+1 passes): ``final_matched_random`` x K and
  ``final_upper_bound`` matched to the final circuit.

Every draw uses its own ``numpy.random.default_rng([seed, crc32(condition name)])``, so a control's
draws are reproducible from ``seed`` and independent of the other conditions and of K's order.

**Empty circuits** (early revisions) never crash and never disappear: the circuit, its upper bound
and a single random row (``draw`` 0) are still emitted with ``n_heads`` 0 and are *evaluated*;
ablating nothing is the baseline, so they carry the baseline's numbers (the engine copies the
baseline pass instead of recomputing it).

**Verdict** (``verdict``; one row per circuit: ``circuit``, ``final_circuit``,
``previous_token_circuit``, each against its own controls; ``final_circuit`` uses
``final_matched_random``/``final_upper_bound`` when present, otherwise the cell circuit's
``matched_random``/``upper_bound``):

- ``effect = baseline_top1 - ablated_top1``; ``random_effect_mean`` = mean over the K draws of
  ``baseline_top1 - draw_top1``; ``effect_vs_random = effect / random_effect_mean`` with IEEE
  division (``inf`` when the random mean is 0 and the effect positive, ``NaN`` when both are 0,
  negative when random draws *help*; ``NaN`` without draws).
- ``p_value = (1 + #{distinct draws with effect >= circuit effect}) / (1 + K_distinct)`` (the
  empirical permutation p-value, counting the circuit itself, over the *distinct* head sets among
  the K draws — repeated draws, forced when a layer has few free heads, are one comparison; with
  20 distinct draws its minimum is 1/21 ~ 0.048, so a circuit whose layers leave fewer than 19
  distinct matched sets cannot be called causal: ``n_distinct_draws`` says so). ``NaN`` when the
  circuit is empty or there are no draws (the placeholder ``draw`` 0 row is not a draw).
- ``upper_bound_saturates``: ``baseline_top1 > 0`` and ``upper_bound_top1 <= 0.1 * baseline_top1``
  (``saturation_fraction``).
- **Causal rule** (``causal``): the circuit is non-empty AND ``effect > 0`` AND
  ``ablated_top1 <= 0.5 * baseline_top1`` (``max_ablated_fraction``) AND ``p_value <= 0.05``
  (``alpha``; needs K >= 19 draws to be reachable) AND ``effect >= 2 * max(random_effect_mean, 0)``
  (``min_effect_ratio``). Upper-bound saturation is reported but not required: it tests the
  layers, not the circuit.

**Speed.** Heads in layer l change nothing before l, and all conditions share the input of the
layer they first ablate *and* that layer's per-head outputs. ``run`` therefore does one plain
(baseline) pass per chunk of sequences, capturing the residual stream entering each needed
"first ablated layer" l0 and the out_proj input there; conditions are grouped by l0 and each
group branches from there: stacked copies (conditions x sequences, at most ``max_rows`` rows per
call) skip l0's attention (its masked per-head outputs go straight through out_proj), run layers
l0+1..L-1 with per-row head masks on each out_proj, and apply the final norm and lm_head at the
query only. Everything after a layer's attention is position-wise, so in the last layer only
the attention runs over all positions (keys and values; the run stops at its out_proj) and the
rest of the layer runs on the query position alone; groups whose l0 is the last layer run on the
query alone from the start.
"""
from __future__ import annotations

import math
import re
import sys
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import polars as pl
import torch
from torch import nn

from headtrace import families as _families
from headtrace import probe, tables
from headtrace.families import Family

Head = tuple[int, int]

CIRCUITS = {
    # verdict row -> (its condition, random-control candidates, upper-bound candidates)
    "circuit": ("circuit", ("matched_random",), ("upper_bound",)),
    "final_circuit": ("final_circuit", ("final_matched_random", "matched_random"), ("final_upper_bound", "upper_bound")),
    "previous_token_circuit": ("previous_token_circuit", ("previous_token_matched_random",), ("previous_token_upper_bound",)),
}


@dataclass(frozen=True)
class Condition:
    name: str
    draw: int = 0  # 1..K for random draws, 0 otherwise (and for an empty circuit's placeholder draw)
    heads: tuple[Head, ...] = field(default_factory=tuple)

    @property
    def n_heads(self) -> int:
        return len(self.heads)


# --------------------------------------------------------------------------------------------
# Conditions


def _as_heads(heads: Iterable) -> tuple[Head, ...]:
    out = set()
    for h in heads:
        if isinstance(h, str):
            m = re.fullmatch(r"L(\d+)H(\d+)", h.strip())
            if not m:
                raise ValueError(f"cannot parse head name '{h}' (expected like 'L4H4')")
            out.add((int(m.group(1)), int(m.group(2))))
        else:
            layer, head = h
            out.add((int(layer), int(head)))
    return tuple(sorted(out))


def _layers_of(heads: Sequence[Head]) -> list[int]:
    return sorted({l for l, _ in heads})


def _upper_bound(heads: Sequence[Head], n_heads_per_layer: int) -> tuple[Head, ...]:
    return tuple((l, h) for l in _layers_of(heads) for h in range(n_heads_per_layer))


def matched_random_draws(
    circuit: Sequence[Head], n_heads_per_layer: int, n_random: int, seed: int, name: str
) -> list[tuple[Head, ...]]:
    """K draws matched to ``circuit``: per circuit layer, ``min(k_l, free_l)`` of its non-circuit
    heads, without replacement; the generator is seeded from ``(seed, crc32(name))``."""
    circuit = _as_heads(circuit)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])
    per_layer = {l: sum(1 for cl, _ in circuit if cl == l) for l in _layers_of(circuit)}
    chosen = set(circuit)
    draws = []
    for _ in range(n_random):
        heads: list[Head] = []
        for l, k in per_layer.items():
            pool = [h for h in range(n_heads_per_layer) if (l, h) not in chosen]
            take = min(k, len(pool))
            if take:
                heads.extend((l, int(h)) for h in rng.choice(pool, size=take, replace=False))
        draws.append(tuple(sorted(heads)))
    return draws


def _with_controls(name: str, random_name: str, ub_name: str | None, heads, n_heads_per_layer,
                   n_random, seed) -> list[Condition]:
    out = [Condition(name, 0, heads)]
    if heads:
        out += [Condition(random_name, i + 1, d)
                for i, d in enumerate(matched_random_draws(heads, n_heads_per_layer, n_random, seed, random_name))]
    elif n_random > 0:
        out.append(Condition(random_name, 0, ()))  # placeholder: nothing to match
    if ub_name is not None:
        out.append(Condition(ub_name, 0, _upper_bound(heads, n_heads_per_layer)))
    return out


def circuit_from_screen(screen: pl.DataFrame, induction_threshold: float = 50.0) -> tuple[Head, ...]:
    """Induction circuit: every head with ``sel_induction >= induction_threshold``."""
    sel = screen.filter(pl.col("sel_induction").fill_nan(None) >= induction_threshold)
    return _as_heads(zip(sel["layer"].to_list(), sel["head"].to_list()))


def previous_token_circuit_from_screen(screen: pl.DataFrame, threshold: float = 100.0) -> tuple[Head, ...]:
    """Previous-token circuit: best class previous-token with ``best_selectivity >= threshold``."""
    sel = screen.filter((pl.col("best_class") == "previous-token")
                        & (pl.col("best_selectivity").fill_nan(None) >= threshold))
    return _as_heads(zip(sel["layer"].to_list(), sel["head"].to_list()))


def build_conditions(
    screen: pl.DataFrame,
    n_heads_per_layer: int | None = None,
    *,
    final_circuit: Iterable | None,
    n_random: int = 20,
    seed: int = 0,
    induction_threshold: float = 50.0,
    previous_token_threshold: float = 100.0,
    final_controls: bool = False,
) -> list[Condition]:
    """All conditions of one cell (see the module docstring), baseline first.

    ``n_heads_per_layer`` defaults to ``max(screen.head) + 1``. ``final_circuit`` is an iterable of
    ``(layer, head)`` pairs or ``"L4H4"`` names; ``None`` omits the final-circuit condition.
    """
    if n_random < 0:
        raise ValueError(f"n_random must be >= 0, got {n_random}")
    if n_heads_per_layer is None:
        if screen.height == 0:
            raise ValueError("empty screen and no n_heads_per_layer")
        n_heads_per_layer = int(screen["head"].max()) + 1
    circuit = circuit_from_screen(screen, induction_threshold)
    prev = previous_token_circuit_from_screen(screen, previous_token_threshold)
    conds = [Condition("baseline", 0, ())]
    conds += _with_controls("circuit", "matched_random", "upper_bound", circuit, n_heads_per_layer, n_random, seed)
    if final_circuit is not None:
        final = _as_heads(final_circuit)
        if final_controls:
            conds += _with_controls("final_circuit", "final_matched_random", "final_upper_bound", final,
                                    n_heads_per_layer, n_random, seed)
        else:
            conds.append(Condition("final_circuit", 0, final))
    conds += _with_controls("previous_token_circuit", "previous_token_matched_random",
                            "previous_token_upper_bound", prev, n_heads_per_layer, n_random, seed)
    for c in conds:
        bad = [h for _, h in c.heads if not 0 <= h < n_heads_per_layer]
        if bad:
            raise ValueError(f"condition {c.name} has head indices {bad} outside 0..{n_heads_per_layer - 1}")
    return conds


# --------------------------------------------------------------------------------------------
# Measurement


def _metrics(logits: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row top1/top5/ce/logit_b of (rows, vocab) logits for (rows,) targets, fp32."""
    logits = logits.float()
    lb = logits.gather(1, target[:, None])[:, 0]
    k = min(5, logits.shape[1])
    top5 = (logits.topk(k, dim=1).indices == target[:, None]).any(dim=1)
    return {
        "top1": (logits.argmax(dim=1) == target).double(),
        "top5": top5.double(),
        "ce": (torch.logsumexp(logits, dim=1) - lb).double(),
        "logit_b": lb.double(),
    }


METRICS = ("top1", "top5", "ce", "logit_b")


def _head_mask(conds: Sequence[Condition], layer: int, n_heads: int, d_head: int, rows_per: int,
               dtype, device) -> torch.Tensor | None:
    """(len(conds) * rows_per, 1, n_heads * d_head) keep-mask for ``layer``, or None if no head is cut."""
    m = torch.ones(len(conds), n_heads, dtype=dtype)
    any_cut = False
    for i, c in enumerate(conds):
        for l, h in c.heads:
            if l == layer:
                m[i, h] = 0
                any_cut = True
    if not any_cut:
        return None
    m = m.repeat_interleave(d_head, dim=1).repeat_interleave(rows_per, dim=0)
    return m[:, None, :].to(device)


def _repeat_kwargs(obj, s: int, reps: int):
    """Tile batch-dimension tensors (dim 0 == s) ``reps`` times along dim 0, recursing into tuples."""
    if reps == 1:
        return obj
    if isinstance(obj, torch.Tensor):
        if obj.dim() > 0 and obj.shape[0] == s and s > 1:
            return obj.repeat(reps, *([1] * (obj.dim() - 1)))
        return obj
    if isinstance(obj, tuple):
        return tuple(_repeat_kwargs(o, s, reps) for o in obj)
    if isinstance(obj, list):
        return [_repeat_kwargs(o, s, reps) for o in obj]
    if isinstance(obj, dict):
        return {k: _repeat_kwargs(v, s, reps) for k, v in obj.items()}
    return obj


class _Override:
    """Temporarily replace an attention module's forward with precomputed output."""

    def __init__(self, attn: nn.Module, fn):
        self.attn, self.fn = attn, fn

    def __enter__(self):
        self.attn.forward = self.fn  # instance attribute shadows the class method
        return self

    def __exit__(self, *exc):
        del self.attn.forward


class _Stop(Exception):
    pass


def _out_proj_input(layer: nn.Module, out_proj: nn.Module, h: torch.Tensor, kw: dict) -> torch.Tensor:
    """Run ``layer`` on ``h`` only as far as its out_proj; return the out_proj input (per-head outputs)."""
    box = {}

    def grab(mod, args):
        box["z"] = args[0]
        raise _Stop

    hd = out_proj.register_forward_pre_hook(grab)
    try:
        layer(h, **kw)
    except _Stop:
        pass
    finally:
        hd.remove()
    if "z" not in box:
        raise RuntimeError("the layer never called its attention output projection")
    return box["z"]


def _finish_layer(layer: nn.Module, attn: nn.Module, out_proj: nn.Module, h: torch.Tensor, z: torch.Tensor,
                  kw: dict) -> torch.Tensor:
    """Run ``layer`` on residual ``h`` with its attention replaced by ``out_proj(z)``: everything
    left is position-wise, so ``h`` and ``z`` may hold any subset of positions (e.g. the query)."""
    with _Override(attn, lambda *a, **k: (out_proj(z), None)):
        out = layer(h, **kw)
    return out[0] if isinstance(out, tuple) else out


def run(
    model: nn.Module,
    family: Family,
    batch: probe.ProbeBatch,
    conditions: Sequence[Condition],
    *,
    batch_size: int,
    device="cpu",
    progress: bool = True,
    max_rows: int | None = None,
) -> list[dict]:
    """Evaluate every condition on the whole batch; one dict per condition, in order, with
    ``name, draw, heads, n_heads, top1, top5, ce, logit_b, n_sequences``.

    ``batch_size`` sequences per plain pass; branch passes stack conditions x sequences up to
    ``max_rows`` rows per call (default ``batch_size``, i.e. the memory of one plain pass).
    The model must already be on ``device`` and in eval mode.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    max_rows = max_rows or batch_size
    n_layers, n_heads, d_head = _families.dims(model)
    for c in conditions:
        for l, h in c.heads:
            if not (0 <= l < n_layers and 0 <= h < n_heads):
                raise ValueError(f"condition {c.name} draw {c.draw}: head L{l}H{h} not in a "
                                 f"{n_layers} x {n_heads} model")
    layers = family.layers(model)
    attns = [family.attention(layer) for layer in layers]
    out_projs = [family.out_proj(a) for a in attns]
    backbone, final_norm, lm_head = family.backbone(model), family.final_norm(model), family.lm_head(model)

    # Group ablating conditions by their first ablated layer; empty ones reuse the baseline pass.
    groups: dict[int, list[int]] = {}
    for i, c in enumerate(conditions):
        if c.heads:
            groups.setdefault(min(l for l, _ in c.heads), []).append(i)
    sums = np.zeros((len(conditions), len(METRICS)))
    base_sums = np.zeros(len(METRICS))
    tokens = torch.as_tensor(batch.tokens, dtype=torch.long)
    target_all = torch.as_tensor(batch.target, dtype=torch.long)
    n = tokens.shape[0]
    n_chunks = math.ceil(n / batch_size)

    with torch.inference_mode():
        for ci, start in enumerate(range(0, n, batch_size)):
            ids = tokens[start:start + batch_size].to(device)
            tgt = target_all[start:start + batch_size].to(device)
            s = ids.shape[0]
            # Plain pass: capture each group's layer input (+ kwargs) and its out_proj input.
            cap: dict[int, dict] = {l0: {} for l0 in groups}
            handles = []
            for l0 in groups:
                def pre(mod, args, kwargs, _c=cap[l0]):
                    _c["h"] = args[0] if args else kwargs["hidden_states"]
                    _c["kw"] = {k: v for k, v in kwargs.items() if k != "hidden_states"}
                def zhook(mod, args, _c=cap[l0]):
                    _c["z"] = args[0]
                handles.append(layers[l0].register_forward_pre_hook(pre, with_kwargs=True))
                handles.append(out_projs[l0].register_forward_pre_hook(zhook))
            try:
                hidden = backbone(input_ids=ids, use_cache=False).last_hidden_state  # final-normed
            finally:
                for hd in handles:
                    hd.remove()
            base = _metrics(lm_head(hidden[:, -1]), tgt)
            base_sums += [float(base[m].sum()) for m in METRICS]
            del hidden
            # Branches.
            for l0, idx in sorted(groups.items()):
                c0 = cap[l0]
                last_only = l0 == n_layers - 1
                h0 = c0["h"][:, -1:] if last_only else c0["h"]
                z0 = c0["z"][:, -1:] if last_only else c0["z"]
                per_call = max(1, max_rows // s)
                for g in range(0, len(idx), per_call):
                    sub = [conditions[i] for i in idx[g:g + per_call]]
                    nc = len(sub)
                    reps = lambda t: t.repeat(nc, *([1] * (t.dim() - 1))) if nc > 1 else t
                    kw = _repeat_kwargs(c0["kw"], s, nc)
                    mask0 = _head_mask(sub, l0, n_heads, d_head, s, z0.dtype, z0.device)
                    z = reps(z0) * mask0  # every condition of the group cuts a head in l0
                    h = _finish_layer(layers[l0], attns[l0], out_projs[l0], reps(h0), z, kw)
                    for l in range(l0 + 1, n_layers):
                        m = _head_mask(sub, l, n_heads, d_head, s, h.dtype, h.device)
                        if l == n_layers - 1:
                            # Only the query matters after the last attention: its per-head outputs
                            # need every position (keys/values), the rest runs on the query alone.
                            z = _out_proj_input(layers[l], out_projs[l], h, kw)[:, -1:]
                            z = z if m is None else z * m
                            h = _finish_layer(layers[l], attns[l], out_projs[l], h[:, -1:], z, kw)
                            continue
                        hd = None
                        if m is not None:
                            hd = out_projs[l].register_forward_pre_hook(lambda mod, args, _m=m: (args[0] * _m,) + args[1:])
                        try:
                            h = layers[l](h, **kw)
                        finally:
                            if hd is not None:
                                hd.remove()
                    h = h[0] if isinstance(h, tuple) else h
                    met = _metrics(lm_head(final_norm(h[:, -1])), tgt.repeat(nc))
                    for m_i, name in enumerate(METRICS):
                        per_cond = met[name].view(nc, s).sum(dim=1).cpu().numpy()
                        sums[idx[g:g + nc], m_i] += per_cond
                    del h, z
            cap.clear()
            if progress:
                print(f"[ablation] chunk {ci + 1}/{n_chunks}: {s} sequences, "
                      f"{len(groups)} branch group(s)", file=sys.stderr, flush=True)

    out = []
    for i, c in enumerate(conditions):
        vals = sums[i] if c.heads else base_sums
        out.append({"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads,
                    **{m: float(vals[k] / n) for k, m in enumerate(METRICS)}, "n_sequences": n})
    return out


def run_naive(model: nn.Module, family: Family, batch: probe.ProbeBatch, conditions: Sequence[Condition],
              *, batch_size: int, device="cpu") -> list[dict]:
    """Reference implementation: one full forward pass per condition, heads zeroed by out_proj
    pre-hooks. Same output as ``run``; used to verify it."""
    n_layers, n_heads, d_head = _families.dims(model)
    out_projs = family.out_projs(model)
    tokens = torch.as_tensor(batch.tokens, dtype=torch.long)
    target = torch.as_tensor(batch.target, dtype=torch.long)
    n = tokens.shape[0]
    out = []
    with torch.inference_mode():
        for c in conditions:
            handles = []
            for l in _layers_of(c.heads):
                keep = torch.ones(n_heads * d_head, device=device)
                for cl, h in c.heads:
                    if cl == l:
                        keep[h * d_head:(h + 1) * d_head] = 0
                handles.append(out_projs[l].register_forward_pre_hook(
                    lambda mod, args, _k=keep: (args[0] * _k.to(args[0].dtype),) + args[1:]))
            sums = np.zeros(len(METRICS))
            try:
                for start in range(0, n, batch_size):
                    ids = tokens[start:start + batch_size].to(device)
                    logits = model(input_ids=ids, use_cache=False).logits[:, -1]
                    met = _metrics(logits, target[start:start + batch_size].to(device))
                    sums += [float(met[m].sum()) for m in METRICS]
            finally:
                for hd in handles:
                    hd.remove()
            out.append({"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads,
                        **{m: float(sums[k] / n) for k, m in enumerate(METRICS)}, "n_sequences": n})
    return out


# --------------------------------------------------------------------------------------------
# Tables


def ablation_table(results: Sequence[dict], model_name: str, revision: str, tokens: int) -> pl.DataFrame:
    """The ``ablation`` table (tables.SCHEMAS) of one cell, plus ``n_sequences``."""
    df = pl.DataFrame(
        {
            "model": [model_name] * len(results),
            "revision": [revision] * len(results),
            "tokens": [None if tokens is None else int(tokens)] * len(results),
            "condition": [r["name"] for r in results],
            "draw": [int(r["draw"]) for r in results],
            "n_heads": [int(r["n_heads"]) for r in results],
            "heads": [[tables.head_name(l, h) for l, h in r["heads"]] for r in results],
            **{m: [float(r[m]) for r in results] for m in METRICS},
            "n_sequences": [int(r.get("n_sequences", 0)) for r in results],
        },
        schema_overrides={"heads": pl.List(pl.String), "n_sequences": pl.Int32},
    )
    return tables.conform(df, "ablation")


def verdict(
    ablation_df: pl.DataFrame,
    *,
    alpha: float = 0.05,
    max_ablated_fraction: float = 0.5,
    min_effect_ratio: float = 2.0,
    saturation_fraction: float = 0.1,
) -> pl.DataFrame:
    """The ``verdict`` table: one row per circuit present in each cell (rule in the module
    docstring), plus ``control`` (the random condition used), ``n_random`` and
    ``random_top1_mean``."""
    rows = []
    for key, cell in ablation_df.group_by(["model", "revision", "tokens"], maintain_order=True):
        conds = set(cell["condition"].to_list())
        base = cell.filter(pl.col("condition") == "baseline")
        if base.height != 1:
            raise ValueError(f"cell {key}: expected one baseline row, found {base.height}")
        b = float(base["top1"][0])
        for circuit_name, (cond, random_names, ub_names) in CIRCUITS.items():
            if cond not in conds:
                continue
            crow = cell.filter(pl.col("condition") == cond).row(0, named=True)
            rname = next((r for r in random_names if r in conds), None)
            draws = (cell.filter((pl.col("condition") == rname) & (pl.col("draw") >= 1))
                     if rname else cell.clear())
            uname = next((u for u in ub_names if u in conds), None)
            ub = float(cell.filter(pl.col("condition") == uname)["top1"][0]) if uname else b
            a = float(crow["top1"])
            n_heads = int(crow["n_heads"])
            effect = b - a
            k = draws.height
            if k:
                dtop = draws["top1"].to_numpy().astype(float)
                r_mean = float(np.mean(b - dtop))
                r_top1 = float(np.mean(dtop))
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = float(np.float64(effect) / np.float64(r_mean))
                # The p-value counts *distinct* head sets: when a layer has few free heads the draws
                # repeat (4 heads a layer, a 3-head circuit: every draw is the one free head), and
                # K copies of one comparison are not K draws.
                distinct = draws.unique(subset=["heads"], keep="first", maintain_order=True)
                k_distinct = distinct.height
                dtop_distinct = distinct["top1"].to_numpy().astype(float)
                # draw effect >= circuit effect  <=>  draw top1 <= circuit top1 (exact, no rounding)
                p = (1 + int((dtop_distinct <= a).sum())) / (1 + k_distinct) if n_heads else math.nan
            else:
                r_mean = r_top1 = ratio = p = math.nan
                k_distinct = 0
            causal = bool(
                n_heads > 0 and effect > 0 and a <= max_ablated_fraction * b
                and not math.isnan(p) and p <= alpha
                and effect >= min_effect_ratio * max(r_mean, 0.0)
            )
            rows.append({
                "model": key[0], "revision": key[1], "tokens": key[2], "circuit": circuit_name,
                "n_heads": n_heads, "heads": list(crow["heads"]), "baseline_top1": b, "ablated_top1": a,
                "effect": effect, "random_effect_mean": r_mean, "effect_vs_random": ratio, "p_value": p,
                "upper_bound_top1": ub, "upper_bound_saturates": bool(b > 0 and ub <= saturation_fraction * b),
                "causal": causal, "control": rname, "n_random": k, "n_distinct_draws": k_distinct,
                "random_top1_mean": r_top1,
            })
    schema = {**tables.SCHEMAS["verdict"], "control": pl.String, "n_random": pl.Int32, "n_distinct_draws": pl.Int32,
              "random_top1_mean": pl.Float64}
    if not rows:
        return pl.DataFrame(schema=schema)
    return tables.conform(pl.DataFrame(rows, schema=schema), "verdict")
