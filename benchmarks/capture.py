"""Cost of the capture pass against a plain forward and the author's eager + output_attentions pass.

A random-init GPT-NeoX with Pythia-1B's widths (hidden 2048, 8 heads, MLP 8192, vocab 50304,
rotary_pct 0.25) but few layers, on a synthetic induction batch. All timings in one process: a warm-up run of
each, then ``--repeats`` round-robin rounds; best and median per method:

  plain-backbone  the base model (embeddings + layers) with the default SDPA attention: the same
                  work capture does, minus the capture; capture / plain-backbone is its overhead
  plain-lm        the full causal LM (adds the unembedding and the (B, T, vocab) logits)
  capture         headtrace.cell.capture.run: head outputs + attention masses, one pass per chunk
  eager-lm        the author's way: full LM, eager attention, output_attentions=True

Usage: .venv/bin/python benchmarks/capture.py [--layers 2] [--n 8] [--seq-len 256] [--batch-size 8]
On 2 idle CPU cores the defaults take about a minute (the 50304-wide unembedding dominates plain-lm and
eager-lm); on a GPU use e.g. --device cuda --n 512 --dtype fp16.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headtrace.cell import capture  # noqa: E402
from headtrace.core import probe
from headtrace.models import families


def build_model(n_layers: int, dtype: torch.dtype, device: str) -> torch.nn.Module:
    cfg = transformers.GPTNeoXConfig(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=n_layers, num_attention_heads=8,
        intermediate_size=8192, rotary_pct=0.25, max_position_embeddings=2048, use_parallel_residual=True,
        bos_token_id=0, eos_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.GPTNeoXForCausalLM(cfg).eval()
    return model.to(device=device, dtype=dtype)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_rounds(runs, device: str, warmup: int, repeats: int) -> dict[str, list[float]]:
    """Warm every method up, then time them round-robin (one of each per round), so that load
    from other processes on a shared machine hits every method alike."""
    for _ in range(warmup):
        for _, fn in runs:
            fn()
    sync(device)
    out: dict[str, list[float]] = {name: [] for name, _ in runs}
    for r in range(repeats):
        for name, fn in runs:
            t0 = time.perf_counter()
            fn()
            sync(device)
            out[name].append(time.perf_counter() - t0)
        print(f"  round {r + 1}/{repeats}: " + "  ".join(f"{k} {v[-1]:.3f}s" for k, v in out.items()), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--n", type=int, default=8, help="probe sequences")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--skip-lm", action="store_true", help="skip plain-lm and eager-lm (the slow ones on CPU)")
    args = ap.parse_args()

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    t0 = time.perf_counter()
    model = build_model(args.layers, dtype, args.device)
    family = families.get("gpt_neox")
    batch = probe.make_batch(n_sequences=args.n, seq_len=args.seq_len)
    tokens = torch.from_numpy(batch.tokens)
    print(f"model: {args.layers} layers x 2048 x 8 heads, vocab 50304, {args.dtype} on {args.device} "
          f"(built in {time.perf_counter() - t0:.1f}s); probe n={args.n} T={args.seq_len} "
          f"batch_size={args.batch_size}; torch threads={torch.get_num_threads()}", flush=True)

    def chunks():
        for s in range(0, args.n, args.batch_size):
            yield tokens[s:s + args.batch_size].to(args.device)

    def plain_backbone():
        with torch.inference_mode():
            for ids in chunks():
                family.backbone(model)(input_ids=ids, use_cache=False)

    def plain_lm():
        with torch.inference_mode():
            for ids in chunks():
                model(input_ids=ids, use_cache=False)

    def run_capture():
        capture.run(model, family, batch, batch_size=args.batch_size, device=args.device, progress=False)

    def eager_lm():
        impl = model.config._attn_implementation
        model.set_attn_implementation("eager")
        try:
            with torch.inference_mode():
                for ids in chunks():
                    out = model(input_ids=ids, use_cache=False, output_attentions=True)
                    # what the author kept: every layer's last query row
                    _ = [a[:, :, -1, :].float().cpu() for a in out.attentions]
        finally:
            model.set_attn_implementation(impl)

    runs = [("plain-backbone", plain_backbone), ("capture", run_capture)]
    if not args.skip_lm:
        runs += [("plain-lm", plain_lm), ("eager-lm", eager_lm)]
    results = timed_rounds(runs, args.device, args.warmup, args.repeats)
    for name, ts in results.items():
        print(f"  {name:<15} best {min(ts):8.3f}s  median {statistics.median(ts):8.3f}s")

    best = {k: min(v) for k, v in results.items()}
    print("ratios (best times):")
    print(f"  capture / plain-backbone = {best['capture'] / best['plain-backbone']:.3f}  (capture overhead; target <= 1.3)")
    if "plain-lm" in best:
        print(f"  capture / plain-lm       = {best['capture'] / best['plain-lm']:.3f}")
        print(f"  eager-lm / plain-lm      = {best['eager-lm'] / best['plain-lm']:.3f}")


if __name__ == "__main__":
    main()
