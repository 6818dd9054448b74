"""References for what a cell captures: tiny models sharpened so that random-init attention is far from
uniform, the masses reduced by hand from full eager attention maps (the author's way), and the full eager
maps the patterns are checked against (tests/cell/test_capture.py, test_patterns.py, tests/models/test_real_model.py,
benchmarks/gpu_check.py on a GPU)."""
from __future__ import annotations

import numpy as np
import torch

from headtrace.core.classes import CLASSES
from headtrace.probe import synthetic

MASS_FIELDS = (*CLASSES, "baseline_sampled", "baseline_clean")


def sharpen(model: torch.nn.Module, factor: float = 15.0, norm_factor: float = 2.0) -> torch.nn.Module:
    """Scale query/key weights so random-init attention is far from uniform (a stronger test).
    OLMoE normalizes q and k after the projection, so there its q/k norm weights set the scale."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("query_key_value.weight", "q_proj.weight", "k_proj.weight", "c_attn.weight")):
                p.mul_(factor)
            elif any(k in name for k in ("q_norm.weight", "k_norm.weight")):
                p.mul_(norm_factor)
    return model


def eager_last_row(model, family, batch) -> np.ndarray:
    """The query's attention row of every layer and head from full eager maps: (N, L, H, T)."""
    impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = family.backbone(model)(input_ids=torch.from_numpy(batch.tokens), output_attentions=True,
                                         use_cache=False)
    finally:
        model.set_attn_implementation(impl)
    return torch.stack(out.attentions, dim=1)[:, :, :, -1, :].double().numpy()


def eager_masses(model, family, batch) -> dict[str, np.ndarray]:
    """Reference: full eager attention maps, last row reduced by hand (the author's way)."""
    row = eager_last_row(model, family, batch)  # (N, L, H, T)
    t = batch.seq_len
    n = np.arange(row.shape[0])
    v = batch.valid
    ref = {
        "induction": row[n, :, :, batch.ab + 1][v].mean(0),
        "duplicate-token": row[n, :, :, batch.ab][v].mean(0),
        "previous-token": row[:, :, :, t - 2].mean(0),
        "first-token": row[:, :, :, 0].mean(0),
        "self": row[:, :, :, t - 1].mean(0),
        "local": row[:, :, :, t - 6:t - 2].mean((0, 3)),
        "baseline_sampled": row[:, :, :, synthetic.baseline_positions(t)].mean((0, 3)),
        "_row_max": row.max(-1).mean(),
    }
    # clean baseline: per sequence, the mean over the keys of no class (not ab, ab+1, 0, T-6..T-1)
    keep = np.ones((row.shape[0], t), bool)
    keep[:, [0, *range(t - 6, t)]] = False
    keep[n, batch.ab] = False
    keep[n, batch.ab + 1] = False
    ref["baseline_clean"] = ((row * keep[:, None, None, :]).sum(-1) / keep.sum(1)[:, None, None]).mean(0)
    assert ref["local"].shape == ref["self"].shape
    return ref


def eager_patterns(model, family, tokens) -> np.ndarray:
    """(N, L, H, T, T) full eager attention maps."""
    impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = family.backbone(model)(input_ids=torch.from_numpy(tokens), output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(impl)
    return torch.stack(out.attentions, dim=1).double().numpy()
