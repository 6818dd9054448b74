"""Benchmark the batched ablation engine against n_conditions plain forward passes.

Random-init toy model (default GPT-NeoX 2 layers x 128 hidden x 4 heads, vocab 300, T=128,
n=256), a fake screen (induction circuit in the last layer, previous-token circuit in layer 0,
final circuit one last-layer head), the default ~45-condition set. Prints
ratio = time(ablation.run) / (n_conditions x time(one plain forward of the batch)); target <= 0.6.

    .venv/bin/python benchmarks/ablation.py [--family olmo] [--check]
"""
from __future__ import annotations

import argparse
import time

import polars as pl
import torch
import transformers

from headtrace import ablation, families, probe


def toy_model(family: str, vocab: int, layers: int, hidden: int, heads: int, seq_len: int, seed: int):
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=4 * hidden, max_position_embeddings=max(seq_len, 256),
                  bos_token_id=0, eos_token_id=1, pad_token_id=1)
    if family == "gpt_neox":
        cfg, cls = transformers.GPTNeoXConfig(**common, rotary_pct=0.25), transformers.GPTNeoXForCausalLM
    elif family == "olmo":
        cfg, cls = transformers.OlmoConfig(**common, num_key_value_heads=heads), transformers.OlmoForCausalLM
    elif family == "olmoe":
        cfg = transformers.OlmoeConfig(**common, num_key_value_heads=heads, num_experts=8, num_experts_per_tok=2)
        cls = transformers.OlmoeForCausalLM
    else:
        raise SystemExit(f"unknown family {family}")
    return cls(cfg).eval()


def fake_screen(layers: int, heads: int, circuit: list[tuple[int, int]], prev: list[tuple[int, int]]) -> pl.DataFrame:
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
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="gpt_neox", choices=["gpt_neox", "olmo", "olmoe"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-rows", type=int, default=None, help="rows per branch call (default batch size)")
    ap.add_argument("--n-random", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2, help="best of this many timings")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--check", action="store_true", help="also compare against the naive engine")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model = toy_model(args.family, args.vocab, args.layers, args.hidden, args.heads, args.seq_len, 0).to(args.device)
    family = families.get(args.family)
    batch = probe.make_batch(n_sequences=args.n, seq_len=args.seq_len, token_low=10, token_high=args.vocab,
                             ab_low=20, ab_high=min(100, args.seq_len - 7))
    last = args.layers - 1
    circuit = [(last, 0), (last, 1)]
    prev = [(0, args.heads - 1)]
    screen = fake_screen(args.layers, args.heads, circuit, prev)
    conds = ablation.build_conditions(screen, args.heads, final_circuit=[(last, 0)], n_random=args.n_random)
    tokens = torch.as_tensor(batch.tokens)

    def plain():
        with torch.inference_mode():
            for s in range(0, args.n, args.batch_size):
                model(input_ids=tokens[s:s + args.batch_size].to(args.device), use_cache=False)

    def engine():
        return ablation.run(model, family, batch, conds, batch_size=args.batch_size, device=args.device,
                            progress=False, max_rows=args.max_rows)

    plain(), engine()  # warm-up
    t_plain = timed(plain, args.repeats)
    t_engine = timed(engine, args.repeats)
    ratio = t_engine / (len(conds) * t_plain)
    print(f"family={args.family} layers={args.layers} hidden={args.hidden} heads={args.heads} vocab={args.vocab} "
          f"T={args.seq_len} n={args.n} batch_size={args.batch_size} threads={torch.get_num_threads()}")
    print(f"conditions={len(conds)}  plain forward={t_plain * 1e3:.1f} ms  ablation run={t_engine * 1e3:.1f} ms")
    print(f"ratio = run / (conditions x plain forward) = {ratio:.3f}  (target <= 0.6)")
    if args.check:
        fast, naive = engine(), ablation.run_naive(model, family, batch, conds, batch_size=args.batch_size,
                                                   device=args.device)
        worst = max(abs(a[m] - b[m]) for a, b in zip(fast, naive) for m in ablation.METRICS)
        print(f"check vs naive: max |difference| over conditions and metrics = {worst:.2e}")


if __name__ == "__main__":
    main()
