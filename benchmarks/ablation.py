"""Benchmark the batched ablation engine against the naive one and against the method's floor.

Random-init model of a family, a fake screen, the default condition set (the cell circuit, the
final circuit and the previous-token circuit, each with K matched sets and an upper bound). Prints

    naive ratio = time(ablation.run) / (n_conditions x time(one plain forward of the batch))
    floor ratio = time(ablation.run) / (floor x time(one plain forward))

where floor = ablation.floor_layer_passes: one baseline pass plus, per distinct head set, the share
of layers after its first ablated one (each condition must recompute those, up to the query).

Geometries:
  --geometry toy        (default) 2 layers x 4 heads, the induction circuit in the last layer
                        (the cheapest case), previous-token circuit in layer 0.
  --geometry pythia-1b  Pythia-1B's 16 layers x 8 heads at narrow widths (hidden 128, so it runs on
                        a CPU), the published induction circuit L4H4 L7H0 L7H1 and the published
                        previous-token circuit L1H3 L2H1 L2H3 L2H5 L3H2 L3H5 L3H6 L6H3.
  --geometry olmo-1b / olmoe-1b-7b   16 x 16 with those models' published circuits.
  Real sizes (GPU; benchmarks/gpu.sh): --hidden 2048 --vocab 50304 --seq-len 256 --n 2000, OLMoE
  --intermediate 1024 --experts 64 --experts-per-tok 8, OLMo/OLMoE --dtype fp16.
  --final other|same    the final circuit differs from the cell circuit (its own controls cost
                        K+1 more head sets: the case of every non-final revision) or equals it
                        (the final revision: its controls are the cell circuit's, shared).

    .venv/bin/python benchmarks/ablation.py --geometry pythia-1b [--final same] [--check]
    .venv/bin/python benchmarks/ablation.py --geometry pythia-1b --device cuda --hidden 2048 --seq-len 256 --n 2000

GPU figures (one H200, benchmarks/gpu.sh): docs/performance.md#gpu and benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl
import torch
import transformers

from headtrace.causal import ablation
from headtrace.core.heads import as_heads
from headtrace.models import families
from headtrace.probe import synthetic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from naive_ablation import run_naive  # noqa: E402  (the test oracle)

PYTHIA_INDUCTION = ["L4H4", "L7H0", "L7H1"]
PYTHIA_PREV = ["L1H3", "L2H1", "L2H3", "L2H5", "L3H2", "L3H5", "L3H6", "L6H3"]
PYTHIA_OTHER_FINAL = ["L5H2", "L7H0", "L8H6"]  # a final circuit unlike the cell's (non-final revision)
# The published final circuits of the other two models (prev_token_circuit/*_ablation.json), 16 x 16.
REAL = {
    "pythia-1b": dict(family="gpt_neox", layers=16, heads=8, circuit=PYTHIA_INDUCTION, prev=PYTHIA_PREV,
                      other=PYTHIA_OTHER_FINAL),
    "olmo-1b": dict(family="olmo", layers=16, heads=16, circuit=["L2H11", "L4H12", "L12H8"],
                    prev=["L0H5", "L0H6", "L0H12", "L1H1", "L1H2", "L1H5", "L1H7", "L1H14", "L11H10"],
                    other=["L3H1", "L4H12", "L9H3"]),
    "olmoe-1b-7b": dict(family="olmoe", layers=16, heads=16, circuit=["L5H10", "L7H0", "L9H8", "L12H14"],
                        prev=["L0H1", "L0H5", "L1H5", "L2H6", "L4H12", "L6H6", "L8H10", "L8H13"],
                        other=["L5H3", "L7H0", "L10H2", "L12H14"]),
}


def toy_model(family: str, vocab: int, layers: int, hidden: int, heads: int, seq_len: int, seed: int,
              intermediate: int | None = None, experts: int = 8, experts_per_tok: int = 2):
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=intermediate or 4 * hidden, max_position_embeddings=max(seq_len, 256),
                  bos_token_id=0, eos_token_id=1, pad_token_id=1)
    if family == "gpt_neox":
        cfg, cls = transformers.GPTNeoXConfig(**common, rotary_pct=0.25), transformers.GPTNeoXForCausalLM
    elif family == "olmo":
        cfg, cls = transformers.OlmoConfig(**common, num_key_value_heads=heads), transformers.OlmoForCausalLM
    elif family == "olmoe":
        cfg = transformers.OlmoeConfig(**common, num_key_value_heads=heads, num_experts=experts,
                                       num_experts_per_tok=experts_per_tok)
        cls = transformers.OlmoeForCausalLM
    else:
        raise SystemExit(f"unknown family {family}")
    return cls(cfg).eval()


def fake_screen(layers: int, heads: int, circuit, prev) -> pl.DataFrame:
    circuit, prev = set(as_heads(circuit)), set(as_heads(prev))
    rows = []
    for l in range(layers):
        for h in range(heads):
            ind = 80.0 if (l, h) in circuit else 2.0
            is_prev = (l, h) in prev
            rows.append({"layer": l, "head": h, "sel_induction": ind,
                         "best_class": "previous-token" if is_prev else ("induction" if ind >= 30 else "unclassified"),
                         "best_selectivity": 150.0 if is_prev else ind})
    return pl.DataFrame(rows)


def timed(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--geometry", default="toy", choices=["toy", *REAL])
    ap.add_argument("--intermediate", type=int, default=None, help="MLP width (default 4 x hidden)")
    ap.add_argument("--experts", type=int, default=8, help="OLMoE experts (the real model: 64)")
    ap.add_argument("--experts-per-tok", type=int, default=2, help="OLMoE active experts (the real model: 8)")
    ap.add_argument("--final", default="other", choices=["other", "same"])
    ap.add_argument("--family", default=None, choices=["gpt_neox", "olmo", "olmoe"],
                    help="default: gpt_neox (toy), the model's family (real geometries)")
    ap.add_argument("--layers", type=int, default=None, help="default: 2 (toy), 16 (pythia-1b)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=None, help="default: 4 (toy), 8 (pythia-1b)")
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-rows", type=int, default=None, help="rows per branch call (default batch size)")
    ap.add_argument("--n-random", type=int, default=20)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--repeats", type=int, default=2, help="best of this many timings")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of both on the first batch_size sequences")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--check", action="store_true", help="also compare against the naive engine")
    ap.add_argument("--tf32", action="store_true",
                    help="CUDA fp32 matmuls in TF32 (torch.backends.cuda.matmul.allow_tf32; not a headtrace setting)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    real = REAL.get(args.geometry)
    args.family = args.family or (real["family"] if real else "gpt_neox")
    layers = args.layers or (real["layers"] if real else 2)
    heads = args.heads or (real["heads"] if real else 4)
    if real:
        circuit, prev = real["circuit"], real["prev"]
        final = circuit if args.final == "same" else real["other"]
    else:
        last = layers - 1
        circuit, prev = [(last, 0), (last, 1)], [(0, heads - 1)]
        final = circuit if args.final == "same" else [(last, 0)]
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    with torch.device(args.device):  # random init on the device itself (minutes on a CPU at the real sizes)
        model = toy_model(args.family, args.vocab, layers, args.hidden, heads, args.seq_len, 0, args.intermediate,
                          args.experts, args.experts_per_tok).to(args.device, dtype)
    family = families.get(args.family)
    batch = synthetic.make_batch(n_sequences=args.n, seq_len=args.seq_len, token_range=(10, args.vocab),
                                 ab_range=(20, min(100, args.seq_len - 7)))
    screen = fake_screen(layers, heads, circuit, prev)
    conds = ablation.build_conditions(screen, heads, final_circuit=final, n_random=args.n_random)
    n_sets = len(ablation._distinct_sets(conds)[0])
    floor = ablation.floor_layer_passes(conds, layers)
    tokens = torch.as_tensor(batch.tokens)

    def plain(n=args.n):
        with torch.inference_mode():
            for s in range(0, n, args.batch_size):
                model(input_ids=tokens[s:min(s + args.batch_size, n)].to(args.device), use_cache=False)

    def engine(batch=batch):
        return ablation.run(model, family, batch, conds, batch_size=args.batch_size, device=args.device,
                            progress=False, max_rows=args.max_rows)

    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):  # on the first batch_size sequences: the same shapes, a fraction of the time
        plain(min(args.n, args.batch_size)), engine(batch.head(min(args.n, args.batch_size)))
    t_plain = timed(plain, args.repeats)
    t_engine = timed(engine, args.repeats)
    naive_ratio = t_engine / (len(conds) * t_plain)
    floor_ratio = t_engine / (floor * t_plain)
    print(f"geometry={args.geometry} final={args.final} family={args.family} layers={layers} hidden={args.hidden} "
          f"heads={heads} vocab={args.vocab} T={args.seq_len} n={args.n} batch_size={args.batch_size} "
          f"dtype={args.dtype}{' (TF32 matmuls)' if args.tf32 else ''} device={args.device} "
          f"threads={torch.get_num_threads()}")
    print(f"circuit={' '.join(map(str, circuit))}  final={' '.join(map(str, final))}  prev-token={' '.join(map(str, prev))}")
    print(f"conditions={len(conds)} distinct head sets={n_sets}  plain forward={t_plain * 1e3:.1f} ms  "
          f"ablation run={t_engine * 1e3:.1f} ms")
    print(f"per sequence: plain forward {t_plain / args.n * 1e3:.2f} ms, "
          f"ablation run {t_engine / args.n * 1e3:.2f} ms; "
          f"a 2000-sequence cell ~ {t_engine / args.n * 2000:.0f} s (linear extrapolation from n={args.n})")
    print(f"naive ratio = run / (conditions x plain forward) = {naive_ratio:.3f}")
    print(f"floor = {floor:.2f} plain passes ({floor / len(conds):.3f} of naive); run / floor = {floor_ratio:.3f}")
    if args.device.startswith("cuda"):
        print(f"peak GPU memory = {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    if args.check:
        fast, naive = engine(), run_naive(model, family, batch, conds, batch_size=args.batch_size, device=args.device)
        worst = max(abs(a[m] - b[m]) for a, b in zip(fast, naive) for m in ablation.METRICS)
        print(f"check vs naive: max |difference| over conditions and metrics = {worst:.2e}")


if __name__ == "__main__":
    main()
