#!/usr/bin/env bash
# Run a Snakemake command through profiles/slurm on the single-node test cluster.
#
#   slurm/test-slurm.sh [SNAKEMAKE ARGS...]
#   e.g. cd /tmp/wf && slurm/test-slurm.sh --snakefile $REPO/Snakefile --configfile cfg.yaml [targets]
#   then: python slurm/compare-parquet.py <local results> <slurm results>
#
# 1. slurm/up.sh (starts munged/slurmctld/slurmd if needed; trap runs slurm/down.sh on exit,
#    which stops only what THIS run's up.sh started; KEEP_SLURM=1 leaves them running).
# 2. Writes a merged profile: profiles/slurm/config.yaml deep-merged with slurm/test-profile.yaml
#    (account/partition/memory that fit this node) into a temp dir.
# 3. Runs: $SNAKEMAKE --profile <merged> ARGS...   (SNAKEMAKE defaults to .venv/bin/snakemake)
# Exit status is snakemake's.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
SNAKEMAKE=${SNAKEMAKE:-$REPO/.venv/bin/snakemake}
[ -x "$SNAKEMAKE" ] || SNAKEMAKE=snakemake
PROFILE_BASE=${PROFILE_BASE:-$REPO/profiles/slurm/config.yaml}
PROFILE_TEST=${PROFILE_TEST:-$HERE/test-profile.yaml}

cleanup() {
  local rc=$?
  if [ "${KEEP_SLURM:-0}" != 1 ] && [ -n "${MERGED:-}" ]; then "$HERE/down.sh" || true; fi
  [ -n "${MERGED:-}" ] && rm -rf "$MERGED"
  exit $rc
}
trap cleanup EXIT INT TERM

MERGED=$(mktemp -d /tmp/headtrace-slurm-test.XXXXXX)
# Own state file: daemons that were already up (e.g. from a manual slurm/up.sh) are left running.
export HEADTRACE_SLURM_STATE=$MERGED/state
"$HERE/up.sh"

"$PY" - "$PROFILE_BASE" "$PROFILE_TEST" "$MERGED/config.yaml" <<'PYEOF'
import sys, yaml
def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
base = yaml.safe_load(open(sys.argv[1])) or {}
test = yaml.safe_load(open(sys.argv[2])) or {}
yaml.safe_dump(merge(base, test), open(sys.argv[3], "w"), sort_keys=False)
PYEOF

echo "[slurm/test] $SNAKEMAKE --profile $MERGED $*" >&2
set +e
"$SNAKEMAKE" --profile "$MERGED" "$@"
rc=$?
set -e
echo "[slurm/test] snakemake exit status $rc" >&2
squeue --states=all -h -o '%i|%j|%T|%b' >&2 || true
exit $rc
