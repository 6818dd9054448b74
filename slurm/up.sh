#!/usr/bin/env bash
# Start a single-node Slurm cluster (munged + slurmctld + slurmd) on this machine, as root.
# Idempotent: installs slurm-wlm/munge if missing, (re)writes /etc/slurm/slurm.conf and gres.conf,
# starts each daemon only if it is not already running, and records in $STATE the daemons THIS
# script started, so slurm/down.sh stops only those. Test harness only — not for a real cluster.
#
#   env: SLURM_FAKE_GPUS (default 2) fake GPUs on the node (gres gpu:fake:N),
#        HEADTRACE_SLURM_STATE (default /tmp/headtrace-slurm/state), SLURM_PARTITION (default debug)
set -euo pipefail

STATE=${HEADTRACE_SLURM_STATE:-/tmp/headtrace-slurm/state}
NGPU=${SLURM_FAKE_GPUS:-2}
PARTITION=${SLURM_PARTITION:-debug}
FAKE_DEV_DIR=/var/lib/headtrace-slurm
mkdir -p "$(dirname "$STATE")"
touch "$STATE"

log() { echo "[slurm/up] $*" >&2; }
[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }

# --- install -------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
fi

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_of() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }
# A daemon is "running" if its pidfile names a live process (pgrep as fallback: started elsewhere).
running() { local pf=$1 name=$2; pid_alive "$(pid_of "$pf")" || pgrep -x "$name" >/dev/null; }
record() { grep -qx "$1" "$STATE" || echo "$1" >> "$STATE"; }

# --- munge ---------------------------------------------------------------------------------
MUNGE_PID=/run/munge/munged.pid
if ! running "$MUNGE_PID" munged; then
  mkdir -p /run/munge /var/lib/munge /var/log/munge /etc/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge /etc/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    (command -v mungekey >/dev/null && mungekey --create --keyfile=/etc/munge/munge.key) \
      || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  fi
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do pid_alive "$(pid_of "$MUNGE_PID")" && break; sleep 0.1; done
  record munged
fi
munge -n | unmunge >/dev/null || { log "munge does not work"; exit 1; }

# --- config --------------------------------------------------------------------------------
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)
MEM_MB=$(( MEM_MB > 2048 ? MEM_MB - 1024 : MEM_MB ))   # leave a little for the daemons
# Fake GPU devices: gres.conf needs File= entries; clones of /dev/null (char 1,3) do.
mkdir -p "$FAKE_DEV_DIR"
GPU_FILES=""
if [ "$NGPU" -gt 0 ]; then
  for i in $(seq 0 $((NGPU - 1))); do
    [ -e "$FAKE_DEV_DIR/fakegpu$i" ] || mknod "$FAKE_DEV_DIR/fakegpu$i" c 1 3
  done
  GPU_FILES="$FAKE_DEV_DIR/fakegpu[0-$((NGPU - 1))]"
fi
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm

CONF=$(cat <<CONF
# Written by headtrace slurm/up.sh (single-node test cluster). Overwritten on each run.
ClusterName=headtrace
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# No accounting database: sacct cannot see finished jobs, so the Snakemake executor must use
# squeue (profile: slurm-status-command: squeue) and finished jobs must stay visible in slurmctld
# long enough: MinJobAge >= 360 s (the executor polls up to every 180 s).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
InactiveLimit=0
KillWait=10
Waittime=0
SlurmctldTimeout=60
SlurmdTimeout=60
GresTypes=gpu
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB $( [ "$NGPU" -gt 0 ] && echo "Gres=gpu:fake:$NGPU" ) State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
)
GRES=$( [ "$NGPU" -gt 0 ] && echo "NodeName=$HOST Name=gpu Type=fake File=$GPU_FILES" || echo "# no fake GPUs" )
changed=0
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$CONF" ]; then echo "$CONF" > /etc/slurm/slurm.conf; changed=1; fi
if [ "$(cat /etc/slurm/gres.conf 2>/dev/null)" != "$GRES" ]; then echo "$GRES" > /etc/slurm/gres.conf; changed=1; fi
# srun inside a job ignores $SLURM_CONF, hence the fixed /etc/slurm path. A cgroup.conf is not
# needed (proctrack/linuxproc, task/none), which keeps this working in unprivileged containers.

# --- daemons -------------------------------------------------------------------------------
if ! running /run/slurmctld.pid slurmctld; then
  log "starting slurmctld"
  /usr/sbin/slurmctld -i   # -i: ignore state files that no longer match the config
  record slurmctld
elif [ "$changed" = 1 ]; then
  log "config changed; scontrol reconfigure"; scontrol reconfigure || true
fi
if ! running /run/slurmd.pid slurmd; then
  log "starting slurmd"
  /usr/sbin/slurmd
  record slurmd
fi

# --- wait for the node -----------------------------------------------------------------------
for _ in $(seq 60); do
  st=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -1 || true)
  case "$st" in
    idle*|mixed*|allocated*|completing*) break ;;
    down*|drain*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
sinfo -N -o '%N %P %T %c %m %G' >&2
case "$(sinfo -h -n "$HOST" -o '%T' | head -1)" in
  idle*|mixed*|allocated*|completing*) log "ready (started by this script: $(tr '\n' ' ' < "$STATE"))" ;;
  *) log "node not ready; see /var/log/slurm/slurmd.log and slurmctld.log"; exit 1 ;;
esac
