#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests: Debian's slurm-wlm and munge.
#
#   bash scripts/slurm-cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   bash scripts/slurm-cluster.sh stop DIR    # stops only the daemons `start DIR` started
#
# `start` writes DIR/slurm.conf (this host as the controller and the one compute node, every
# core, state, spool, logs and pid files under DIR; ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none, so no cgroups or systemd are needed), starts munged as the munge user
# (with /run/munge) unless a munge daemon already answers, then slurmctld and slurmd, and
# waits until the node is idle. Needs root. Exit status 3, with a message on stderr, when
# it cannot run here (not root, or the packages are missing and cannot be installed).
set -euo pipefail
action=${1:-}
dir=${2:-}
[ -n "$action" ] && [ -n "$dir" ] || { echo "usage: slurm-cluster.sh start|stop DIR" >&2; exit 1; }
dir=$(realpath -m "$dir")
conf=$dir/slurm.conf
unavailable() { echo "slurm-cluster: $*" >&2; exit 3; }

stop() {
  for name in slurmd slurmctld munged; do
    local pidfile=$dir/$name.pid
    [ -f "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
      echo "stopped $name ($pid)" >&2
    fi
    rm -f "$pidfile"
  done
}

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || unavailable "${missing[*]} not installed and no apt-get"
  echo "== installing ${missing[*]} (apt)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
    >&2 || unavailable "apt-get install ${missing[*]} failed"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "munge: a munge daemon already answers; using it" >&2
    return 0
  fi
  [ -f /etc/munge/munge.key ] || runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
  mkdir -p /run/munge
  chown munge:munge /run/munge
  chmod 0755 /run/munge
  runuser -u munge -- munged --pid-file="/run/munge/dashrank-test.pid"
  cp /run/munge/dashrank-test.pid "$dir/munged.pid"
  munge -n | unmunge >/dev/null || unavailable "munged started but does not answer"
}

write_conf() {
  local host cpus
  host=$(hostname -s)
  cpus=$(nproc)
  cat > "$conf" <<CONF
# Written by scripts/slurm-cluster.sh: one node ($host), for tests.
ClusterName=dashrank-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=${SLURM_TEST_PORT:-6817}
SlurmdPort=$(( ${SLURM_TEST_PORT:-6817} + 1 ))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MaxArraySize=10001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
  [ "$(id -u)" = 0 ] || unavailable "needs root (slurmd runs jobs as their users; munged as munge)"
  install_packages
  mkdir -p "$dir/state" "$dir/spool"
  stop 2>/dev/null
  start_munge
  write_conf
  export SLURM_CONF=$conf
  slurmctld -f "$conf" || { cat "$dir/slurmctld.log" >&2 || true; stop; exit 1; }
  slurmd -f "$conf" || { cat "$dir/slurmd.log" >&2 || true; stop; exit 1; }
  for _ in $(seq 120); do
    if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.5
  done
  echo "error: the Slurm node did not become idle; logs:" >&2
  tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
  stop
  exit 1
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: slurm-cluster.sh start|stop DIR" >&2; exit 1 ;;
esac
