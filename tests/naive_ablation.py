"""Test oracle of the ablation engine: one full forward pass per condition, heads zeroed (or set to their
mean output) by out_proj pre-hooks, and the copy-null batch run whole. Same output (means) as
``headtrace.causal.ablation.run``; used to verify it (tests, benchmarks/ablation.py)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from headtrace.causal.ablation import COPY_NULL, METRICS, _metrics
from headtrace.causal.conditions import Condition
from headtrace.core.heads import layers_of
from headtrace.models import families
from headtrace.models.families import Family
from headtrace.probe import synthetic


def head_means(model: nn.Module, family: Family, tokens: torch.Tensor, device="cpu") -> dict[int, torch.Tensor]:
    """Per layer the mean out_proj input over every sequence and position, from one whole-batch pass."""
    seen: dict[int, torch.Tensor] = {}
    handles = [o.register_forward_pre_hook(lambda mod, args, _l=l: seen.__setitem__(_l, args[0].double()))
               for l, o in enumerate(family.out_projs(model))]
    try:
        with torch.inference_mode():
            model(input_ids=tokens.to(device), use_cache=False)
    finally:
        for hd in handles:
            hd.remove()
    return {l: z.reshape(-1, z.shape[-1]).mean(dim=0) for l, z in seen.items()}


def run_naive(model: nn.Module, family: Family, batch: synthetic.ProbeBatch, conditions: Sequence[Condition],
              *, batch_size: int, device="cpu", methods: Sequence[str] = ("zero",), copy_null: bool = True) -> list[dict]:
    """One dict per condition and method (``name, draw, heads, n_heads``, the metrics' means,
    ``n_sequences``, ``method``), a ``copy_null`` dict after each method's conditions."""
    n_layers, n_heads, d_head = families.dims(model)
    out_projs = family.out_projs(model)
    tokens = torch.as_tensor(batch.tokens, dtype=torch.long)
    target = torch.as_tensor(batch.target, dtype=torch.long)
    control = torch.as_tensor(synthetic.control_targets(batch), dtype=torch.long)
    n = tokens.shape[0]
    means = head_means(model, family, tokens, device) if "mean" in methods else {}

    def evaluate(ids_all, hooks):
        handles = [out_projs[l].register_forward_pre_hook(fn) for l, fn in hooks]
        sums = np.zeros(len(METRICS))
        try:
            with torch.inference_mode():
                for start in range(0, n, batch_size):
                    ids = ids_all[start:start + batch_size].to(device)
                    logits = model(input_ids=ids, use_cache=False).logits[:, -1]
                    sl = slice(start, start + batch_size)
                    met = _metrics(logits, target[sl].to(device), control[sl].to(device), ids)
                    sums += [float(met[m].sum()) for m in METRICS]
        finally:
            for hd in handles:
                hd.remove()
        return {m: float(sums[k] / n) for k, m in enumerate(METRICS)}

    out = []
    for method in methods:
        for c in conditions:
            hooks = []
            for l in layers_of(c.heads):
                keep = torch.ones(n_heads * d_head, device=device)
                for cl, h in c.heads:
                    if cl == l:
                        keep[h * d_head:(h + 1) * d_head] = 0
                fill = means[l].to(device) if method == "mean" else torch.zeros_like(keep)
                hooks.append((l, lambda mod, args, _k=keep, _f=fill:
                              ((args[0] * _k + (1 - _k) * _f).to(args[0].dtype),) + args[1:]))
            out.append({"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads,
                        **evaluate(tokens, hooks), "n_sequences": n, "method": method})
        if copy_null:
            out.append({"name": COPY_NULL, "draw": 0, "heads": (), "n_heads": 0,
                        **evaluate(torch.as_tensor(synthetic.copy_null_tokens(batch), dtype=torch.long), []),
                        "n_sequences": n, "method": method})
    return out
