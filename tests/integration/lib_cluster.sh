# Helpers for the tests that need a Slurm cluster or several "hosts" (network namespaces) on this
# machine. Source after lib.sh:
#   source "$(dirname "$0")/lib.sh"
#   source "$(dirname "$0")/lib_cluster.sh"
#   cluster_require slurm        # skips (exit 77) with the reason when the machine cannot do it
#   cluster_up                   # starts the cluster of tests/harness/slurm_cluster.sh; torn down at exit
# Everything runs on loopback or on the namespaces the harness creates for this test.
source "$SRC/tests/harness/slurm_cluster.sh"
source "$SRC/tests/integration/lib_cpu_quota.sh"

# cluster_require slurm|hosts: skip unless this machine can run a namespace cluster (root, the
# tools, network namespaces permitted) and, for slurm, the Slurm and MUNGE daemons.
cluster_require() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, daemons)"
  local c cmds=(ip nsenter unshare mpirun)
  [ "$1" = slurm ] && cmds+=(slurmctld slurmd munged sbatch scontrol srun)
  for c in "${cmds[@]}"; do
    command -v "$c" > /dev/null || skip "'$c' not found (apt-get install slurm-wlm munge iproute2 util-linux openmpi-bin)"
  done
  if [ "$1" = slurm ]; then
    # (not `srun --mpi=list`: a Slurm client without a slurm.conf looks for one in DNS)
    compgen -G "/usr/lib/*/slurm*/mpi_pmix*.so" > /dev/null || compgen -G "/usr/lib*/slurm/mpi_pmix*.so" > /dev/null ||
      skip "this Slurm has no PMIx plugin (mpi_pmix.so), and srun --mpi=pmix is the only way to start Open MPI ranks"
  fi
  # can we create (and delete) a network namespace here?
  local probe="ddpprobe$$"
  ip netns add "$probe" 2> /dev/null || skip "cannot create network namespaces here (ip netns add failed)"
  ip netns del "$probe" 2> /dev/null || true
}

# cluster_up [NODE NAMES]: initialises (unique namespaces and subnet, teardown at exit) and starts
# Slurm. With names: only the namespaces (no Slurm), e.g. cluster_up_hosts ws1 ws2.
cluster_up() {
  slc_init "$WORK/cluster" || fail "cluster init failed"
  slc_start || fail "the Slurm cluster did not come up (see the daemon logs above)"
}
cluster_up_hosts() {
  slc_init "$WORK/cluster" || fail "cluster init failed"
  slc_net_up "$@" || fail "could not create the namespaces $*"
  export SLC_NS SLC_NET
}

# submit OUT SBATCH_ARGS... TEMPLATE: sbatch from the login namespace, job output to OUT (appended
# over requeues by the templates' --open-mode=append); prints the job id.
submit() {
  local out=$1; shift
  slc_exec sbatch --parsable --output="$out" "$@" | cut -d';' -f1
}

# wait_job_done ID LOG LIMIT_S: waits for a final state; fails with the log when it is not COMPLETED.
wait_job_done() {
  local id=$1 log=$2 limit=$3 st
  st=$(slc_wait_job "$id" "$limit") || {
    cat "$log" 2> /dev/null || true
    slc_exec scontrol show job "$id" || true
    fail "job $id still $st after ${limit}s"
  }
  if [ "$st" != COMPLETED ]; then
    cat "$log" 2> /dev/null || true
    slc_exec scontrol show job "$id" || true
    fail "job $id ended $st, expected COMPLETED"
  fi
}

# job_field ID NAME: a field of `scontrol show job` (Restarts, ExitCode, TimeLimit, ...).
job_field() {
  slc_exec scontrol show job "$1" | tr ' ' '\n' | { grep "^$2=" || true; } | head -1 | cut -d= -f2-
}

# Environment for the templates in a test: this build, no modules, CPU, one thread per rank.
template_env() {
  echo "ALL,DDP_BIN=$BIN,DDP_MODULES=,DDP_DEVICE=cpu,DDP_THREADS=1,$1"
}

# cluster_cpu_quota CPUS: every process this cluster's slurmd daemons start from now on (the jobs'
# batch shells, srun steps and ranks) shares CPUS CPUs in all: a CFS quota on a cgroup of their own
# (cgroup v2, or v1's cpu controller). A job that must outlast its time limit then runs as long in
# fewer epochs, at a fraction of the CPU-seconds, and runs no faster on an idle machine than on a
# busy one (which is what sets its number of epochs). Returns 1, with the reason, where no cpu
# cgroup can be made here (the job then runs at full speed). in_cpu_quota CMD... runs CMD in it too.
CPU_QUOTA_CG=""
cluster_cpu_quota() {
  CPU_QUOTA_CG=$(cpu_quota_group "$1") || return 1
  cpu_quota_add "$CPU_QUOTA_CG" $(cat "$SLC_BASE"/run/slurmd-*.pid)
}
in_cpu_quota() {
  (cpu_quota_add "$CPU_QUOTA_CG" "$BASHPID" && exec "$@")
}
