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

``--families`` (``all`` or a comma-separated list): instead, every family adapter of
``headtrace.models.families.FAMILIES`` at one common small geometry -- a random-init model of the
family's own transformers class built as tests/tiny.py builds it (grouped-query where tiny.py makes it
so, olmo3's sliding layers, smollm3's no-rotary layers, olmoe's experts), here with 4 layers, 8 heads,
hidden 256, MLP 1024, vocab 512 (olmo3's window 128, half the probe) -- timing capture against the
family's plain backbone forward (SDPA) round-robin in one process, and printing a markdown table:

  .venv/bin/python benchmarks/capture.py --families all --threads 1   # ~2 min on one CPU core
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headtrace.cell import capture  # noqa: E402
from headtrace.models import families
from headtrace.probe import synthetic


def build_model(n_layers: int, dtype: torch.dtype, device: str) -> torch.nn.Module:
    cfg = transformers.GPTNeoXConfig(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=n_layers, num_attention_heads=8,
        intermediate_size=8192, rotary_pct=0.25, max_position_embeddings=2048, use_parallel_residual=True,
        bos_token_id=0, eos_token_id=0,
    )
    torch.manual_seed(0)
    with torch.device(device):  # random init on the device itself (a 1B model takes long on a CPU)
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
    ap.add_argument("--layers", type=int, default=None, help="default 2 (4 with --families)")
    ap.add_argument("--n", type=int, default=None, help="probe sequences; default 8 (32 with --families)")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=None, help="default 8 (16 with --families)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--skip-lm", action="store_true", help="skip plain-lm and eager-lm (the slow ones on CPU)")
    ap.add_argument("--families", default=None,
                    help="'all' or a comma-separated list: capture / plain backbone per family adapter at "
                         "one small geometry (--layers 4 --heads 8 --hidden 256 --n 32 --batch-size 16 "
                         "unless given)")
    ap.add_argument("--heads", type=int, default=8, help="--families: attention (query) heads")
    ap.add_argument("--hidden", type=int, default=256, help="--families: model width")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    if args.families:
        per_family(args, dtype)
        return
    args.layers, args.n, args.batch_size = args.layers or 2, args.n or 8, args.batch_size or 8
    t0 = time.perf_counter()
    model = build_model(args.layers, dtype, args.device)
    family = families.get("gpt_neox")
    batch = synthetic.make_batch(n_sequences=args.n, seq_len=args.seq_len)
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
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    results = timed_rounds(runs, args.device, args.warmup, args.repeats)
    for name, ts in results.items():
        print(f"  {name:<15} best {min(ts):8.3f}s  median {statistics.median(ts):8.3f}s  "
              f"({min(ts) / args.n * 1e3:.2f} ms per sequence; x 2000 = {min(ts) / args.n * 2000:.1f} s)")
    if args.device.startswith("cuda"):
        print(f"peak GPU memory (all methods) = {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")

    best = {k: min(v) for k, v in results.items()}
    print("ratios (best times):")
    print(f"  capture / plain-backbone = {best['capture'] / best['plain-backbone']:.3f}  (capture overhead; target <= 1.3)")
    if "plain-lm" in best:
        print(f"  capture / plain-lm       = {best['capture'] / best['plain-lm']:.3f}")
        print(f"  eager-lm / plain-lm      = {best['eager-lm'] / best['plain-lm']:.3f}")


FAMILY_GEOMETRY = dict(layers=4, n=32, batch_size=16)  # --families defaults where not given
VOCAB = 512


def build_family_model(name: str, n_layers: int, n_heads: int, hidden: int, dtype: torch.dtype,
                       device: str) -> torch.nn.Module:
    """A random-init model of family ``name`` built as tests/tiny.py builds it, at this geometry
    (MLP 4 x hidden; olmo3's sliding window 128 so that it bites on a 256-token probe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import tiny

    cfg = tiny.tiny_config(name, vocab_size=VOCAB, n_layers=n_layers, n_heads=n_heads, d_model=hidden)
    if name == "gpt2":
        cfg.n_inner = 4 * hidden
    else:
        cfg.intermediate_size = 4 * hidden
    if getattr(cfg, "sliding_window", None):
        cfg.sliding_window = 128
    for key in ("max_position_embeddings", "n_positions"):
        if hasattr(cfg, key):
            setattr(cfg, key, 2048)
    torch.manual_seed(0)
    return tiny.CLASSES[name][1](cfg).eval().to(device=device, dtype=dtype)


def per_family(args, dtype: torch.dtype) -> None:
    """capture / plain backbone forward for every family adapter at one geometry; a markdown table."""
    layers = args.layers or FAMILY_GEOMETRY["layers"]
    n = args.n or FAMILY_GEOMETRY["n"]
    bs = args.batch_size or FAMILY_GEOMETRY["batch_size"]
    names = list(families.FAMILIES) if args.families == "all" else args.families.split(",")
    batch = synthetic.make_batch(n_sequences=n, seq_len=args.seq_len, token_range=(3, VOCAB))
    tokens = torch.from_numpy(batch.tokens)
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    print(f"geometry: {layers} layers, {args.heads} heads, hidden {args.hidden}, MLP {4 * args.hidden}, "
          f"vocab {VOCAB}; probe n={n} T={args.seq_len} batch_size={bs}; {args.dtype} on {args.device}; "
          f"torch threads={torch.get_num_threads()}; {args.warmup} warm-up + {args.repeats} rounds, best; "
          f"load average at start {load0[0]:.2f} (1 min) on {os.cpu_count()} CPUs", flush=True)
    rows = []
    for name in names:
        model = build_family_model(name, layers, args.heads, args.hidden, dtype, args.device)
        family = families.get(name)
        attn_impl = model.config._attn_implementation

        def plain_backbone(model=model, family=family):
            with torch.inference_mode():
                for s in range(0, n, bs):
                    family.backbone(model)(input_ids=tokens[s:s + bs].to(args.device), use_cache=False)

        def run_capture(model=model, family=family):
            capture.run(model, family, batch, batch_size=bs, device=args.device, progress=False)

        print(f"{name} ({type(model).__name__}, attention {attn_impl}):", flush=True)
        res = timed_rounds([("plain-backbone", plain_backbone), ("capture", run_capture)], args.device,
                           args.warmup, args.repeats)
        best = {k: min(v) for k, v in res.items()}
        rows.append((name, type(model).__name__, best["capture"], best["plain-backbone"],
                     best["capture"] / best["plain-backbone"]))
        del model
    load1 = os.getloadavg()
    print(f"\n{time.perf_counter() - t_start:.0f} s in all; load average at the end {load1[0]:.2f} (1 min), "
          f"{load1[1]:.2f} (5 min)\n")
    print("| family | class | capture ms | plain forward ms | capture / plain |")
    print("|---|---|---:|---:|---:|")
    for name, cls, cap, plain, ratio in rows:
        print(f"| `{name}` | {cls} | {cap * 1e3:.0f} | {plain * 1e3:.0f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
