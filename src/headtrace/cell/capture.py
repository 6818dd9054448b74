"""One forward pass per (model, revision) cell: per-head outputs and the screen's attention masses.

What is captured (Xu 2026, arXiv:2605.24059, steps 1 and 2 of the recipe), all at the query (the
last position T-1). (Length: ~430 lines for the one pass - its attention function, hooks, six named
steps of ``run``, and the result's tables - kept together so the single-pass guarantee is checkable
in one file.)

* **Head outputs** - each head's slice of the *input* to the attention output projection
  (GPT-NeoX ``attention.dense``, OLMo/OLMoE ``self_attn.o_proj``), i.e. the head's output before
  it is mixed into the residual stream. Read by a forward pre-hook on the projection that keeps
  only the last position. Shape ``(n_sequences, n_layers, n_heads, d_head)``, float32.
* **Attention masses** of the query's attention row, per (layer, head), for each class of
  ``CLASSES``: induction (key ``ab+1``) and duplicate-token (key ``ab``) averaged over the
  *valid* sequences only; previous-token (``T-2``), first-token (``0``), self (``T-1``) and local
  (mean over keys ``T-6..T-3``) averaged over all sequences. Two baselines:
  ``baseline_sampled`` (the author's code: mean attention to the 50 fixed positions of
  ``synthetic.baseline_positions``, over all sequences), ``baseline_uniform`` (the paper: ``1/T``,
  the query sees ``T`` keys) and ``baseline_clean`` (per sequence, the mean attention over the keys
  that are none of that sequence's class keys: ab, ab+1, 0, T-6..T-3, T-2, T-1; over all sequences;
  see ``headtrace.cell.screen``).

How (the author's code ran the model with eager attention and ``output_attentions=True``, keeping
every layer's full attention maps; we do not): for the duration of the pass the model's attention
implementation is switched to a registered ``AttentionInterface`` function that computes the
output with the stock SDPA kernel and, on the side, only the last query row's softmax
(``q[:, :, -1:] @ k^T * scaling + mask``, in float32), which it immediately reduces to the class
masses by gathering the few key positions the screen reads and accumulating sums (float64). No
(T x T) map is ever materialized, the output path is exactly SDPA, and the model's original
attention implementation is restored afterwards. The pass runs the base model only (embeddings
and decoder layers, ``family.backbone``): capture needs no logits, so the unembedding is skipped.

A family whose attention does not call the registry (BLOOM: ``Family.capture == PROBS_HOOK``) keeps
its own attention implementation: a forward hook on the module that receives its probabilities
(BLOOM's ``attention_dropout``, identity in eval) reads their query row and reduces it the same way.
Such a model materializes its (T x T) maps itself.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from headtrace.core import tables
from headtrace.core.classes import CLASSES
from headtrace.models import families
from headtrace.probe import synthetic

ATTN_IMPLEMENTATION = "headtrace_capture"

# Columns of the per-chunk weight matrix, in this order: the six classes, then the sampled and the
# clean baseline.
_MASS_NAMES = (*CLASSES, "baseline_sampled", "baseline_clean")


@dataclass
class CaptureResult:
    head_outputs: np.ndarray | None  # (n_sequences, n_layers, n_heads, d_head) float32, or None
    induction: np.ndarray  # (n_layers, n_heads) float64, over valid sequences
    duplicate_token: np.ndarray  # over valid sequences
    previous_token: np.ndarray
    first_token: np.ndarray
    self_: np.ndarray  # attention of the query to itself ("self" is a reserved word in methods)
    local: np.ndarray
    baseline_sampled: np.ndarray  # author's code: mean over the 50 fixed synthetic.baseline_positions
    baseline_uniform: np.ndarray  # paper: 1 / T
    n_sequences: int
    n_valid: int
    # Per-sequence masses for the bootstrap (headtrace.cell.bootstrap): (n_sequences, n_layers, n_heads, 7)
    # float32, channels _MASS_NAMES (induction/duplicate-token weighted by validity, i.e. 0 on invalid
    # sequences); their means over the sequences are the fields above (up to float32 storage).
    sequence_masses: np.ndarray | None = None
    valid: np.ndarray | None = None  # (n_sequences,) bool, the probe's validity mask
    seq_len: int | None = None
    baseline_clean: np.ndarray | None = None  # per sequence: mean over the keys of no class
    # Sliding-window layers (families.layer_windows): per layer its window or None, and per layer
    # the share of each class's weight (keys x the sequences it averages over) on keys outside the
    # window, i.e. masked by construction: {class: (n_layers,) float64}; None without a windowed layer.
    windows: list[int | None] | None = None
    out_of_window: dict[str, np.ndarray] | None = None

    def mass(self, cls: str) -> np.ndarray:
        """Attention mass of one class by its ``CLASSES`` name (``"duplicate-token"``, ...),
        or ``"baseline_sampled"`` / ``"baseline_uniform"``."""
        attr = {"self": "self_"}.get(cls, cls.replace("-", "_"))
        return getattr(self, attr)

    def classes_out_of_window(self, layer: int, *, partly: bool = False) -> list[str]:
        """The classes (``CLASSES`` order) whose keys ``layer``'s window cannot see in this
        probe: every key in every sequence the class averages over (its mass is 0 by construction),
        or with ``partly``, some but not all of them (its mass is lowered by construction)."""
        if self.out_of_window is None:
            return []
        share = {c: float(self.out_of_window[c][layer]) for c in CLASSES}
        if partly:
            return [c for c in CLASSES if 0.0 < share[c] < 1.0]
        return [c for c in CLASSES if share[c] >= 1.0]

    @property
    def masses(self) -> dict[str, np.ndarray]:
        """``{class name: (n_layers, n_heads)}`` for every class of ``CLASSES``."""
        return {c: self.mass(c) for c in CLASSES}


# --------------------------------------------------------------------------------------------
# The attention function registered with transformers' AttentionInterface.
# --------------------------------------------------------------------------------------------

class _Collector:
    """Accumulates the last-row attention masses of one capture pass."""

    def __init__(self, n_layers: int, n_heads: int, device: torch.device):
        # fp64 accumulation where the device has it (MPS does not).
        self.acc_dtype = torch.float32 if device.type == "mps" else torch.float64
        self.sums = torch.zeros(n_layers, len(_MASS_NAMES), n_heads, dtype=self.acc_dtype, device=device)
        self.calls = torch.zeros(n_layers, dtype=torch.int64)  # forward calls seen per layer (host)
        self.index: torch.Tensor | None = None  # (B, K) key positions to gather
        self.weight: torch.Tensor | None = None  # (B, K, C) gathered keys -> class sums
        self.per_seq: torch.Tensor | None = None  # (N, L, H, C) float32 per-sequence masses, or None
        self.rows: slice | None = None  # the chunk's sequences

    def observe(self, layer: int, query: torch.Tensor, key: torch.Tensor,
                attention_mask: torch.Tensor | None, scaling: float | None) -> None:
        b, n_heads, _, d = query.shape
        n_kv = key.shape[1]
        if scaling is None:
            scaling = d ** -0.5
        q = query[:, :, -1, :].float()  # (B, H, D), post-rotary
        k = key.float()  # (B, Hkv, T, D)
        if n_kv != n_heads:  # GQA / MQA: head h reads kv head h // (H / Hkv), as repeat_kv
            rep = n_heads // n_kv
            scores = torch.einsum("bgrd,bgtd->bgrt", q.view(b, n_kv, rep, d), k).reshape(b, n_heads, -1)
        else:
            scores = torch.einsum("bhd,bhtd->bht", q, k)
        scores = scores * scaling
        if attention_mask is not None:
            m = attention_mask[..., -1, :]  # (B|1, H|1, T): the query row of the mask
            if m.dtype == torch.bool:
                scores = scores.masked_fill(~m, float("-inf"))
            else:
                scores = scores + m.float()
        self.observe_probs(layer, torch.softmax(scores, dim=-1))  # (B, H, T) fp32

    def observe_map(self, layer: int, probs: torch.Tensor) -> None:
        """A PROBS_HOOK family's own probabilities (B, H, T_q, T_k): only the query row is read."""
        self.observe_probs(layer, probs[:, :, -1, :])

    def observe_probs(self, layer: int, probs: torch.Tensor) -> None:
        """Reduce the query row's probabilities (B, H, T) to the class sums of ``layer``."""
        b, n_heads, _ = probs.shape
        probs = probs.float()
        idx = self.index[:, None, :].expand(b, n_heads, -1)
        picked = probs.gather(-1, idx).to(self.acc_dtype)  # (B, H, K)
        self.sums[layer] += torch.einsum("bhk,bkc->ch", picked, self.weight)
        if self.per_seq is not None:  # the same reduction, kept per sequence (for the bootstrap)
            self.per_seq[self.rows, layer] = torch.einsum("bhk,bkc->bhc", picked, self.weight).float()
        self.calls[layer] += 1


# id(attention module) -> (collector, layer index). Only modules of a pass in progress are here;
# any other model that happens to use this implementation just gets plain SDPA.
_ACTIVE: dict[int, tuple[_Collector, int]] = {}


def _capture_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):

    out = sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                 **kwargs)
    entry = _ACTIVE.get(id(module))
    if entry is not None:
        collector, layer = entry
        collector.observe(layer, query, key, attention_mask, scaling)
    return out


def _probs_hook(collector: _Collector, layer: int):
    """Forward hook on a PROBS_HOOK family's probabilities module (BLOOM's attention_dropout): its
    input is the model's own attention probabilities (B, H, T_q, T_k); the collector reads the rows it
    needs (``_Collector``: the query row; ``headtrace.cell.patterns``: every row)."""
    def hook(_module, args, _output):
        collector.observe_map(layer, args[0])
    return hook


def _register() -> None:
    """Register the capture function (and SDPA's mask builder under the same name) once."""

    if ATTN_IMPLEMENTATION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTN_IMPLEMENTATION, _capture_attention_forward)
    # Without a mask function of its own the model would build no mask at all for this name
    # (padding would be silently ignored); SDPA's builder gives exactly what SDPA gets.
    if ATTN_IMPLEMENTATION not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_IMPLEMENTATION, sdpa_mask)


# --------------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------------

def _chunk_weights(batch: synthetic.ProbeBatch, rows: slice, baseline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key positions to gather (B, K) and their weights into the class sums (B, K, C)."""
    t = batch.seq_len
    fixed = synthetic.fixed_positions(t)
    ab = batch.ab[rows]
    valid = batch.valid[rows].astype(np.float64)
    b = ab.shape[0]
    cols: list[np.ndarray] = []  # (B, k) position blocks
    weights: list[np.ndarray] = []  # matching (B, k, C) blocks
    n_cls = len(_MASS_NAMES)
    for c, name in enumerate(_MASS_NAMES):
        if name == "induction":
            pos, w = (ab + 1)[:, None], valid[:, None]
        elif name == "duplicate-token":
            pos, w = ab[:, None], valid[:, None]
        elif name == "baseline_clean":  # every key of no class of this sequence, averaged
            pos = np.broadcast_to(np.arange(t), (b, t))
            keep = np.ones((b, t), bool)
            keep[:, np.concatenate(list(fixed.values()))] = False
            keep[np.arange(b), ab] = False
            keep[np.arange(b), ab + 1] = False
            w = keep / keep.sum(1, keepdims=True)
        else:
            p = baseline if name == "baseline_sampled" else fixed[name]
            pos = np.broadcast_to(p, (b, p.size))
            w = np.full((b, p.size), 1.0 / p.size)  # mean over the class's keys
        block = np.zeros((b, pos.shape[1], n_cls))
        block[:, :, c] = w
        cols.append(pos)
        weights.append(block)
    return np.concatenate(cols, axis=1).astype(np.int64), np.concatenate(weights, axis=1)


def _model_device(model: nn.Module) -> torch.device | None:
    p = next(model.parameters(), None)
    return None if p is None else p.device


def run(
    model: nn.Module,
    family: families.Family,
    batch: synthetic.ProbeBatch,
    *,
    batch_size: int,
    device: str | torch.device = "cpu",
    keep_head_outputs: bool = True,
    baseline_positions: np.ndarray | None = None,
    progress: bool = True,
    keep_sequence_masses: bool = True,
) -> CaptureResult:
    """Capture head outputs and attention masses of ``batch`` in one forward pass per chunk.

    ``model`` must already sit on ``device`` (any dtype; the softmax and the sums run in
    fp32/fp64). ``baseline_positions`` defaults to ``synthetic.baseline_positions(T)``.
    ``keep_sequence_masses`` also keeps every sequence's class masses (for the bootstrap; small:
    N x layers x heads x 7 float32). The model's attention implementation and train/eval mode are
    restored on return.

    Steps: ``_check_inputs`` (batch size, device, baseline positions) -> ``_model_parts`` (layers,
    heads, attention modules, backbone) -> ``_capturing`` (swap in the capture attention, hooks;
    undone on exit) -> ``_forward_chunks`` (the one pass, chunk by chunk) -> ``_check_calls`` (every
    layer seen once per chunk) -> ``_result`` (sums -> means).
    """
    device, baseline = _check_inputs(model, batch, batch_size, device, baseline_positions)
    parts = _model_parts(model, family)
    n = batch.tokens.shape[0]
    _register()
    collector = _Collector(parts.n_layers, parts.n_heads, device)
    if keep_sequence_masses:
        collector.per_seq = torch.zeros(n, parts.n_layers, parts.n_heads, len(_MASS_NAMES), dtype=torch.float32,
                                        device=device)
    heads = _HeadOutputs(n, parts) if keep_head_outputs else None
    with _capturing(model, family, parts, collector, heads):
        n_chunks = _forward_chunks(parts.backbone, batch, baseline, collector, heads, batch_size, device, progress)
        _check_calls(collector, n_chunks)
    return _result(collector, batch, parts, heads, families.layer_windows(model.config), baseline)


@dataclass
class _Parts:
    n_layers: int
    n_heads: int
    d_head: int
    attn_modules: list
    backbone: nn.Module


def _check_inputs(model, batch, batch_size, device, baseline_positions) -> tuple[torch.device, np.ndarray]:
    """The device (the model must already be there) and the baseline key positions, checked."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    model_device = _model_device(model)
    if model_device is not None and model_device.type != device.type:
        raise ValueError(f"model is on {model_device} but capture was asked to run on {device}; move it first")
    t = batch.tokens.shape[1]
    baseline = synthetic.baseline_positions(t) if baseline_positions is None else np.asarray(baseline_positions, np.int64)
    if baseline.ndim != 1 or baseline.size == 0 or baseline.min() < 0 or baseline.max() >= t:
        raise ValueError(f"baseline_positions must be a non-empty 1-D array of key positions in [0, {t})")
    return device, baseline


def _model_parts(model, family) -> _Parts:
    """Dimensions, attention modules (one per layer, checked) and the base model the pass runs."""
    family.check(model)
    n_layers, n_heads, d_head = families.dims(model)
    attn_modules = family.attention_modules(model)
    if len(attn_modules) != n_layers:
        raise ValueError(f"family '{family.name}' finds {len(attn_modules)} attention modules, config says {n_layers}")
    return _Parts(n_layers, n_heads, d_head, attn_modules, family.backbone(model))


class _HeadOutputs:
    """Per-head outputs at the query: a forward pre-hook per output projection fills the chunk's
    device buffer; ``flush`` copies it into the host array."""

    def __init__(self, n: int, parts: _Parts):
        self.parts = parts
        self.array = np.empty((n, parts.n_layers, parts.n_heads, parts.d_head), np.float32)
        self.chunk: torch.Tensor | None = None

    def hook(self, layer: int):
        n_heads, d_head = self.parts.n_heads, self.parts.d_head

        def pre_hook(_module, args):
            x = args[0]  # (B, T, n_heads * d_head), head-major
            self.chunk[:, layer] = x[:, -1, :].reshape(x.shape[0], n_heads, d_head)
        return pre_hook

    def start(self, b: int, device) -> None:
        p = self.parts
        self.chunk = torch.empty(b, p.n_layers, p.n_heads, p.d_head, dtype=torch.float32, device=device)

    def flush(self, rows: slice) -> None:
        self.array[rows] = self.chunk.cpu().numpy()


@contextlib.contextmanager
def _capturing(model, family, parts: _Parts, collector: _Collector, heads: _HeadOutputs | None):
    """Eval mode, the capture attention implementation, the collector registered per attention
    module and the head-output hooks, for the duration of the block; all undone on exit."""
    original_impl = model.config._attn_implementation
    was_training = model.training
    handles = []
    try:
        model.eval()
        if family.capture == families.PROBS_HOOK:  # the model's own probabilities, its implementation kept
            handles = [family.probs_module(module).register_forward_hook(_probs_hook(collector, layer))
                       for layer, module in enumerate(parts.attn_modules)]
        else:
            model.set_attn_implementation(ATTN_IMPLEMENTATION)
            if model.config._attn_implementation != ATTN_IMPLEMENTATION:
                raise RuntimeError(f"{type(model).__name__} does not accept a custom attention implementation")
            for layer, module in enumerate(parts.attn_modules):
                _ACTIVE[id(module)] = (collector, layer)
        if heads is not None:
            handles += [proj.register_forward_pre_hook(heads.hook(layer))
                        for layer, proj in enumerate(family.out_projs(model))]
        yield
    finally:
        for h in handles:
            h.remove()
        for module in parts.attn_modules:
            _ACTIVE.pop(id(module), None)
        if heads is not None:
            heads.chunk = None
        if model.config._attn_implementation != original_impl:
            model.set_attn_implementation(original_impl)
        model.train(was_training)


def _forward_chunks(backbone, batch, baseline, collector, heads, batch_size, device, progress) -> int:
    """Run the base model over the batch in chunks (no grad, no cache); returns the chunk count."""
    n = batch.tokens.shape[0]
    starts = range(0, n, batch_size)
    if progress:
        starts = tqdm(starts, desc="capture", unit="chunk", file=sys.stderr, leave=False)
    with torch.inference_mode():
        for start in starts:
            rows = slice(start, min(start + batch_size, n))
            index, weight = _chunk_weights(batch, rows, baseline)
            collector.index = torch.from_numpy(index).to(device)
            collector.weight = torch.from_numpy(weight).to(device=device, dtype=collector.acc_dtype)
            collector.rows = rows
            if heads is not None:
                heads.start(rows.stop - rows.start, device)
            backbone(input_ids=torch.from_numpy(batch.tokens[rows]).to(device), use_cache=False)
            if heads is not None:
                heads.flush(rows)
    return len(range(0, n, batch_size))


def _check_calls(collector: _Collector, n_chunks: int) -> None:
    """Every layer's attention must have been seen exactly once per chunk."""
    if not bool((collector.calls == n_chunks).all()):
        raise RuntimeError(f"attention capture saw {collector.calls.tolist()} calls per layer, expected {n_chunks}")


def _out_of_window(batch, baseline: np.ndarray, windows: list[int | None]) -> dict[str, np.ndarray] | None:
    """Per class, per layer: the share of the class's weight on keys that the layer's sliding window
    masks (distance from the query T-1 at least the window). None when no layer is windowed."""
    if all(w is None for w in windows):
        return None
    t = batch.seq_len
    index, weight = _chunk_weights(batch, slice(0, batch.tokens.shape[0]), baseline)  # (N, K), (N, K, C)
    distance = (t - 1) - index
    out: dict[str, np.ndarray] = {}
    for c, name in enumerate(_MASS_NAMES):
        if name not in CLASSES:
            continue
        w = weight[:, :, c]
        total = w.sum()
        out[name] = np.array([0.0 if win is None or total == 0 else float(w[distance >= win].sum() / total)
                              for win in windows])
    return out


def _result(collector: _Collector, batch, parts: _Parts, heads: _HeadOutputs | None,
            windows: list[int | None] | None = None, baseline: np.ndarray | None = None) -> CaptureResult:
    """Class sums -> means (induction/duplicate-token over the valid sequences, the rest over all)."""
    n, t = batch.tokens.shape
    sums = collector.sums.to("cpu", torch.float64).numpy()  # (L, C, H)
    n_valid = int(batch.valid.sum())
    masses: dict[str, np.ndarray] = {}
    for c, name in enumerate(_MASS_NAMES):
        denom = n_valid if name in ("induction", "duplicate-token") else n
        masses[name] = sums[:, c, :] / denom if denom > 0 else np.full((parts.n_layers, parts.n_heads), np.nan)
    per_seq = None if collector.per_seq is None else collector.per_seq.cpu().numpy()
    return CaptureResult(
        head_outputs=None if heads is None else heads.array,
        induction=masses["induction"],
        duplicate_token=masses["duplicate-token"],
        previous_token=masses["previous-token"],
        first_token=masses["first-token"],
        self_=masses["self"],
        local=masses["local"],
        baseline_sampled=masses["baseline_sampled"],
        baseline_uniform=np.full((parts.n_layers, parts.n_heads), 1.0 / t),
        baseline_clean=masses["baseline_clean"],
        n_sequences=int(n),
        n_valid=n_valid,
        sequence_masses=per_seq,
        valid=np.asarray(batch.valid, bool).copy(),
        seq_len=int(t),
        windows=windows,
        out_of_window=None if windows is None or baseline is None else _out_of_window(batch, baseline, windows),
    )


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------

def attention_table(result: CaptureResult, model_name: str, revision: str, tokens: int) -> pl.DataFrame:
    """One row per (layer, head), conforming to ``tables.SCHEMAS["attention"]``."""
    n_layers, n_heads = result.induction.shape
    n_rows = n_layers * n_heads
    data = tables.head_key_columns(model_name, revision, tokens, n_layers, n_heads)
    for cls, col in zip(CLASSES, tables.CLASS_COLUMNS):
        data[f"attn_{col}"] = result.mass(cls).ravel().astype(np.float64)
    data["attn_baseline_sampled"] = result.baseline_sampled.ravel().astype(np.float64)
    data["attn_baseline_uniform"] = result.baseline_uniform.ravel().astype(np.float64)
    data["attn_baseline_clean"] = (np.full(n_rows, np.nan) if result.baseline_clean is None
                                   else result.baseline_clean.ravel().astype(np.float64))
    data["n_sequences"] = np.full(n_rows, result.n_sequences, np.int32)
    data["n_valid"] = np.full(n_rows, result.n_valid, np.int32)
    # Beyond the schema (docs/families.md): the layer's sliding window (null: full attention) and the
    # classes it cannot see in this probe, wholly (mass 0 by construction) or partly.
    windows = result.windows or [None] * n_layers
    data["attn_window"] = pl.Series([windows[l] for l in range(n_layers) for _ in range(n_heads)], dtype=pl.Int32)
    for col, partly in (("classes_out_of_window", False), ("classes_partly_out_of_window", True)):
        per_layer = [result.classes_out_of_window(l, partly=partly) for l in range(n_layers)]
        data[col] = pl.Series([per_layer[l] for l in range(n_layers) for _ in range(n_heads)],
                              dtype=pl.List(pl.String))
    return tables.conform(pl.DataFrame(data), "attention")


def save_head_outputs(result: CaptureResult, path: str | os.PathLike) -> None:
    """Write ``result.head_outputs`` (sequence, layer, head, d_head) to a safetensors file, atomically."""
    if result.head_outputs is None:
        raise ValueError("this capture kept no head outputs (keep_head_outputs=False)")
    tables.write_array(result.head_outputs, path, metadata={
        "layout": "sequence,layer,head,d_head",
        "n_sequences": str(result.n_sequences),
        "n_valid": str(result.n_valid),
    })


def save_class_masses(result: CaptureResult, path: str | os.PathLike) -> None:
    """Write the per-sequence class masses (sequence, layer, head, class; channels ``_MASS_NAMES``)
    with the validity mask and T in the metadata, atomically; read by ``bootstrap.load_masses``."""
    if result.sequence_masses is None:
        raise ValueError("this capture kept no per-sequence masses (keep_sequence_masses=False)")
    tables.write_array(result.sequence_masses, path, metadata={
        "layout": "sequence,layer,head,class",
        "channels": json.dumps(list(_MASS_NAMES)),
        "n_sequences": str(result.n_sequences),
        "n_valid": str(result.n_valid),
        "seq_len": str(result.seq_len),
        "valid": np.packbits(result.valid.astype(np.uint8)).tobytes().hex(),
    })


def load_head_outputs(path: str | os.PathLike) -> np.ndarray:
    """(n_sequences, n_layers, n_heads, d_head) float32 head outputs written by ``save_head_outputs``."""
    return tables.read_array(path)
