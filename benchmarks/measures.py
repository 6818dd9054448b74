"""Cost of the field's own measures (docs/measures.md) against the synthetic capture pass, in one process.

The demo's geometry by default: a random-init GPT-NeoX like toy-neox (4 layers x 12 heads, hidden 192,
MLP 384, vocab 258), the demo's synthetic probe (256 x 128 tokens, batch 64) as the baseline, and the
default new probes: the repeated-random probe (50 x 64 tokens, sink alpha + prefix matching) and the
text probe (100 x 64 byte tokens of the demo's corpus, resources/text-probe/prose.jsonl, sink alpha). Every method is warmed up once, then run
``--repeats`` times round-robin; the ratios are of the medians, printed against the baseline:

  baseline   headtrace.cell.capture.run on the synthetic probe (head outputs + class masses)
  repeated   headtrace.cell.patterns.run on the repeated-random probe, prefix=True
  text       headtrace.cell.patterns.run on the text probe
  copying    headtrace.cell.patterns.copying: every head's OV copying score from the weights
  measures   repeated + text + copying: what one capture job adds (headtrace.cell.patterns.cell_measures)

Usage: .venv/bin/python benchmarks/measures.py [--threads 1] [--repeats 5] [--layers 4] [--heads 12]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from headtrace.cell import capture, patterns  # noqa: E402
from headtrace.models import families, tokenize  # noqa: E402
from headtrace.probe import repeated, synthetic, texts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = transformers.GPTNeoXConfig(vocab_size=258, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                     num_attention_heads=args.heads, intermediate_size=2 * args.hidden,
                                     max_position_embeddings=256, rotary_pct=0.25, bos_token_id=256, eos_token_id=257)
    model = transformers.GPTNeoXForCausalLM(cfg).eval()
    family = families.get("gpt_neox")
    induction = synthetic.make_batch(n_sequences=256, seq_len=128, token_range=(32, 127), seed=42, ab_range=(64, 108))
    repeats = repeated.repeated_random(n_sequences=50, length=32, repeats=2, token_range=(32, 127))
    docs = texts.read_documents(str(ROOT / "resources" / "text-probe" / "prose.jsonl"))
    text = tokenize.text_sequences(docs, tokenize.ByteTokenizer(), 64, 100).tokens
    bs = args.batch_size
    runs = {
        "baseline": lambda: capture.run(model, family, induction, batch_size=bs, progress=False),
        "repeated": lambda: patterns.run(model, family, repeats, batch_size=bs, prefix=True),
        "text": lambda: patterns.run(model, family, text, batch_size=bs),
        "copying": lambda: patterns.copying(model, family),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for f in runs.values():  # warm-up
        f()
    for _ in range(args.repeats):
        for name, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    med["measures"] = med["repeated"] + med["text"] + med["copying"]
    print(f"# {args.layers} layers x {args.heads} heads, hidden {args.hidden}, {args.threads} thread(s), "
          f"median of {args.repeats}; synthetic {synthetic.tokens.shape}, repeated {repeated.shape}, text {text.shape}")
    for name in ("baseline", "repeated", "text", "copying", "measures"):
        print(f"{name:9s} {1000 * med[name]:8.1f} ms   / baseline = {med[name] / med['baseline']:.3f}")


if __name__ == "__main__":
    main()
