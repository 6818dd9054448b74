"""Benchmark a job in its own process against the same job in a fork of the warm server.

The job is a toy-neox capture cell as the workflow runs it, minus Snakemake: a script that first
offers itself to the server (``warm.delegate()``), imports torch, transformers and headtrace, builds
a random-init GPT-NeoX at toy-neox's geometry (4 layers x 12 heads, hidden 192, vocab 258) and runs
``capture.run`` on the demo's probe shape (``--n`` x 128 tokens) on one thread. Cold and warm runs
alternate, round by round, against one server started here; prints the median wall time of each
(the job's whole process, start-up included) and the ratio.

    .venv/bin/python benchmarks/warm.py [--rounds 5] [--n 256]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from headtrace.runtime import warm

JOB = """\
from headtrace.runtime import warm
warm.delegate()
import sys, torch, transformers
from headtrace.cell import capture
from headtrace.models import families
from headtrace.probe import synthetic
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = transformers.GPTNeoXConfig(vocab_size=258, hidden_size=192, num_hidden_layers=4, num_attention_heads=12,
                                 intermediate_size=384, max_position_embeddings=256, rotary_pct=1.0)
model = transformers.GPTNeoXForCausalLM(cfg).eval()
batch = synthetic.make_batch(n_sequences=int(sys.argv[1]), seq_len=128, token_range=(32, 127),
                             ab_range=(64, 108))
capture.run(model, families.get("gpt_neox"), batch, batch_size=64, device="cpu", progress=False)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=256, help="probe sequences of 128 tokens (the demo's: 256)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="headtrace-warm-bench-"))
    (folder / "job.py").write_text(JOB)
    socket_path = str(folder / "socket")
    one_thread = {k: "1" for k in warm.THREAD_ENV}
    server = warm.start(socket_path)
    try:
        while not os.path.exists(socket_path):
            if server.poll() is not None:
                sys.exit("the warm server did not start")
            time.sleep(0.05)
        cold_env = {**os.environ, **one_thread}
        cold_env.pop(warm.ENV, None)
        times: dict[str, list[float]] = {"own process": [], "warm fork": []}
        for _ in range(args.rounds):
            for label, env in (("own process", cold_env), ("warm fork", {**cold_env, warm.ENV: socket_path})):
                start = time.perf_counter()
                subprocess.run([sys.executable, "job.py", str(args.n)], cwd=folder, env=env, check=True)
                times[label].append(time.perf_counter() - start)
    finally:
        server.terminate()
        server.wait()
    cold, hot = (statistics.median(times[k]) for k in ("own process", "warm fork"))
    print(f"toy-neox capture job, {args.n} x 128 tokens, one thread; medians of {args.rounds} alternating rounds")
    print(f"  own process {cold:.2f} s   warm fork {hot:.2f} s   warm / own = {hot / cold:.3f}")


if __name__ == "__main__":
    main()
