#!/usr/bin/env bash
# The prepared GPU check: correctness of the CUDA path, then timings of random-init models at the real
# sizes, in one run of at most BUDGET seconds (540 by default; each section has its own timeout,
# clipped to what is left). Run from anywhere: `bash benchmarks/gpu.sh` (OUT: where the log goes).
#
#   0 setup     if .whl/site.tar.xz exists (the pinned polars, polars-runtime-32, transformers,
#               huggingface_hub and what they import that a bare machine may lack, unpacked from
#               their wheels and packed with xz to fit the transfer; .whl/MANIFEST lists the wheels
#               and their sha256), it is unpacked into /tmp/site, and any .whl/*.whl installed there
#               with pip --no-index; /tmp/site then goes first on PYTHONPATH. Without .whl/ the
#               machine's own packages are used. Prints the versions and the device.
#   1 check     benchmarks/gpu_check.py: for every family of tests/tiny.py, capture masses vs eager,
#               the ablation engine vs the naive one, the measures vs eager (path under test on the
#               device, references on the CPU); fp16/bf16 vs fp32 for gpt_neox, olmo, olmoe (width 1024)
#   2 capture   benchmarks/capture.py: Pythia-1B widths, 16 layers, fp32, 128 x 256 (plain backbone,
#               capture, plain LM, eager + output_attentions; 1 warm-up + 1 round)
#   3-7 ablation benchmarks/ablation.py at the real widths (hidden 2048, vocab 50304, T 256, the
#               default 67 conditions): Pythia-1B fp32 on 16 sequences (then bf16, then fp32 with
#               TF32 matmuls), OLMo-1B fp16 on 128,
#               OLMoE-1B-7B fp16 (64 experts, 8 active) on 32; warm-up on the first batch; prints the
#               per-sequence rate and its linear extrapolation to the paper's 2000-sequence cell
#   8 autobatch hub.auto_batch_size on Pythia-1B fp32 at T 256, then capture and a 2-condition
#               ablation at that batch size: peak memory against the device's total
# Every section prints its wall time and peak GPU memory; the log is $OUT/gpu.log, one line per
# section in $OUT/summary.txt. Exit status 1 if any section failed or timed out.
#
# Switches: DEVICE (cuda), SMALL=1 (tiny sizes: the CPU dry run), PY (python3), WHL (.whl),
# BUDGET (540 s; with SMALL=1 1500 s and every timeout x 4). The CPU dry run:
#   DEVICE=cpu SMALL=1 OUT=/tmp/gpu-out PY=.venv/bin/python bash benchmarks/gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}; DEVICE=${DEVICE:-cuda}; SMALL=${SMALL:-0}; PY=${PY:-python3}; WHL=${WHL:-.whl}
BUDGET=${BUDGET:-540} TMULT=1
[[ $SMALL == 1 ]] && BUDGET=${BUDGET_SMALL:-1500} TMULT=4  # a shared CPU is slower than the GPU these limits fit
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu.log") 2>&1
TEE=$!
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
: > "$OUT/summary.txt"
FAILED=0

section() {  # section NAME TIMEOUT_S command...
  local name=$1 limit=$(($2 * TMULT)); shift 2
  local left=$((BUDGET - SECONDS))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    echo "== $name: skipped (budget of $BUDGET s spent)"; echo "$name skipped" >> "$OUT/summary.txt"; FAILED=1; return
  fi
  echo; echo "== $name (timeout ${limit} s): $*"
  local t0=$SECONDS rc=0
  timeout "$limit" "$@" || rc=$?
  local line="$name rc=$rc wall=$((SECONDS - t0))s"
  ((rc == 124)) && line="$line TIMED OUT"
  echo "== $line"; echo "$line" >> "$OUT/summary.txt"
  ((rc != 0)) && FAILED=1
  return 0
}

if [[ -d $WHL ]]; then
  t0=$SECONDS
  mkdir -p /tmp/site
  [[ -f $WHL/site.tar.xz ]] && tar -xJf "$WHL/site.tar.xz" -C /tmp/site
  if compgen -G "$WHL/*.whl" > /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHL"/*.whl
  fi
  export PYTHONPATH=/tmp/site:$PYTHONPATH
  echo "setup: $WHL unpacked into /tmp/site in $((SECONDS - t0)) s"
else
  echo "setup: no $WHL/: the machine's own packages"
fi
versions() { $PY -c "
import sys, torch, transformers, huggingface_hub, polars
print('python', sys.version.split()[0], '| torch', torch.__version__, '| transformers', transformers.__version__,
      '| huggingface_hub', huggingface_hub.__version__, '| polars', polars.__version__)
print('cuda', torch.version.cuda, '| available', torch.cuda.is_available(),
      '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device',
      '| TF32 matmul', torch.backends.cuda.matmul.allow_tf32)
"; }
if ! versions; then
  [[ $PYTHONPATH == /tmp/site:* ]] || { echo "setup: the imports failed"; exit 1; }
  export PYTHONPATH=$PWD/src
  echo "setup: the imports failed with /tmp/site; falling back to the machine's own packages"
  versions || { echo "setup: the imports failed"; exit 1; }
fi

if [[ $SMALL == 1 ]]; then  # the dry run: every code path, tiny sizes
  CHECK="--width 64 --precision-families gpt_neox"
  CAPTURE="--layers 2 --n 4 --seq-len 256 --batch-size 4"
  REAL="--hidden 64 --vocab 300 --seq-len 32 --n 8 --batch-size 4"
  HALF=fp32  # half precision is slow on a CPU; gpu_check's fp16/bf16 check runs its code path
  PYTHIA="" OLMO="" OLMOE="--intermediate 64 --experts 8 --experts-per-tok 2"
  AUTO="dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, intermediate_size=256, vocab_size=300)"
else
  CHECK="--width 1024" HALF=fp16
  CAPTURE="--layers 16 --n 128 --seq-len 256 --batch-size 64"
  REAL="--hidden 2048 --vocab 50304 --seq-len 256"
  # ~1 min each on an H200 by FLOPs: ~55-60 plain passes per run (the floor) plus a one-batch warm-up
  PYTHIA="--n 16 --batch-size 8" OLMO="--n 128 --batch-size 32" OLMOE="--n 32 --batch-size 16"
  OLMOE="$OLMOE --intermediate 1024 --experts 64 --experts-per-tok 8"
  AUTO="dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=8, intermediate_size=8192, vocab_size=50304)"
fi
D="--device $DEVICE"

section check 110 $PY benchmarks/gpu_check.py $D $CHECK
section capture 70 $PY benchmarks/capture.py $CAPTURE $D --dtype fp32 --repeats 1 --warmup 1
section ablation-pythia-1b 90 $PY benchmarks/ablation.py --geometry pythia-1b $REAL $PYTHIA $D --dtype fp32 --repeats 1
section ablation-pythia-1b-bf16 60 \
  $PY benchmarks/ablation.py --geometry pythia-1b $REAL $PYTHIA $D --dtype bf16 --repeats 1
section ablation-pythia-1b-tf32 60 \
  $PY benchmarks/ablation.py --geometry pythia-1b $REAL $PYTHIA $D --dtype fp32 --tf32 --repeats 1
section ablation-olmo-1b 70 $PY benchmarks/ablation.py --geometry olmo-1b $REAL $OLMO $D --dtype $HALF --repeats 1
section ablation-olmoe-1b-7b 90 \
  $PY benchmarks/ablation.py --geometry olmoe-1b-7b $REAL $OLMOE $D --dtype $HALF --repeats 1
section autobatch 70 $PY - <<EOF
import time, torch, transformers
from headtrace.causal import ablation
from headtrace.causal.ablation import Condition
from headtrace.cell import capture
from headtrace.core import probe
from headtrace.models import families, hub
dev = "$DEVICE"
cfg = transformers.GPTNeoXConfig(**$AUTO, rotary_pct=0.25, max_position_embeddings=2048, bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
with torch.device(dev):
    m = transformers.GPTNeoXForCausalLM(cfg).eval()
fam = families.get("gpt_neox")
b = hub.auto_batch_size(m, 256, dev, "auto")
print(f"auto_batch_size(Pythia-1B widths, {cfg.num_hidden_layers} layers, fp32, T=256) = {b}")
batch = probe.make_batch(n_sequences=b, seq_len=256, token_low=10, token_high=cfg.vocab_size)
conds = [Condition("baseline"), Condition("L4", 0, ((1, 4), (1, 0)))]
for what, fn in (("capture", lambda: capture.run(m, fam, batch, batch_size=b, device=dev, progress=False)),
                 ("ablation", lambda: ablation.run(m, fam, batch, conds, batch_size=b, device=dev, progress=False))):
    if dev.startswith("cuda"):
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter(); fn()
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
        total = torch.cuda.get_device_properties(0).total_memory
        peak = torch.cuda.max_memory_allocated()
        print(f"{what} at batch {b}: {time.perf_counter() - t:.1f} s, peak GPU memory {peak / 2**30:.1f} GiB "
              f"of {total / 2**30:.0f} GiB ({peak / total:.0%})")
    else:
        print(f"{what} at batch {b}: {time.perf_counter() - t:.1f} s (CPU: no memory figure)")
EOF

echo; echo "== summary ($SECONDS s in all)"; cat "$OUT/summary.txt"
exec 1>&- 2>&-
wait $TEE  # the log is complete before the run ends
exit $FAILED
