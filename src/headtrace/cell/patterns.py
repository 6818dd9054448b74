"""The whole-pattern measures of a short probe, in capture's forward-hook path (docs/measures.md).

For the short probes (the repeated-random probe and the text probe, T ~ 64) the sink rate needs every
query's attention to the first key and the prefix-matching score every query of the later repeats. Like
the synthetic pass (``headtrace.cell.capture``) this never asks the model for ``output_attentions``: the
model runs with capture's registered attention function (output exactly SDPA) and, on the side, the fp32
softmax of every query row of the layer (``softmax(q k^T * scaling + mask)``, (B, H, T, T) per chunk),
which is immediately reduced, per sequence and head, to

* ``alpha``: the mean over the queries of their attention to key 0 (``headtrace.cell.measures.sink_alpha``),
  kept per sequence in the table (the published sink rate thresholds each sequence's);
* ``prefix``: the prefix-matching score (``headtrace.cell.measures.prefix_matching``), when asked.

The copying score of each head comes from the weights alone (:func:`copying`), no pass.

BLOOM (``PROBS_HOOK``) hands its own probabilities to the same reduction. Tests check both numbers against
the pure functions applied to eager ``output_attentions`` on a tiny model of every family.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from headtrace.cell import capture, measures
from headtrace.core import tables
from headtrace.models import context, families

MAX_SEQ_LEN = 1024  # the (B, H, T, T) rows are formed per layer: a short probe only
MAX_PATTERN_BYTES = 2**30  # a chunk's fp32 (B, H, T, T) rows stay under 1 GiB: batch_size is lowered to fit


@dataclass
class PatternResult:
    alpha: np.ndarray  # (n_sequences, n_layers, n_heads) float64: mean attention of every query to key 0
    prefix: np.ndarray | None  # (n_sequences, n_layers, n_heads) float64 prefix-matching score, or None
    n_sequences: int
    seq_len: int


def run(model, family: families.Family, tokens: np.ndarray, *, batch_size: int, device="cpu",
        prefix: bool = False, progress: bool = False) -> PatternResult:
    """Sink alpha (and, with ``prefix``, the prefix-matching score) per sequence and head of ``tokens``
    ``(n, T)``, in one pass through the capture attention. The model must sit on ``device``; its
    attention implementation and train/eval mode are restored on return."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 2 or tokens.shape[0] < 1:
        raise ValueError(f"pattern probe: need (n, T) token ids with n >= 1, got shape {tokens.shape}")
    n, t = tokens.shape
    if t > MAX_SEQ_LEN:
        raise ValueError(f"pattern probe: {t} tokens per sequence; the whole-pattern measures take at most "
                         f"{MAX_SEQ_LEN}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    parts = capture._model_parts(model, family)
    batch_size = max(1, min(batch_size, MAX_PATTERN_BYTES // (4 * parts.n_heads * t * t)))
    capture._register()
    collector = _PatternCollector(n, parts.n_layers, parts.n_heads, device)
    targets = measures.prefix_targets(tokens) if prefix else None
    with capture._capturing(model, family, parts, collector, None), torch.inference_mode():
        n_chunks = 0
        for start in range(0, n, batch_size):
            rows = slice(start, min(start + batch_size, n))
            collector.rows = rows
            if targets is not None:
                collector.targets = torch.from_numpy(targets[rows]).to(device=device, dtype=torch.float32)
                collector.scored = torch.from_numpy(targets[rows].any(-1)).to(device=device, dtype=torch.float64)
            family.backbone(model)(input_ids=torch.from_numpy(tokens[rows]).to(device), use_cache=False)
            n_chunks += 1
        capture._check_calls(collector, n_chunks)
    prefix_out = None
    if prefix:
        prefix_out = collector.prefix.cpu().numpy()
        prefix_out[~targets.any(-1).any(-1)] = np.nan  # a sequence with no repeat scores nothing
    return PatternResult(alpha=collector.alpha.cpu().numpy(), prefix=prefix_out, n_sequences=int(n), seq_len=int(t))


def copying(model, family: families.Family) -> np.ndarray:
    """(n_layers, n_heads) copying score of every head's OV circuit (``measures.copying_scores``) from the
    model's weights (``families.ov_weights``: embedding, value, output, unembedding; no layer norm, no bias)."""
    return copying_readings(model, family)[0]


def copying_readings(model, family: families.Family) -> tuple[np.ndarray, np.ndarray]:
    """Both readings of every head's OV eigenvalues (``measures.copying_readings_of_product``): the
    positive-eigenvalue share and Elhage et al.'s ratio, (n_layers, n_heads) each."""
    with torch.no_grad():
        w_e, w_v, w_o, w_u = families.ov_weights(model, family)
        m = (w_u.float() @ w_e.float()).cpu().numpy()  # (d_model, d_model) on the model's device, fp32
        return measures.copying_readings_of_product(m, w_v.float().cpu().numpy(), w_o.float().cpu().numpy())


def measures_table(results: dict[str, PatternResult], model_name: str, revision: str, tokens: int | None,
                   copying_scores: np.ndarray | None = None, copying_ratios: np.ndarray | None = None) -> pl.DataFrame:
    """One row per (probe, layer, head), schema ``measures``: the sink alpha (mean over sequences) and
    every sequence's (in probe order: the published sink rate thresholds these, at any eps, in the
    findings), the prefix-matching score (null where the probe has no repeats) and the head's copying score (from its weights: the same on every probe's row;
    null when not given)."""
    frames = []
    for probe_name, r in results.items():
        n_layers, n_heads = r.alpha.shape[1:]
        data = tables.head_key_columns(model_name, revision, tokens, n_layers, n_heads)
        data["probe"] = [probe_name] * (n_layers * n_heads)
        data["sink_alpha"] = r.alpha.mean(0).ravel()
        data["sink_alpha_per_sequence"] = r.alpha.reshape(r.alpha.shape[0], -1).T.tolist()  # per head, every sequence's
        data["prefix_matching"] = (np.full(n_layers * n_heads, np.nan) if r.prefix is None
                                   else np.nanmean(r.prefix, 0).ravel())
        data["copying"] = (np.full(n_layers * n_heads, np.nan) if copying_scores is None
                           else np.asarray(copying_scores, np.float64).ravel())
        data["copying_eigenvalue_ratio"] = (np.full(n_layers * n_heads, np.nan) if copying_ratios is None
                                            else np.asarray(copying_ratios, np.float64).ravel())
        data["n_sequences"] = np.full(n_layers * n_heads, r.n_sequences, np.int32)
        data["seq_len"] = np.full(n_layers * n_heads, r.seq_len, np.int32)
        frames.append(pl.DataFrame(data).with_columns(pl.col("prefix_matching").fill_nan(None),
                                                      pl.col("copying").fill_nan(None),
                                                      pl.col("copying_eigenvalue_ratio").fill_nan(None)))
    return tables.conform(pl.concat(frames, how="vertical_relaxed"), "measures")


def cell_measures(model, family: families.Family, *, repeated: np.ndarray | None, text: np.ndarray | None,
                  batch_size: int, device, name: str, revision: str, tokens: int | None) -> pl.DataFrame:
    """The ``measures`` table of one cell: the repeated-random probe (sink alpha and prefix matching) and,
    when given, the text probe (sink alpha), each ``(n, T)`` token ids as fed. The capture job and
    ``headtrace.analyze`` both call this."""
    limits = context.limits_of([(getattr(model, "config", None), "the model's config")])
    for what, ids in (("repeated-random", repeated), ("text", text)):
        if ids is None:
            continue
        if limits.vocab is not None and int(np.max(ids)) >= limits.vocab:
            raise ValueError(f"the {what} probe's token ids reach {int(np.max(ids))} but model '{name}' revision "
                             f"'{revision}' has a vocabulary of {limits.vocab}: the probe was tokenised for another "
                             "model")
        if limits.context is not None and ids.shape[1] > limits.context:
            raise ValueError(f"the {what} probe has {ids.shape[1]}-token sequences but model '{name}' revision "
                             f"'{revision}' has a context of {limits.context} ({limits.context_key}): shorten "
                             f"{'text_probe.seq_len' if what == 'text' else 'repeated_probe.length x repeats'}")
    results: dict[str, PatternResult] = {}
    if repeated is not None:
        results["repeated"] = run(model, family, repeated, batch_size=batch_size, device=device, prefix=True)
    if text is not None:
        results["text"] = run(model, family, text, batch_size=batch_size, device=device)
    if not results:
        raise ValueError("cell_measures: neither a repeated-random nor a text probe")
    share, ratio = copying_readings(model, family)
    return measures_table(results, name, revision, tokens, copying_scores=share, copying_ratios=ratio)


class _PatternCollector:
    """Per sequence and head, the sink alpha (and prefix score) of every layer of one pass."""

    def __init__(self, n: int, n_layers: int, n_heads: int, device: torch.device):
        self.alpha = torch.zeros(n, n_layers, n_heads, dtype=torch.float64, device=device)
        self.prefix = torch.zeros(n, n_layers, n_heads, dtype=torch.float64, device=device)
        self.calls = torch.zeros(n_layers, dtype=torch.int64)
        self.rows: slice | None = None
        self.targets: torch.Tensor | None = None  # (B, T, T) prefix targets of the chunk, or None
        self.scored: torch.Tensor | None = None  # (B, T) queries scored

    def observe(self, layer: int, query: torch.Tensor, key: torch.Tensor,
                attention_mask: torch.Tensor | None, scaling: float | None) -> None:
        b, n_heads, t, d = query.shape
        n_kv = key.shape[1]
        if scaling is None:
            scaling = d ** -0.5
        k = key.float()
        if n_kv != n_heads:  # GQA / MQA: head h reads kv head h // (H / Hkv), as repeat_kv
            k = k.repeat_interleave(n_heads // n_kv, dim=1)
        scores = torch.matmul(query.float(), k.transpose(-1, -2)) * scaling  # (B, H, T, T)
        t_k = k.shape[-2]
        if attention_mask is None:  # SDPA then runs is_causal
            causal = torch.ones(t, t_k, dtype=torch.bool, device=scores.device).tril(t_k - t)
            scores = scores.masked_fill(~causal, float("-inf"))
        else:
            m = attention_mask[:, :, :, :t_k]
            scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m.float()
        self.observe_map(layer, torch.softmax(scores, dim=-1))

    def observe_map(self, layer: int, probs: torch.Tensor) -> None:
        """Reduce every query row (B, H, T, T) to alpha (and the prefix score) per sequence and head."""
        p = probs.float()
        self.alpha[self.rows, layer] = p[:, :, :, measures.SINK_KEY].double().mean(-1)  # key 0: all T queries
        if self.targets is not None:
            per_query = torch.einsum("bhij,bij->bhi", p, self.targets).double()  # (B, H, T)
            scored = self.scored[:, None, :]
            count = scored.sum(-1).clamp(min=1)
            self.prefix[self.rows, layer] = (per_query * scored).sum(-1) / count
        self.calls[layer] += 1
