#!/usr/bin/env bash
# slurm_cluster.sh — a throw-away Slurm 22.05 cluster for the integration tests, on this one machine, as
# root: munged + slurmctld + two slurmd "nodes", each in its own network namespace (and UTS namespace, so
# the nodes are really called n1 and n2), joined by a bridge in a third namespace that runs slurmctld and
# the client commands (the "login node"). Nothing but those namespaces and loopback carries traffic.
#
# As a library (what the tests do):
#   source tests/harness/slurm_cluster.sh
#   slc_init "$WORK/cluster"   # unique ids, and `trap slc_stop EXIT` (INT/TERM exit through it too)
#   slc_start                  # bring up the cluster (returns 1 with the daemon log tails if it fails)
#   slc_exec sbatch ...        # any client command, run in the login namespace
#   slc_wait_job JOBID 180     # waits until the job has left the queue; prints its final JobState
#   slc_stop                   # idempotent; also runs from the EXIT trap
#   slc_net_up ws1 ws2         # namespaces + bridge only (no Slurm): for mpirun across "workstations"
#   slc_ns NAME CMD...         # run CMD in namespace NAME (a node: n1, n2, ctl, ws1...), hostname NAME
# As a command (for poking at it by hand):
#   SLC_BASE=/tmp/c tests/harness/slurm_cluster.sh start|stop|status|exec CMD...
#
# Isolation, so that several clusters (other tests, other people's slurmlab) can run side by side:
#   - every file (config, state, logs, munge key, pid files, TMPDIR of jobs) lives under the cluster's
#     own base directory; the munge socket in /run/ddp_slurm_harness/ID.munge (munged insists that
#     every directory above its socket is a+x, and test directories from mktemp -d are 0700);
#   - namespaces are called ddpXXXXXX-ctl / -n1 / -n2 with a random XXXXXX that is checked to be unused;
#   - the bridge net is 10.77.K.0/24 with K in 1..254 (slurmlab.sh uses 10.77.0), claimed atomically with
#     `ip route add unreachable 10.77.K.0/24` in the root namespace: the add fails when another cluster
#     holds K, and the route also makes a client started by mistake outside the namespaces fail locally
#     (EHOSTUNREACH) instead of sending 10.77.K.x packets along the default route off the machine;
#   - each cluster registers itself in /run/ddp_slurm_harness/ID (its ids and its owner's pid); a later
#     slc_init tears down clusters whose owner died without cleaning up (e.g. a test killed by CTest's
#     timeout, which uses SIGKILL: no trap can run then), even when their base directory is gone.
#
# Pitfalls (learned with ../shared/tools/slurmlab.sh):
#   - enter namespaces with `nsenter --net=/run/netns/X`, NOT `ip netns exec`: that remounts /sys, hides
#     /sys/fs/cgroup, and slurmd 22.05 dies with "No filesystem mounted on /sys/fs/cgroup";
#   - one munged serves all nodes: a path-named unix socket is reachable from every network namespace;
#   - the socket directory of munged must be a+x, the key 0400 in a 0700 directory;
#   - RealMemory must be given (the default, 1 MB, makes every job with --mem pending forever);
#   - `srun --mpi=pmix` is the only MPI plugin that works with Debian's Open MPI (MpiDefault=pmix here);
#   - slurmstepd blanks its environment: it is found by its namespace (or its cwd), not by an env tag.
#
# Fake GPUs: every node advertises SLC_GPUS (default 2) "gpu" GRES whose "device files" are empty
# files under the base directory (slurmd rejects gpu GRES without File=), so templates that ask for
# --gpus-per-task=1 are scheduled as on a GPU cluster; the tasks then run on the CPU.

SLC_REGISTRY=${SLC_REGISTRY:-/run/ddp_slurm_harness}

_slc_log() { echo "[slurm_cluster $(date +%T.%3N)] $*" >&2; }
_slc_alive() { [ -r /proc/$1/stat ] && ! grep -q '^[0-9]* ([^)]*) Z' /proc/$1/stat 2>/dev/null; }
_slc_starttime() { awk '{ sub(/^.*\) /, ""); print $20 }' /proc/$1/stat 2>/dev/null; }

# Loads the state of the cluster in $SLC_BASE (written by slc_init).
_slc_load() {
  [ -n "${SLC_BASE:-}" ] && [ -f "$SLC_BASE/cluster.env" ] || return 1
  # shellcheck disable=SC1091
  source "$SLC_BASE/cluster.env"
  _slc_valid
}

# slc_init BASE: chooses the ids, writes BASE/cluster.env, registers the cluster, sets the EXIT trap.
# Must run in the test's main shell (not in a subshell), so that the trap belongs to the test.
slc_init() {
  local base=${1:?slc_init BASE}
  [ "$(id -u)" = 0 ] || { echo "slurm_cluster: needs root (network namespaces, daemons)" >&2; return 1; }
  mkdir -p "$base" && base=$(cd "$base" && pwd) || return 1
  SLC_BASE=$base
  _slc_reap_orphans
  local id k i
  for i in $(seq 50); do
    id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    [ -e "/run/netns/ddp$id-ctl" ] || [ -e "$SLC_REGISTRY/$id" ] || break
  done
  SLC_ID=$id
  SLC_NS=ddp$id
  # claim a 10.77.K.0/24 for this cluster (see the header); K=0 belongs to slurmlab.sh
  SLC_NET=""
  for i in $(seq 0 253); do
    k=$(( (RANDOM + i) % 254 + 1 ))
    ip route show table all 2>/dev/null | grep -q "10\.77\.$k\." && continue   # in use somewhere
    if ip route add unreachable "10.77.$k.0/24" 2>/dev/null; then SLC_NET=10.77.$k; break; fi
  done
  [ -n "$SLC_NET" ] || { echo "slurm_cluster: no free 10.77.K.0/24 (or no 'ip route' permission)" >&2; return 1; }
  SLC_OWNER=${SLC_OWNER:-$$}
  mkdir -p "$SLC_REGISTRY"
  cat > "$SLC_BASE/cluster.env" <<EOF
SLC_BASE=$SLC_BASE
SLC_ID=$SLC_ID
SLC_NS=$SLC_NS
SLC_NET=$SLC_NET
SLC_OWNER=$SLC_OWNER
SLC_MUNGE_DIR=$SLC_REGISTRY/$SLC_ID.munge
SLC_NODES="${SLC_NODES:-n1 n2}"
SLC_GPUS=${SLC_GPUS:-2}
EOF
  { cat "$SLC_BASE/cluster.env"; echo "SLC_OWNER_START=$(_slc_starttime "$SLC_OWNER")"; } > "$SLC_REGISTRY/$SLC_ID"
  _slc_load
  if [ "${SLC_NO_TRAP:-0}" != 1 ]; then
    # The test's own EXIT trap (e.g. lib.sh's rm -rf "$WORK") runs after the teardown.
    local prev; prev=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
    # shellcheck disable=SC2064
    trap "slc_stop || true; ${prev:-:}" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
}

# _slc_valid: the cluster's variables are well-formed (the teardown kills and deletes by them).
_slc_valid() {
  [[ "${SLC_ID:-}" =~ ^[0-9a-f]{6}$ ]] && [ "${SLC_NS:-}" = "ddp$SLC_ID" ] &&
    [[ "${SLC_NET:-}" =~ ^10\.77\.[0-9]{1,3}$ ]] && [[ "${SLC_BASE:-}" == /?*/?* ]] &&
    [ "${SLC_MUNGE_DIR:-}" = "$SLC_REGISTRY/$SLC_ID.munge" ]
}

# _slc_reg_get FILE KEY: a value from a registry file (read as data, never executed).
_slc_reg_get() { sed -n "s/^$2=//p" "$1" | head -1 | tr -d '"'; }

# Tears down every cluster registered by a process that no longer exists. Entries that do not parse
# are left alone.
_slc_reap_orphans() {
  local f
  for f in "$SLC_REGISTRY"/*; do
    [ -f "$f" ] || continue
    (
      SLC_ID=$(_slc_reg_get "$f" SLC_ID) SLC_NS=$(_slc_reg_get "$f" SLC_NS)
      SLC_NET=$(_slc_reg_get "$f" SLC_NET) SLC_BASE=$(_slc_reg_get "$f" SLC_BASE)
      SLC_MUNGE_DIR=$(_slc_reg_get "$f" SLC_MUNGE_DIR)
      owner=$(_slc_reg_get "$f" SLC_OWNER) start=$(_slc_reg_get "$f" SLC_OWNER_START)
      _slc_valid && [ "$(basename "$f")" = "$SLC_ID" ] && [[ "$owner" =~ ^[0-9]+$ ]] || exit 0
      if _slc_alive "$owner" && [ "$(_slc_starttime "$owner")" = "$start" ]; then exit 0; fi
      _slc_log "tearing down orphaned cluster $SLC_ID (owner $owner is gone)"
      _slc_teardown
    ) || true
  done
}

_slc_conf() {
  local i n
  mkdir -p "$SLC_BASE/etc"
  cat > "$SLC_BASE/etc/slurm.conf" <<EOF
ClusterName=ddp$SLC_ID
SlurmUser=root
SlurmdUser=root
SlurmctldHost=ctl($SLC_NET.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLC_MUNGE_DIR/munge.socket.2,cred_expire=10
StateSaveLocation=$SLC_BASE/state/ctld
SlurmdSpoolDir=$SLC_BASE/state/slurmd-%n
SlurmctldPidFile=$SLC_BASE/run/slurmctld.pid
SlurmdPidFile=$SLC_BASE/run/slurmd-%n.pid
SlurmctldLogFile=$SLC_BASE/log/slurmctld.log
SlurmdLogFile=$SLC_BASE/log/slurmd-%n.log
TmpFS=$SLC_BASE/tmp/%n
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
MpiDefault=pmix
GresTypes=gpu
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
MailProg=/bin/true
EOF
  : > "$SLC_BASE/etc/gres.conf"
  i=0
  for n in $SLC_NODES; do
    i=$((i + 1))
    echo "NodeName=$n NodeAddr=$SLC_NET.$((10 + i)) CPUs=${SLC_CPUS:-$(nproc)} RealMemory=${SLC_MEM:-1024} Gres=gpu:$SLC_GPUS State=UNKNOWN" \
      >> "$SLC_BASE/etc/slurm.conf"
    echo "NodeName=$n Name=gpu File=$SLC_BASE/dev/$n/gpu[0-$((SLC_GPUS - 1))]" >> "$SLC_BASE/etc/gres.conf"
    mkdir -p "$SLC_BASE/dev/$n"
    for ((g = 0; g < SLC_GPUS; g++)); do : > "$SLC_BASE/dev/$n/gpu$g"; done
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$SLC_BASE/etc/slurm.conf"
}

# slc_net_up [NAMES...]: namespace $SLC_NS-ctl with bridge br0 = $SLC_NET.1, one namespace per name
# with eth0 = $SLC_NET.(10+i), all up. Without names: the Slurm nodes.
slc_net_up() {
  _slc_load || { echo "slurm_cluster: slc_init first" >&2; return 1; }
  local names=("$@") i n ns=$SLC_NS
  [ ${#names[@]} -gt 0 ] || read -r -a names <<< "$SLC_NODES"
  ip netns add "$ns-ctl" && ip -n "$ns-ctl" link set lo up &&
    ip -n "$ns-ctl" link add br0 type bridge && ip -n "$ns-ctl" addr add "$SLC_NET.1/24" dev br0 &&
    ip -n "$ns-ctl" link set br0 up || { echo "slurm_cluster: network namespace setup failed" >&2; return 1; }
  i=0
  for n in "${names[@]}"; do
    i=$((i + 1))
    ip netns add "$ns-$n" && ip -n "$ns-$n" link set lo up &&
      ip -n "$ns-ctl" link add "v$i" type veth peer name eth0 netns "$ns-$n" &&
      ip -n "$ns-ctl" link set "v$i" master br0 && ip -n "$ns-ctl" link set "v$i" up &&
      ip -n "$ns-$n" addr add "$SLC_NET.$((10 + i))/24" dev eth0 && ip -n "$ns-$n" link set eth0 up ||
      { echo "slurm_cluster: namespace $n setup failed" >&2; return 1; }
  done
}

# slc_ns NAME CMD...: CMD in namespace NAME's network and a UTS namespace whose hostname is NAME
# (the mount namespace is kept: the binary, the data and the test's files are visible).
slc_ns() {
  _slc_load || return 1
  local name=$1; shift
  SLC_TAG=$SLC_BASE nsenter --net="/run/netns/$SLC_NS-$name" \
    unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

# slc_exec CMD...: a client command on the "login node" (the ctl namespace). Jobs inherit TMPDIR under
# the cluster's base directory (Open MPI's session directories then cannot meet another cluster's).
slc_exec() {
  _slc_load || return 1
  SLURM_CONF=$SLC_BASE/etc/slurm.conf TMPDIR=$SLC_BASE/tmp/jobs SLC_TAG=$SLC_BASE \
    nsenter --net="/run/netns/$SLC_NS-ctl" "$@"
}

slc_start() {
  _slc_load || { echo "slurm_cluster: slc_init first" >&2; return 1; }
  local t0=$EPOCHREALTIME n b=$SLC_BASE
  for c in munged slurmctld slurmd sbatch nsenter unshare; do
    command -v "$c" > /dev/null || { echo "slurm_cluster: '$c' not found" >&2; return 1; }
  done
  mkdir -p "$b/munge" "$b/log" "$b/state/ctld" "$b/run" "$b/tmp/jobs" "$SLC_MUNGE_DIR"
  for n in $SLC_NODES; do mkdir -p "$b/state/slurmd-$n" "$b/tmp/$n"; done
  chmod 700 "$b/munge"; chmod 755 "$SLC_REGISTRY" "$SLC_MUNGE_DIR"
  head -c 1024 /dev/urandom > "$b/munge/munge.key"; chmod 400 "$b/munge/munge.key"
  _slc_conf
  export SLURM_CONF=$b/etc/slurm.conf
  SLC_TAG=$b munged --key-file="$b/munge/munge.key" --socket="$SLC_MUNGE_DIR/munge.socket.2" \
    --pid-file="$b/run/munged.pid" --log-file="$b/log/munged.log" --seed-file="$b/munge/munged.seed" \
    || { echo "slurm_cluster: munged failed" >&2; return 1; }
  slc_net_up || return 1
  # NOTE: nsenter --net, not 'ip netns exec' (see the header)
  SLC_TAG=$b TMPDIR=$b/tmp/ctl nsenter --net="/run/netns/$SLC_NS-ctl" \
    unshare --uts sh -c 'hostname ctl && exec slurmctld' || { _slc_tails; return 1; }
  for n in $SLC_NODES; do
    SLC_TAG=$b TMPDIR=$b/tmp/$n nsenter --net="/run/netns/$SLC_NS-$n" \
      unshare --uts sh -c "hostname $n && exec slurmd -N $n" || { _slc_tails; return 1; }
  done
  local want; want=$(echo $SLC_NODES | wc -w)
  for _ in $(seq 300); do
    [ "$(slc_exec sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | wc -l)" -ge "$want" ] && break
    sleep 0.1
  done
  if [ "$(slc_exec sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | wc -l)" -lt "$want" ]; then
    echo "slurm_cluster: nodes did not become idle:" >&2; slc_exec sinfo -N >&2; _slc_tails; return 1
  fi
  _slc_log "up: $SLC_NODES in namespaces $SLC_NS-*, net $SLC_NET.0/24, base $b ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s)"
}

_slc_tails() { local f; for f in "$SLC_BASE"/log/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 8 "$f" >&2; }; done; }

# TERM, up to ${WAIT:-50} x 0.1 s, then KILL; only the pids given.
_slc_killpids() {
  local p left
  [ $# -eq 0 ] && return 0
  kill -TERM "$@" 2> /dev/null || true
  for _ in $(seq "${WAIT:-50}"); do
    left=""; for p in "$@"; do _slc_alive "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  _slc_log "SIGKILL:$left"
  # shellcheck disable=SC2086
  kill -KILL $left 2> /dev/null || true
  sleep 0.2
}

# slc_stop: cancels the jobs, stops every daemon and process this cluster started, deletes its
# namespaces and its route, unregisters it. Idempotent; never touches anything of another cluster.
slc_stop() {
  _slc_load || return 0
  _slc_teardown
}

# The teardown, with the cluster's variables already set (from cluster.env or the registry).
_slc_teardown() {
  _slc_valid || { _slc_log "refusing to tear down: malformed cluster variables (${SLC_ID:-?} ${SLC_NS:-?} ${SLC_NET:-?} ${SLC_BASE:-?})"; return 1; }
  local t0=$EPOCHREALTIME b=$SLC_BASE f p pids ns keep a
  if [ -s "$b/run/slurmctld.pid" ] && _slc_alive "$(cat "$b/run/slurmctld.pid")"; then
    slc_exec scancel --user=root 2> /dev/null || true
    for _ in $(seq 50); do [ -z "$(slc_exec squeue -h 2> /dev/null)" ] && break; sleep 0.1; done
    slc_exec scontrol shutdown 2> /dev/null || true
  fi
  pids=""
  for f in "$b"/run/slurmctld.pid "$b"/run/slurmd-*.pid; do
    [ -s "$f" ] && _slc_alive "$(cat "$f")" && pids="$pids $(cat "$f")"
  done
  for _ in $(seq 30); do p=""; for a in $pids; do _slc_alive "$a" && p="$p $a"; done; [ -z "$p" ] && break; sleep 0.1; done
  # shellcheck disable=SC2086
  _slc_killpids $p
  # never our own ancestors (a test run through slc_ns would otherwise kill itself)
  keep=" "; a=$$; while [ "$a" -gt 1 ]; do keep="$keep$a "; a=$(awk '{ sub(/^.*\) /, ""); print $2 }' /proc/$a/stat); done
  for ns in $(ip netns list 2> /dev/null | awk '{ print $1 }' | grep "^$SLC_NS-" || true); do
    pids=""; for p in $(ip netns pids "$ns" 2> /dev/null); do case "$keep" in *" $p "*) ;; *) pids="$pids $p" ;; esac; done
    # shellcheck disable=SC2086
    WAIT=20 _slc_killpids $pids
    ip netns del "$ns" 2> /dev/null || _slc_log "could not delete namespace $ns"
  done
  # stragglers in the root namespace that carry our tag (or are a slurmstepd working in our base
  # dir), found by one grep over every environment: a few forks per process took 10-30 s on a
  # busy machine, at the end of every cluster test
  pids=""
  for f in $(grep -lszxF "SLC_TAG=$b" /proc/[0-9]*/environ || true); do
    p=${f#/proc/} && p=${p%/environ}
    case "$keep" in *" $p "*) ;; *) pids="$pids $p" ;; esac
  done
  for p in $(pgrep -x slurmstepd || true); do
    case "$keep" in *" $p "*) continue ;; esac
    case "$(readlink /proc/$p/cwd 2> /dev/null)" in "$b"/*) pids="$pids $p" ;; esac
  done
  # shellcheck disable=SC2086
  WAIT=20 _slc_killpids $pids
  [ -s "$b/run/munged.pid" ] && _slc_alive "$(cat "$b/run/munged.pid")" && _slc_killpids "$(cat "$b/run/munged.pid")"
  ip route del unreachable "$SLC_NET.0/24" 2> /dev/null || true
  rm -rf "$SLC_REGISTRY/$SLC_ID" "$SLC_MUNGE_DIR" "$b/cluster.env"
  rm -rf "$b/run" "$b/state" "$b/tmp" "$b/munge"
  _slc_log "down: $SLC_NS (net $SLC_NET) in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s"
}

# slc_job_state JOBID: JobState of the job (PENDING, RUNNING, COMPLETED, FAILED, ...), or "" if unknown.
slc_job_state() {
  { slc_exec scontrol show job "$1" 2> /dev/null || true; } | { grep -o 'JobState=[A-Z_]*' || true; } |
    head -1 | cut -d= -f2
}

# slc_wait_job JOBID TIMEOUT_S: waits until the job is in a final state; prints it. Returns 1 on timeout.
# (No accounting here, so no sacct: scontrol keeps finished jobs for MinJobAge = 300 s.)
slc_wait_job() {
  local id=$1 limit=$2 st="" i
  for ((i = 0; i < limit * 5; i++)); do
    st=$(slc_job_state "$id")
    case "$st" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        echo "$st"; return 0 ;;
    esac
    sleep 0.2
  done
  echo "${st:-UNKNOWN}"; return 1
}

slc_status() {
  _slc_load || { echo "no cluster in ${SLC_BASE:-?}"; return 0; }
  local f
  echo "cluster $SLC_ID: namespaces $SLC_NS-*, net $SLC_NET.0/24, base $SLC_BASE"
  for f in "$SLC_BASE"/run/munged.pid "$SLC_BASE"/run/slurmctld.pid "$SLC_BASE"/run/slurmd-*.pid; do
    [ -s "$f" ] && echo "$(basename "$f" .pid): pid $(cat "$f") $(_slc_alive "$(cat "$f")" && echo alive || echo DEAD)"
  done
  slc_exec sinfo -N
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then   # executed, not sourced
  set -uo pipefail
  : "${SLC_BASE:?set SLC_BASE to the cluster directory}"
  case "${1:-}" in
    start) SLC_NO_TRAP=1 SLC_OWNER=${SLC_OWNER:-$PPID} slc_init "$SLC_BASE" && slc_start || { slc_stop; exit 1; } ;;
    stop) slc_stop ;;
    status) slc_status ;;
    exec) shift; slc_exec "$@" ;;
    ns) shift; slc_ns "$@" ;;
    *) echo "usage: SLC_BASE=DIR $0 start | stop | status | exec CMD... | ns NODE CMD..." >&2; exit 2 ;;
  esac
fi
