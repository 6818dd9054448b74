"""Correctness of the GPU path: the CPU test suite's three oracles, run with the code under test on ``--device``.

For every family of tests/tiny.py (the tiny random models the CPU tests use, sharpened or boosted as
there), the path under test runs on ``--device`` and its reference runs in fp32 on the CPU:

  capture    headtrace.cell.capture.run masses (every class, both baselines) against full eager
             attention maps reduced by hand (tests/helpers/capture.py); rtol 1e-4, atol 1e-5
  ablation   headtrace.causal.ablation.run against the naive engine (tests/naive_ablation.py), the
             naive one both on the CPU and on ``--device``: every metric, abs 1e-5 (as the tests) on
             the same device; across devices the continuous ones (ce, logit_b) within
             1e-4 x max(1, |value|) (the top-k counts may flip on a near tie; their difference is printed)
  measures   headtrace.cell.patterns.run (sink alpha, prefix matching) against the formulas on eager
             maps (tests/helpers/capture.py); atol 1e-5

then, for the three families of the paper (gpt_neox, olmo, olmoe) at a moderate width (``--width``
hidden, 8 heads, 4 layers, vocab 1024, a 64 x 256 probe), fp16 and bf16 against fp32 on ``--device``:
capture masses within atol 5e-3 (fp16) / 2e-2 (bf16) and the ablation engine's ce and logit_b (baseline
and two ablated conditions) within 5e-2 x max(1, |value|) (fp16) / 1.5e-1 (bf16). These tolerances are set
from the formats' precision (fp16 11 bits, bf16 8 bits of mantissa), not from a run.

Prints one line per check with its largest difference and exits 1 if any check fails, 2 if
``--device cuda`` is asked for and CUDA is not available.

    .venv/bin/python benchmarks/gpu_check.py --device cuda
    .venv/bin/python benchmarks/gpu_check.py --device cpu --width 64     # the dry run (~1 min on a CPU)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
from helpers.ablation import boosted, engine_conditions, small_batch  # noqa: E402  (the tests' setting)
from helpers.capture import MASS_FIELDS  # noqa: E402  (the tests' references)
from helpers.capture import eager_masses as _eager_masses  # noqa: E402
from helpers.capture import eager_patterns as _eager_patterns  # noqa: E402
from helpers.capture import sharpen as _sharpen  # noqa: E402
from naive_ablation import run_naive  # noqa: E402  (the test oracle)
from tiny import CLASSES, FAMILY_NAMES, tiny_config, tiny_model  # noqa: E402

from headtrace.causal import ablation  # noqa: E402
from headtrace.causal.ablation import Condition  # noqa: E402
from headtrace.cell import capture, measures, patterns  # noqa: E402
from headtrace.models import families  # noqa: E402
from headtrace.probe import repeated, synthetic

FAILURES: list[str] = []


def report(label: str, diff: float, ok: bool) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'} {label}: max |difference| {diff:.2e}", flush=True)
    if not ok:
        FAILURES.append(label)


def check_capture(name: str, device: str) -> None:
    batch = synthetic.make_batch(n_sequences=16, seq_len=64, token_range=(2, 128), ab_range=(10, 32))
    model = _sharpen(tiny_model(name))
    family = families.get(name)
    ref = _eager_masses(model, family, batch)  # on the CPU, fp32 eager
    result = capture.run(model.to(device), family, batch, batch_size=16, device=device, progress=False)
    worst, ok = 0.0, ref["_row_max"] > 0.2  # sharpened, so the comparison can fail
    for field in MASS_FIELDS:
        got, want = result.mass(field), ref[field]
        worst = max(worst, float(np.abs(got - want).max()))
        ok &= bool(np.allclose(got, want, rtol=1e-4, atol=1e-5))
    report(f"{name} capture masses on {device} vs eager on cpu", worst, ok)


CONTINUOUS = ("ce", "logit_b")  # the top-k metrics are counts: a near tie may flip across devices or dtypes


def _worst(fast, slow, metrics=ablation.METRICS) -> tuple[float, float]:
    """Largest |difference| over conditions and ``metrics``, and the largest relative to max(1, |value|)."""
    assert [(r["name"], r["draw"], r["heads"]) for r in fast] == [(r["name"], r["draw"], r["heads"]) for r in slow]
    diffs = [(abs(a[m] - b[m]), abs(a[m] - b[m]) / max(1.0, abs(b[m]))) for a, b in zip(fast, slow)
             for m in metrics]
    return max(d for d, _ in diffs), max(r for _, r in diffs)


def check_ablation(name: str, device: str) -> None:
    model, fam, batch = boosted(name), families.get(name), small_batch()
    conds = engine_conditions()
    naive_cpu = run_naive(model, fam, batch, conds, batch_size=4)
    model.to(device)
    fast = ablation.run(model, fam, batch, conds, batch_size=4, max_rows=8, device=device, progress=False)
    naive_dev = run_naive(model, fam, batch, conds, batch_size=4, device=device)
    moved = any(abs(r["ce"] - fast[0]["ce"]) > 1e-3 for r in fast[1:-1])  # the ablations did something
    d, _ = _worst(fast, naive_dev)
    report(f"{name} ablation engine vs naive, both on {device}, every metric", d, d <= 1e-5 and moved)
    d, r = _worst(fast, naive_cpu, CONTINUOUS)
    top = _worst(fast, naive_cpu)[0]
    report(f"{name} ablation engine on {device} vs naive on cpu, ce and logit_b (relative {r:.1e}; "
           f"every metric {top:.1e})", d, r <= 1e-4)


def check_measures(name: str, device: str) -> None:
    tokens = repeated.repeated_random(n_sequences=6, length=20, repeats=3, token_range=(2, 128), seed=3,
                                      prepend_bos=True, bos_token_id=0)
    model = _sharpen(tiny_model(name))
    family = families.get(name)
    ref = _eager_patterns(model, family, tokens)  # on the CPU
    result = patterns.run(model.to(device), family, tokens, batch_size=4, device=device, prefix=True)
    alpha_ref, prefix_ref = measures.sink_alpha_of_pattern(ref), measures.prefix_matching(ref, tokens)
    d = max(float(np.abs(result.alpha - alpha_ref).max()), float(np.abs(result.prefix - prefix_ref).max()))
    report(f"{name} measures (alpha, prefix) on {device} vs eager on cpu", d,
           d <= 1e-5 and ref[:, :, :, -1].max(-1).mean() > 0.2)


TOL = {"fp16": (5e-3, 5e-2), "bf16": (2e-2, 1.5e-1)}  # (capture masses atol, ablation metrics relative)


def _capture_routed(model, family, batch, batch_size: int, device: str, routes: list) -> capture.CaptureResult:
    """capture.run, recording each MoE router's expert choices (sorted top-k indices per token) in
    ``routes``, layer by layer within each forward (no router: nothing recorded)."""
    hooks = [layer.mlp.gate.register_forward_hook(lambda mod, inp, out: routes.append(out[2].sort(-1).values.cpu()))
             for layer in family.layers(model) if hasattr(getattr(getattr(layer, "mlp", None), "gate", None), "top_k")]
    try:
        return capture.run(model, family, batch, batch_size=batch_size, device=device, progress=False)
    finally:
        for hook in hooks:
            hook.remove()


def check_precision(name: str, device: str, width: int) -> None:
    cfg = tiny_config(name, vocab_size=1024, n_layers=4, n_heads=8, d_model=width)
    cfg.intermediate_size = 4 * width
    cfg.max_position_embeddings = 2048
    torch.manual_seed(0)
    model = _sharpen(CLASSES[name][1](cfg).eval(), factor=3.0).to(device)
    family = families.get(name)
    batch = synthetic.make_batch(n_sequences=64, seq_len=256, token_range=(3, 1024))
    conds = [Condition("baseline"), Condition("L3", 0, ((3, 0), (3, 5))), Condition("L1", 0, ((1, 2),))]
    bs = 16 if device.startswith("cuda") else 8
    routes: dict[str, list[torch.Tensor]] = {}
    ref = _capture_routed(model, family, batch, bs, device, routes.setdefault("fp32", []))
    ref_ab = ablation.run(model, family, batch, conds, batch_size=bs, device=device, progress=False)
    fp32_state = {k: v.clone() for k, v in model.state_dict().items()}
    for dtype_name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        model.to(torch.float32).load_state_dict(fp32_state)  # each format rounds the fp32 weights, not the other's
        low = model.to(dtype)
        got = _capture_routed(low, family, batch, bs, device, routes.setdefault(dtype_name, []))
        d = max(float(np.abs(got.mass(f) - ref.mass(f)).max()) for f in MASS_FIELDS)
        report(f"{name} width {width} capture masses {dtype_name} vs fp32 on {device}", d, d <= TOL[dtype_name][0])
        per_layer = [max(float(np.abs(got.mass(f)[layer] - ref.mass(f)[layer]).max()) for f in MASS_FIELDS)
                     for layer in range(cfg.num_hidden_layers)]
        print(f"       per layer: {' '.join(f'{x:.1e}' for x in per_layer)}", flush=True)
        if routes[dtype_name]:  # MoE: the share of tokens routed to another expert set than in fp32, per layer
            flips = [float((torch.cat(routes["fp32"][layer::cfg.num_hidden_layers])
                            != torch.cat(routes[dtype_name][layer::cfg.num_hidden_layers])).any(-1).float().mean())
                     for layer in range(cfg.num_hidden_layers)]
            shares = " ".join(f"{x:.3f}" for x in flips)
            print(f"       tokens whose expert set differs from fp32's, per layer: {shares}", flush=True)
        ab = ablation.run(low, family, batch, conds, batch_size=bs, device=device, progress=False)
        d, r = _worst(ab, ref_ab, CONTINUOUS)
        top = _worst(ab, ref_ab)[0]
        report(f"{name} width {width} ablation ce and logit_b {dtype_name} vs fp32 on {device} (relative {r:.1e}; "
               f"every metric {top:.1e})", d, r <= TOL[dtype_name][1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--families", default="all", help="'all' (tests/tiny.py FAMILY_NAMES) or a comma-separated list")
    ap.add_argument("--width", type=int, default=1024, help="hidden size of the fp16/bf16 vs fp32 models")
    ap.add_argument("--precision-families", default="gpt_neox,olmo,olmoe",
                    help="families of the fp16/bf16 vs fp32 check ('' to skip it)")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_check: --device {args.device} asked for, but torch {torch.__version__} sees no CUDA device",
              file=sys.stderr)
        sys.exit(2)
    names = list(FAMILY_NAMES) if args.families == "all" else args.families.split(",")
    unknown = sorted(set(names) - set(FAMILY_NAMES))
    if unknown:
        sys.exit(f"gpu_check: unknown families {unknown}; tests/tiny.py has {list(FAMILY_NAMES)}")
    t0 = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        print(f"{name}:", flush=True)
        check_capture(name, args.device)
        check_ablation(name, args.device)
        check_measures(name, args.device)
        print(f"  ({time.perf_counter() - t:.1f} s)", flush=True)
    for name in filter(None, args.precision_families.split(",")):
        t = time.perf_counter()
        print(f"{name} fp16/bf16 vs fp32:", flush=True)
        check_precision(name, args.device, args.width)
        print(f"  ({time.perf_counter() - t:.1f} s)", flush=True)
    print(f"gpu_check: {len(FAILURES)} failed check(s) in {time.perf_counter() - t0:.0f} s"
          + (": " + "; ".join(FAILURES) if FAILURES else ""), flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
