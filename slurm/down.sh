#!/usr/bin/env bash
# Stop only the daemons that slurm/up.sh started (recorded in its state file), by pid.
set -uo pipefail
STATE=${HEADTRACE_SLURM_STATE:-/tmp/headtrace-slurm/state}
log() { echo "[slurm/down] $*" >&2; }
[ -f "$STATE" ] || { log "no state file $STATE: nothing to stop"; exit 0; }

stop() {  # name pidfile
  local name=$1 pf=$2 pid
  pid=$(cat "$pf" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "$name did not stop; SIGKILL"; kill -KILL "$pid"; }
  else
    log "$name: not running"
  fi
}
# reverse order of dependency
grep -qx slurmd "$STATE" && stop slurmd /run/slurmd.pid
grep -qx slurmctld "$STATE" && stop slurmctld /run/slurmctld.pid
grep -qx munged "$STATE" && stop munged /run/munge/munged.pid
rm -f "$STATE"
