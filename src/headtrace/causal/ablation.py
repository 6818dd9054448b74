"""The ablation engine: evaluate ablation conditions on a probe batch, one sequence at a time kept.

**Ablation.** A head is ablated by zeroing its slice of the *input* to the attention output
projection (``Family.out_proj``), i.e. its output before it is mixed into the residual stream.
The output projection's bias (if any) stays. The measurement is the induction task at the query
(the last position, target B), per probe sequence, every metric of the registry
(``headtrace.core.metrics``, each measured by its record): ``top1`` (B is the arg-max logit), ``top5`` (B
among the 5 largest logits), ``logit_b`` (logit of B) and ``ce`` (cross-entropy of B, nats), logits
in fp32; a condition's value is the mean over *all* sequences of the batch (valid or not), and the
per-sequence values are kept (``per_sequence``) for the bootstrap intervals of ``headtrace.causal.intervals``.
Two more say what the top-1 is when it is not B, for the copying null of the composition experiment:
``top1_control`` (the top-1 is the sequence's shuffled-B control token, ``core.synthetic.control_targets``)
and ``top1_context`` (the top-1 is some token of the sequence other than B).

The conditions (which heads, which controls) are ``headtrace.causal.conditions``; the verdict statistics
``headtrace.causal.verdict``. ``Condition``, ``build_conditions`` and ``verdict`` are
re-exported here for callers of the ablation step.

**Speed** (``run``, in named steps). Heads in layer l change nothing before l, and all conditions
share the input of the layer they first ablate *and* that layer's per-head outputs. So:

1. ``_distinct_sets``: conditions with the same head set are one evaluation (a final circuit's
   controls that coincide with the cell circuit's cost nothing); empty sets are the baseline.
2. ``_group_by_first_layer``: the distinct sets grouped by their first ablated layer l0.
3. ``_plain_pass``: one plain (baseline) pass per chunk of sequences, capturing the residual stream
   entering each l0 (with the layer's keyword arguments) and l0's out_proj input.
4. ``_branch``: per group, stacked copies (sets x sequences, at most ``max_rows`` rows per call)
   skip l0's attention (its masked per-head outputs go straight through out_proj), run layers
   l0+1..L-1 with per-row head masks on each out_proj, and apply the final norm and lm_head at
   the query only. Everything after a layer's attention is position-wise, so in the last layer
   only the attention runs over all positions and the rest of the layer runs on the query alone;
   groups whose l0 is the last layer run on the query alone from the start.

The floor of this method (``floor_layer_passes``): each distinct set recomputes every layer after
its first ablated one, up to the query; the benchmark reports the engine against it.

**Layer keyword arguments.** Stacking conditions tiles the batch-shaped keyword arguments the
decoder layers receive. Which ones are batch-shaped is explicit (``LAYER_KWARGS``, by argument
name); an argument not listed there is an error naming it, and ``tests/causal/test_ablation.py`` checks
the exact set each family's layers receive, so a transformers change fails loudly.
"""
from __future__ import annotations

import inspect
import math
import sys
from typing import Mapping, Sequence

import numpy as np
import polars as pl
import torch
from torch import nn
from tqdm.auto import tqdm

from headtrace.causal.conditions import Condition, build_conditions  # noqa: F401 (re-exported: ablation.build_conditions)
from headtrace.causal.intervals import bootstrap_intervals
from headtrace.causal.verdict import COPY_NULL, METHODS, verdict  # noqa: F401 (verdict re-exported)
from headtrace.core import metrics, tables
from headtrace.core.metrics import METRICS  # noqa: F401 (re-exported: the registry; iterating it gives the names)
from headtrace.core.heads import Head
from headtrace.models import families as _families
from headtrace.models.families import Family
from headtrace.probe import synthetic

# which probe sequences ran (headtrace.causal.recipe.ablation_probe): the last columns of the ablation and verdict tables
PROBE_RECORD = ("ablation_probe", "ablation_probe_seed", "ablation_probe_sha256", "ablation_probe_redrawn")

# Keyword arguments of a decoder layer's forward, by name: "batch" = dim 0 is the batch (or 1,
# broadcast), tiled when conditions are stacked; "batch_heads" = dim 0 is batch x heads, batch-major
# (BLOOM's alibi), tiled the same way; "shared" = not batch-shaped, passed as is.
LAYER_KWARGS = {
    "attention_mask": "batch",  # None with SDPA's causal path; (B|1, 1, T, T) otherwise
    "position_ids": "batch",  # (B|1, T)
    "position_embeddings": "batch",  # (cos, sin), each (B|1, T, d_rot)
    "layer_past": "shared",  # GPT-NeoX cache (None: use_cache=False)
    "cache": "shared",  # OLMo / OLMoE cache (None)
    "past_key_value": "shared",
    "past_key_values": "shared",
    "cache_position": "shared",  # (T,)
    "use_cache": "shared",
    "output_attentions": "shared",
    "output_router_logits": "shared",
    "encoder_hidden_states": "batch",  # GPT-2 (positional; None without cross-attention)
    "encoder_attention_mask": "batch",  # GPT-2 (None)
    "alibi": "batch_heads",  # BLOOM: (B * H, 1, T), batch-major
}
# What transformers (5.x) passes to each family's decoder layers with use_cache=False; the test
# compares against this, so a change in transformers shows up as a failing test.
EXPECTED_LAYER_KWARGS = {
    "gpt_neox": {"attention_mask", "position_ids", "layer_past", "use_cache", "position_embeddings"},
    "olmo": {"attention_mask", "position_embeddings", "position_ids", "cache", "use_cache"},
    "olmoe": {"attention_mask", "position_embeddings", "position_ids", "cache", "use_cache"},
    **{f: {"attention_mask", "position_embeddings", "position_ids", "cache", "use_cache"}
       for f in ("llama", "olmo2", "qwen2", "qwen3", "smollm3", "apertus")},
    "olmo3": {"attention_mask", "position_embeddings", "position_ids", "cache"},  # per layer type
    # GPT-2's blocks take cache, attention_mask and encoder_hidden_states positionally (_layer_kwargs names them)
    "gpt2": {"cache", "attention_mask", "encoder_hidden_states", "encoder_attention_mask", "use_cache", "position_ids"},
    "bloom": {"alibi", "attention_mask", "layer_past", "use_cache", "output_attentions"},
}


def run(
    model: nn.Module,
    family: Family,
    batch: synthetic.ProbeBatch,
    conditions: Sequence[Condition],
    *,
    batch_size: int,
    device="cpu",
    progress: bool = True,
    max_rows: int | None = None,
    methods: Sequence[str] = ("zero",),
    copy_null: bool = True,
) -> list[dict]:
    """Evaluate every condition on the whole batch; one dict per condition, in order, with
    ``name, draw, heads, n_heads``, the ``METRICS``, ``n_sequences, n_sets, exact, method,
    per_sequence`` (``per_sequence``: metric -> float64 array over the batch's sequences).

    ``methods``: how a head is cut, ``zero`` (its output set to 0, the paper's) and/or ``mean`` (set to
    its mean output over every position and sequence of the batch, one extra plain pass); the
    conditions are evaluated once per method, sharing each chunk's plain pass, and the dicts come
    method by method. ``copy_null``: also the unablated model on the copy-null batch
    (:func:`headtrace.probe.synthetic.copy_null_tokens`: the earlier B replaced by another token of the
    probe's range), one more plain pass per chunk, a ``copy_null`` dict after each method's
    conditions: the in-context boost is the baseline's metric against it.

    ``batch_size`` sequences per plain pass; branch passes stack sets x sequences up to
    ``max_rows`` rows per call (default ``batch_size``, i.e. the memory of one plain pass).
    The model must already be on ``device`` and in eval mode.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods or len(set(methods)) != len(methods):
        raise ValueError(f"ablation methods must be distinct names of {METHODS}, got {list(methods)}")
    max_rows = max_rows or batch_size
    family.check(model)
    dims = _families.dims(model)
    _check_conditions(conditions, dims[0], dims[1])
    layers = family.layers(model)
    attns = [family.attention(layer) for layer in layers]
    parts = {"backbone": family.backbone(model), "layers": layers, "attns": attns,
             "out_projs": [family.out_proj(a) for a in attns], "final_norm": family.final_norm(model),
             "lm_head": family.lm_head(model), "attention_residual": family.attention_residual}
    sets, set_of = _distinct_sets(conditions)
    groups = _group_by_first_layer(sets)
    tokens = torch.as_tensor(batch.tokens, dtype=torch.long)
    target_all = torch.as_tensor(batch.target, dtype=torch.long)
    control_all = torch.as_tensor(synthetic.control_targets(batch), dtype=torch.long)
    null_all = torch.as_tensor(synthetic.copy_null_tokens(batch), dtype=torch.long) if copy_null else None
    n = tokens.shape[0]
    base = {m: np.zeros(n) for m in METRICS}
    null = {m: np.zeros(n) for m in METRICS} if copy_null else None
    per_set = {method: [{m: np.zeros(n) for m in METRICS} for _ in sets] for method in methods}
    n_chunks = math.ceil(n / batch_size)
    # progress: a bar over the chunks on stderr (a job's log under the workflow); silent without
    bar = tqdm(total=n_chunks, desc=f"ablation ({len(sets)} head sets)", unit="chunk", file=sys.stderr,
               leave=False, disable=not progress)
    with torch.inference_mode(), bar:
        fills = {"zero": None, "mean": _head_means(parts, tokens, batch_size, device) if "mean" in methods else None}
        for start in range(0, n, batch_size):
            ids = tokens[start:start + batch_size].to(device)
            tgt = target_all[start:start + batch_size].to(device)
            ctl = control_all[start:start + batch_size].to(device)
            s = ids.shape[0]
            logits, cap = _plain_pass(parts, groups, ids)
            for m, v in _metrics(logits, tgt, ctl, ids).items():
                base[m][start:start + s] = v.cpu().numpy()
            if null is not None:
                nids = null_all[start:start + batch_size].to(device)
                for m, v in _metrics(_plain_pass(parts, {}, nids)[0], tgt, ctl, nids).items():
                    null[m][start:start + s] = v.cpu().numpy()
            per_call = max(1, max_rows // s)
            for method in methods:
                for l0, idx in groups.items():
                    for g in range(0, len(idx), per_call):
                        sub = idx[g:g + per_call]
                        r = len(sub)
                        met = _metrics(_branch(parts, dims, cap[l0], l0, [sets[i] for i in sub], s, fills[method]),
                                       tgt.repeat(r), ctl.repeat(r), ids.repeat(r, 1))
                        for m, v in met.items():
                            v = v.view(len(sub), s).cpu().numpy()
                            for j, si in enumerate(sub):
                                per_set[method][si][m][start:start + s] = v[j]
            cap.clear()
            bar.update(1)
    return [r for method in methods for r in _results(conditions, set_of, per_set[method], base, n, method, null)]


# --------------------------------------------------------------------------------------------
# Tables


def ablation_table(results: Sequence[dict], model_name: str, revision: str, tokens: int | None, *,
                   n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                   probe_record: Mapping | None = None) -> pl.DataFrame:
    """The ``ablation`` table (tables.SCHEMAS) of one cell. With ``per_sequence`` in the results
    (``run``), each condition gets seeded bootstrap intervals (``headtrace.causal.intervals``) of each
    metric with an ``interval`` (top1 / logit_b / ce, ``headtrace.core.metrics``), of its paired effect
    against the baseline, and of the share of the behaviour it leaves (the halving rule's: over the
    baseline for top-1, over the in-context boost against the copy-null for the others); without, they
    are null. The copy-null row's effect interval is the boost's.
    ``probe_record``: which sequences ran (the ``ablation_probe*`` columns, ``headtrace.causal.recipe.ablation_probe``);
    None (the published ablations) leaves them null."""
    have = all("per_sequence" in r for r in results) and results
    base_i = next((i for i, r in enumerate(results) if r["name"] == "baseline"), None)
    null_i = next((i for i, r in enumerate(results) if r["name"] == COPY_NULL), None)
    if have and base_i is not None and n_boot > 0:
        ci = bootstrap_intervals([r["per_sequence"] for r in results], base_i, n_boot=n_boot, seed=seed,
                                 level=level, null_index=null_i)
    else:
        ci = [{} for _ in results]
    ci_cols = [f"{m}{suffix}" for m in metrics.interval_metrics() for suffix in ("_lo", "_hi", "_effect_lo",
                                                                                  "_effect_hi")]
    ci_cols += [f"{m}{suffix}" for m in metrics.fraction_metrics() for suffix in ("_fraction_lo", "_fraction_hi")]
    df = pl.DataFrame(
        {
            "model": [model_name] * len(results),
            "revision": [revision] * len(results),
            "tokens": [None if tokens is None else int(tokens)] * len(results),
            "condition": [r["name"] for r in results],
            "draw": [int(r["draw"]) for r in results],
            "n_heads": [int(r["n_heads"]) for r in results],
            "heads": [[tables.head_name(l, h) for l, h in r["heads"]] for r in results],
            # results without the copy metrics (the published ablation files) leave them null
            **{m: [None if r.get(m) is None else float(r[m]) for r in results] for m in METRICS},
            "n_sequences": [int(r.get("n_sequences", 0)) for r in results],
            "n_matched_sets": [r.get("n_sets") for r in results],
            "reference_exact": [r.get("exact") for r in results],
            "method": [r.get("method") for r in results],
            **{c: [row.get(c) for row in ci] for c in ci_cols},
            **{c: [(probe_record or {}).get(c)] * len(results) for c in PROBE_RECORD},
        },
        schema_overrides={"heads": pl.List(pl.String), "n_sequences": pl.Int32, "n_matched_sets": pl.Int64,
                          "reference_exact": pl.Boolean, "method": pl.String,
                          "tokens": pl.Int64, **{c: pl.Float64 for c in (*ci_cols, *METRICS)},
                          **{c: tables.SCHEMAS["ablation"][c] for c in PROBE_RECORD}},
    )
    return tables.conform(df, "ablation")


def floor_layer_passes(conditions: Sequence[Condition], n_layers: int) -> float:
    """The method's floor in plain-pass units: one baseline pass, plus per distinct set the share of
    layers it must recompute (from its first ablated layer to the last)."""
    sets, _ = _distinct_sets(conditions)
    return 1.0 + sum((n_layers - min(l for l, _ in s)) / n_layers for s in sets)


# --------------------------------------------------------------------------------------------
# The steps of ``run``


def _check_conditions(conditions: Sequence[Condition], n_layers: int, n_heads: int) -> None:
    for c in conditions:
        for l, h in c.heads:
            if not (0 <= l < n_layers and 0 <= h < n_heads):
                raise ValueError(f"condition {c.name} draw {c.draw}: head L{l}H{h} not in a "
                                 f"{n_layers} x {n_heads} model")


def _distinct_sets(conditions: Sequence[Condition]) -> tuple[list[tuple[Head, ...]], list[int | None]]:
    """(distinct non-empty head sets, per condition the index of its set or None = baseline)."""
    index: dict[tuple[Head, ...], int] = {}
    of = []
    for c in conditions:
        heads = tuple(sorted(c.heads))
        if not heads:
            of.append(None)
            continue
        of.append(index.setdefault(heads, len(index)))
    return list(index), of


def _group_by_first_layer(sets: Sequence[tuple[Head, ...]]) -> dict[int, list[int]]:
    """First ablated layer l0 -> indices of the sets that start there, l0 ascending."""
    groups: dict[int, list[int]] = {}
    for i, heads in enumerate(sets):
        groups.setdefault(min(l for l, _ in heads), []).append(i)
    return dict(sorted(groups.items()))


def _plain_pass(model_parts, groups, ids) -> tuple[torch.Tensor, dict[int, dict]]:
    """Baseline logits at the query, and per group layer l0 its input ``h``, keyword arguments
    ``kw`` and out_proj input ``z`` (hooks removed afterwards)."""
    backbone, layers, out_projs, lm_head = (model_parts[k] for k in ("backbone", "layers", "out_projs", "lm_head"))
    cap: dict[int, dict] = {l0: {} for l0 in groups}
    # Every layer's own keyword arguments from the first branch on: layers of one model may get
    # different ones (Olmo 3, Qwen, SmolLM3: a sliding-window mask and rotary per layer type).
    layer_kw: dict[int, dict] = {}
    for c in cap.values():
        c["layer_kw"] = layer_kw
    handles = [layers[l].register_forward_pre_hook(
        lambda mod, args, kwargs, _l=l: layer_kw.__setitem__(_l, _layer_kwargs(mod, args, kwargs)),
        with_kwargs=True) for l in range(min(groups, default=len(layers)), len(layers))]
    for l0 in groups:
        def pre(mod, args, kwargs, _c=cap[l0]):
            _c["h"] = args[0] if args else kwargs["hidden_states"]
            _c["kw"] = _layer_kwargs(mod, args, kwargs)

        def zhook(mod, args, _c=cap[l0]):
            _c["z"] = args[0]
        handles.append(layers[l0].register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(out_projs[l0].register_forward_pre_hook(zhook))
    try:
        hidden = backbone(input_ids=ids, use_cache=False).last_hidden_state  # final-normed
    finally:
        for hd in handles:
            hd.remove()
    return lm_head(hidden[:, -1]), cap


def _kw_identity(kw: dict) -> tuple:
    """Which objects a layer's keyword arguments are (by identity, nested tuples included)."""
    return tuple((k, tuple(map(id, v)) if isinstance(v, (tuple, list)) else id(v)) for k, v in sorted(kw.items()))


def _cut(z: torch.Tensor, keep: torch.Tensor | None, fill: torch.Tensor | None) -> torch.Tensor:
    """Per-head outputs ``z`` with the cut heads (``keep`` 0) zeroed, or set to ``fill`` (the
    layer's mean per-head output, ``method="mean"``)."""
    if keep is None:
        return z
    return z * keep if fill is None else z * keep + (1 - keep) * fill.to(z.dtype)


def _branch(model_parts, dims, c0: dict, l0: int, sets: Sequence[tuple[Head, ...]], s: int,
            fill: Mapping[int, torch.Tensor] | None = None) -> torch.Tensor:
    """Query logits (len(sets) * s rows, set-major) of ``sets`` branching at layer ``l0`` from the
    captured layer input / out_proj input ``c0`` of an ``s``-sequence chunk. ``fill``: per layer
    the value a cut head takes (mean ablation); None: zero."""
    fill = fill or {}
    layers, attns, out_projs = (model_parts[k] for k in ("layers", "attns", "out_projs"))
    n_layers, n_heads, d_head = dims
    nc = len(sets)
    last_only = l0 == n_layers - 1
    h0 = c0["h"][:, -1:] if last_only else c0["h"]
    z0 = c0["z"][:, -1:] if last_only else c0["z"]

    def reps(t):
        return t.repeat(nc, *([1] * (t.dim() - 1))) if nc > 1 else t
    kw = _repeat_kwargs(c0["kw"], s, nc)
    tiled = {_kw_identity(c0["kw"]): kw}  # layers given the same arguments share one tiled copy

    def kw_of(l):
        own = c0.get("layer_kw", {}).get(l, c0["kw"])
        key = _kw_identity(own)
        if key not in tiled:
            tiled[key] = _repeat_kwargs(own, s, nc)
        return tiled[key]
    z = _cut(reps(z0), _head_mask(sets, l0, n_heads, d_head, s, z0.dtype, z0.device), fill.get(l0))  # every set cuts l0
    res = model_parts["attention_residual"]
    h = _finish_layer(layers[l0], attns[l0], out_projs[l0], reps(h0), z, kw, res)
    for l in range(l0 + 1, n_layers):
        m = _head_mask(sets, l, n_heads, d_head, s, h.dtype, h.device)
        if l == n_layers - 1:
            # Only the query matters after the last attention: its per-head outputs need every
            # position (keys/values), the rest runs on the query alone.
            z = _out_proj_input(layers[l], out_projs[l], h, kw_of(l))[:, -1:]
            z = _cut(z, m, fill.get(l))
            h = _finish_layer(layers[l], attns[l], out_projs[l], h[:, -1:], z, kw_of(l), res)
            continue
        hd = None
        if m is not None:
            hd = out_projs[l].register_forward_pre_hook(
                lambda mod, args, _m=m, _f=fill.get(l): (_cut(args[0], _m, _f),) + args[1:])
        try:
            h = layers[l](h, **kw_of(l))
        finally:
            if hd is not None:
                hd.remove()
        h = h[0] if isinstance(h, tuple) else h
    return model_parts["lm_head"](model_parts["final_norm"](h[:, -1]))


def _results(conditions, set_of, per_set, base, n, method: str, null=None) -> list[dict]:
    """One dict per condition (then the copy-null, when run): means and per-sequence arrays (its
    set's, or the baseline's)."""
    out = []
    for c, si in zip(conditions, set_of):
        ps = base if si is None else per_set[si]
        out.append({"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads,
                    **{m: float(ps[m].mean()) for m in METRICS}, "n_sequences": n,
                    "n_sets": c.n_sets, "exact": c.exact, "method": method,
                    "per_sequence": {m: ps[m].copy() for m in METRICS}})
    if null is not None:
        out.append({"name": COPY_NULL, "draw": 0, "heads": (), "n_heads": 0, **{m: float(null[m].mean()) for m in METRICS},
                    "n_sequences": n, "n_sets": None, "exact": None, "method": method,
                    "per_sequence": {m: null[m].copy() for m in METRICS}})
    return out


def _head_means(parts, tokens: torch.Tensor, batch_size: int, device) -> dict[int, torch.Tensor]:
    """Per layer the mean of its out_proj input (every head's output) over every position and
    sequence of ``tokens``: what ``method="mean"`` puts in place of a cut head. One plain pass."""
    sums: dict[int, torch.Tensor] = {}
    count = [0]

    def hook(mod, args, _l):
        z = args[0].double()  # (batch, T, n_heads * d_head)
        sums[_l] = sums.get(_l, 0) + z.sum(dim=(0, 1))
        if _l == 0:
            count[0] += z.shape[0] * z.shape[1]
    handles = [o.register_forward_pre_hook(lambda mod, args, _l=l: hook(mod, args, _l))
               for l, o in enumerate(parts["out_projs"])]
    try:
        for start in range(0, tokens.shape[0], batch_size):
            parts["backbone"](input_ids=tokens[start:start + batch_size].to(device), use_cache=False)
    finally:
        for hd in handles:
            hd.remove()
    return {l: (v / count[0]).float() for l, v in sums.items()}


def _layer_kwargs(layer: nn.Module, args: tuple, kwargs: dict) -> dict:
    """A decoder layer's arguments besides the hidden states, by name: positional ones (GPT-2
    passes cache and mask positionally) named from the layer's signature."""
    names = [n for n in inspect.signature(layer.forward).parameters if n not in ("args", "kwargs")]
    out = dict(zip(names[1:], args[1:]))
    out.update((k, v) for k, v in kwargs.items() if k != "hidden_states")
    return out


# --------------------------------------------------------------------------------------------
# Measurement and masks


def _metrics(logits: torch.Tensor, target: torch.Tensor, control: torch.Tensor,
             context: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row values (float64) of every metric of the registry (``headtrace.core.metrics``, each its
    ``measure``) from (rows, vocab) logits, fp32, for (rows,) targets B, (rows,) control tokens (-1: none)
    and the (rows, T) token ids of each row's sequence."""
    logits = logits.float()
    q = metrics.Query(logits=logits, target=target, control=control, context=context, top=logits.argmax(dim=1),
                      target_logit=logits.gather(1, target[:, None])[:, 0])
    return {m.name: m.measure(q).double() for m in METRICS.values()}


def _head_mask(sets: Sequence[tuple[Head, ...]], layer: int, n_heads: int, d_head: int, rows_per: int,
               dtype, device) -> torch.Tensor | None:
    """(len(sets) * rows_per, 1, n_heads * d_head) keep-mask for ``layer``, or None if no head is cut."""
    m = torch.ones(len(sets), n_heads, dtype=dtype)
    any_cut = False
    for i, heads in enumerate(sets):
        for l, h in heads:
            if l == layer:
                m[i, h] = 0
                any_cut = True
    if not any_cut:
        return None
    m = m.repeat_interleave(d_head, dim=1).repeat_interleave(rows_per, dim=0)
    return m[:, None, :].to(device)


def _tile(obj, s: int, reps: int, name: str, per_row: bool = False):
    """Tile a batch-shaped argument (dim 0 == s, or 1 = broadcast) ``reps`` times, into tuples.
    ``per_row``: dim 0 is s x k, batch-major (k rows per sequence, BLOOM's alibi: one per head)."""
    if isinstance(obj, (tuple, list)):
        return type(obj)(_tile(o, s, reps, name, per_row) for o in obj)
    if obj is None or not isinstance(obj, torch.Tensor):
        return obj
    if obj.dim() == 0 or obj.shape[0] == 1:
        return obj  # broadcasts over the stacked rows
    if per_row and obj.shape[0] % s == 0:
        return obj.repeat(reps, *([1] * (obj.dim() - 1)))
    if obj.shape[0] != s:
        raise RuntimeError(f"layer argument '{name}' has dim 0 = {obj.shape[0]}, expected the batch ({s}) or 1")
    return obj.repeat(reps, *([1] * (obj.dim() - 1)))


def _repeat_kwargs(kwargs: dict, s: int, reps: int) -> dict:
    """The layer's keyword arguments for ``reps`` stacked copies of an ``s``-sequence chunk:
    ``LAYER_KWARGS`` says per argument name whether it is tiled; an unknown name is an error."""
    unknown = sorted(set(kwargs) - set(LAYER_KWARGS))
    if unknown:
        raise RuntimeError(f"decoder layer received keyword argument(s) {unknown} that the ablation engine does "
                           "not know; add them to headtrace.causal.ablation.LAYER_KWARGS (batch-shaped or shared)")
    if reps == 1:
        return dict(kwargs)
    return {k: (v if LAYER_KWARGS[k] == "shared" else _tile(v, s, reps, k, LAYER_KWARGS[k] == "batch_heads"))
            for k, v in kwargs.items()}


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
                  kw: dict, residual=_families._no_residual) -> torch.Tensor:
    """Run ``layer`` on residual ``h`` with its attention replaced by ``out_proj(z)``: everything
    left is position-wise, so ``h`` and ``z`` may hold any subset of positions (e.g. the query).
    ``residual`` (``Family.attention_residual``): what the attention module adds to its own output
    (BLOOM adds the residual it is passed), from its call's arguments."""
    def attention(*a, **k):
        r = residual(a, k)
        y = out_proj(z)
        return (y if r is None else y + r), None
    with _Override(attn, attention):
        out = layer(h, **kw)
    return out[0] if isinstance(out, tuple) else out
