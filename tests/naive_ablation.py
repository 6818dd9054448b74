"""Test oracle of the ablation engine: one full forward pass per condition, heads zeroed by
out_proj pre-hooks. Same output (means) as ``headtrace.causal.ablation.run``; used to verify it (tests,
benchmarks/ablation.py)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from headtrace.causal.ablation import METRICS, _metrics
from headtrace.causal.conditions import Condition
from headtrace.core import probe
from headtrace.core.heads import layers_of
from headtrace.models import families
from headtrace.models.families import Family


def run_naive(model: nn.Module, family: Family, batch: probe.ProbeBatch, conditions: Sequence[Condition],
              *, batch_size: int, device="cpu") -> list[dict]:
    """One dict per condition (``name, draw, heads, n_heads``, the four metrics' means, ``n_sequences``)."""
    n_layers, n_heads, d_head = families.dims(model)
    out_projs = family.out_projs(model)
    tokens = torch.as_tensor(batch.tokens, dtype=torch.long)
    target = torch.as_tensor(batch.target, dtype=torch.long)
    control = torch.as_tensor(probe.control_targets(batch), dtype=torch.long)
    n = tokens.shape[0]
    out = []
    with torch.inference_mode():
        for c in conditions:
            handles = []
            for l in layers_of(c.heads):
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
                    sl = slice(start, start + batch_size)
                    met = _metrics(logits, target[sl].to(device), control[sl].to(device), ids)
                    sums += [float(met[m].sum()) for m in METRICS]
            finally:
                for hd in handles:
                    hd.remove()
            out.append({"name": c.name, "draw": c.draw, "heads": c.heads, "n_heads": c.n_heads,
                        **{m: float(sums[k] / n) for k, m in enumerate(METRICS)}, "n_sequences": n})
    return out
