#!/usr/bin/env bash
# make test-slurm: the toy config restricted to two revisions, run once locally and once through
# `snakemake --profile profiles/slurm` (+ slurm/test-profile.yaml overrides) on the single-node
# Slurm of slurm/up.sh; the two result trees must hold the same Parquet content.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PY=$REPO/.venv/bin/python
SNAKEMAKE=$REPO/.venv/bin/snakemake
WORK=$(mktemp -d /tmp/headtrace-test-slurm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# toy-neox of config/config.yaml, restricted to its first two revisions.
"$PY" - "$REPO/config/config.yaml" "$WORK/config.yaml" <<'PYEOF'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
model = cfg["models"]["toy-neox"]
model["revisions"] = model["revisions"][:2]
cfg["models"] = {"toy-neox": model}
cfg["ablation"]["n_random"] = 5
cfg["experiments"]["seeds"]["revisions"] = "ends"  # the demo's list names revisions cut above
yaml.safe_dump(cfg, open(sys.argv[2], "w"), sort_keys=False)
PYEOF

mkdir -p "$WORK/local" "$WORK/slurm"
echo "[test-slurm] local run" >&2
"$SNAKEMAKE" -s "$REPO/Snakefile" --directory "$WORK/local" --configfile "$WORK/config.yaml" --cores 2 -q
echo "[test-slurm] the same through profiles/slurm" >&2
(cd "$WORK/slurm" && "$HERE/test-slurm.sh" -s "$REPO/Snakefile" --configfile "$WORK/config.yaml")
"$PY" "$HERE/compare-parquet.py" "$WORK/local/results" "$WORK/slurm/results"
echo "test-slurm: local and Slurm results are identical"
