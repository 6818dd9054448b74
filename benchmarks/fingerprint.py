"""Cost of the fingerprint table against the capture pass it rides along with, in one process.

A random-init GPT-NeoX at Pythia-1B's widths (hidden 2048, 8 heads, MLP 8192, vocab 50304,
rotary_pct 0.25; ``--layers`` 16 is the 1B model itself, fewer layers a proportionally smaller
one) is saved as safetensors (``--dtype``), loaded back as the capture job loads it
(``headtrace.models.hub.load_model``), and then, alternating round-robin ``--repeats`` times:

  capture      headtrace.cell.capture.run on a short synthetic probe (``--n`` x ``--seq-len``)
  fingerprint  what the capture job adds: provenance.file_hashes (sha256 of every weight file)
               + fingerprint.fingerprint_rows (per tensor: digest, norm, 64-bucket sketch)

and, once each, the parts of the fingerprint: file sha256, tensor digests, sketch + norm, reported
in ns per stored element. Prints fingerprint / capture (best and median). The load time printed
is that of a memory-mapped load: the weights' pages are read later, by the first forward pass.

Usage: .venv/bin/python benchmarks/fingerprint.py [--layers 16] [--n 8] [--seq-len 256] [--threads 1]
(16 layers: ~4 GB of fp32 weights in a temporary folder, a few minutes on one CPU core.)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from headtrace.cell import capture  # noqa: E402
from headtrace.models import families, fingerprint, hub, provenance, weights  # noqa: E402
from headtrace.probe import synthetic


def build(folder: Path, n_layers: int, dtype: torch.dtype) -> None:
    cfg = transformers.GPTNeoXConfig(
        vocab_size=50304, hidden_size=2048, num_hidden_layers=n_layers, num_attention_heads=8,
        intermediate_size=8192, rotary_pct=0.25, max_position_embeddings=2048, use_parallel_residual=True,
        bos_token_id=0, eos_token_id=0,
    )
    torch.manual_seed(0)
    transformers.GPTNeoXForCausalLM(cfg).to(dtype).save_pretrained(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the capture rule runs with 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="headtrace-fp-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        build(folder, args.layers, hub.DTYPES[args.dtype])
        print(f"built and saved {args.layers}-layer model in {time.perf_counter() - t0:.1f}s", flush=True)
        t0 = time.perf_counter()
        model, fam = hub.load_model("local", str(folder), "bench", dtype=args.dtype)
        t_load = time.perf_counter() - t0
        family = families.get(fam)
        n_params = sum(p.numel() for p in model.parameters())
        fmt, files = weights.weight_files(folder)
        size = sum(f.stat().st_size for f in files)
        print(f"{n_params / 1e9:.3f} B parameters, {size / 1e9:.2f} GB in {len(files)} {fmt} file(s); "
              f"load {t_load:.1f}s; probe {args.n} x {args.seq_len}; torch threads {torch.get_num_threads()}",
              flush=True)
        batch = synthetic.make_batch(n_sequences=args.n, seq_len=args.seq_len)

        def run_capture():
            capture.run(model, family, batch, batch_size=args.batch_size, device="cpu", progress=False)

        def run_fingerprint():
            f, fs, hashes = provenance.file_hashes(folder)
            return fingerprint.fingerprint_rows(fs, "bench", "r", f, hashes)

        runs = [("capture", run_capture), ("fingerprint", run_fingerprint)]
        for _, fn in runs:  # warm-up (and the page cache)
            fn()
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        for r in range(args.repeats):
            for name, fn in runs:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            print(f"  round {r + 1}/{args.repeats}: "
                  + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)

        # the parts, once each, per stored element
        n_el = 0
        t_file = t_digest = t_sketch = 0.0
        for f in files:
            t0 = time.perf_counter()
            provenance.sha256_file(f)
            t_file += time.perf_counter() - t0
            for key, t in fingerprint._tensors(f, fmt):
                n_el += t.numel()
                t0 = time.perf_counter()
                fingerprint.tensor_digest(t)
                t1 = time.perf_counter()
                fingerprint.sketch_and_norm(t, key)
                t_digest += t1 - t0
                t_sketch += time.perf_counter() - t1
        best = {k: min(v) for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"\ncapture     best {best['capture']:.2f}s  median {med['capture']:.2f}s")
        print(f"fingerprint best {best['fingerprint']:.2f}s  median {med['fingerprint']:.2f}s")
        print(f"fingerprint / capture = {best['fingerprint'] / best['capture']:.2f} (best), "
              f"{med['fingerprint'] / med['capture']:.2f} (median)")
        print(f"parts, ns per stored element ({n_el / 1e9:.3f} B): file sha256 {t_file / n_el * 1e9:.1f}, "
              f"tensor digests {t_digest / n_el * 1e9:.1f}, sketch + norm {t_sketch / n_el * 1e9:.1f}")


if __name__ == "__main__":
    main()
