#!/usr/bin/env bash
# The prepared GPU check (not run yet: no GPU was available). Random-init models at the real sizes,
# the paper's probe (2000 x 256); prints seconds and peak memory per cell. Record the output in
# benchmarks/RESULTS.md and docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REAL="--hidden 2048 --vocab 50304 --seq-len 256 --n 2000 --batch-size ${BATCH:-64} --repeats 1 --device cuda"
$PY benchmarks/capture.py --layers 16 --n 2000 --seq-len 256 --batch-size "${BATCH:-64}" --device cuda --dtype fp32 --repeats 1
$PY benchmarks/ablation.py --geometry pythia-1b $REAL --dtype fp32
$PY benchmarks/ablation.py --geometry olmo-1b $REAL --dtype fp16
$PY benchmarks/ablation.py --geometry olmoe-1b-7b $REAL --dtype fp16 --intermediate 1024 --experts 64 --experts-per-tok 8
$PY -c "
import torch, transformers
from headtrace.models import hub
cfg = transformers.GPTNeoXConfig(vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=8,
                                 intermediate_size=8192, rotary_pct=0.25)
m = transformers.GPTNeoXForCausalLM(cfg).to('cuda').eval()
print('auto_batch_size(Pythia-1B, T=256) =', hub.auto_batch_size(m, 256, 'cuda', 'auto'))
"
