# CPU quotas for a test's processes: a cgroup whose processes share a set number of CPUs (cgroup v2,
# or v1's cpu controller), removed when the test exits. Slows a job down without changing what it
# computes: a Slurm job that must outlast its time limit does so in fewer CPU-seconds
# (lib_cluster.sh), a small model's epoch lasts long enough for a test to stop it mid-epoch
# (test_reproducible.sh). Sourced after lib.sh.

# cpu_quota_group CPUS: prints the path of a new cgroup whose processes share CPUS CPUs, removed at
# exit (after the cluster's teardown, which the EXIT trap of slc_init runs first); returns 1, with
# the reason, where none can be made. cpu_quota_add CGROUP PID... moves processes into it.
cpu_quota_group() {
  local cpus=$1 cg period=100000 quota
  quota=$(awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }')
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then  # v2: the controller enabled below the root
    grep -qw cpu /sys/fs/cgroup/cgroup.controllers || { echo "no cpu controller in cgroup v2" >&2; return 1; }
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control ||
      echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2> /dev/null ||
      { echo "cannot enable the cpu controller (cgroup v2)" >&2; return 1; }
    cg=$(mktemp -u /sys/fs/cgroup/ddp-quota-XXXXXX)
    mkdir "$cg" 2> /dev/null && echo "$quota $period" > "$cg/cpu.max" 2> /dev/null ||
      { rmdir "$cg" 2> /dev/null; echo "cannot make a cgroup with a CPU quota (cgroup v2)" >&2; return 1; }
  elif [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
    cg=$(mktemp -u /sys/fs/cgroup/cpu/ddp-quota-XXXXXX)
    mkdir "$cg" 2> /dev/null && echo "$period" > "$cg/cpu.cfs_period_us" &&
      echo "$quota" > "$cg/cpu.cfs_quota_us" 2> /dev/null ||
      { rmdir "$cg" 2> /dev/null; echo "cannot make a cgroup with a CPU quota (cgroup v1)" >&2; return 1; }
  else
    echo "no cpu cgroup controller mounted" >&2
    return 1
  fi
  echo "$cg"
}
cpu_quota_add() {
  local cg=$1 p
  shift
  # the first time: removed at exit, after what the EXIT trap does now (the cluster's teardown)
  case " ${CPU_QUOTA_GROUPS:-} " in *" $cg "*) ;; *)
    CPU_QUOTA_GROUPS="${CPU_QUOTA_GROUPS:-} $cg"
    trap "$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/"); _cpu_quota_remove $cg" EXIT ;;
  esac
  for p in "$@"; do
    echo "$p" > "$cg/cgroup.procs" || { echo "cannot move process $p into $cg" >&2; return 1; }
  done
}
_cpu_quota_remove() {  # what is left in the cgroup is moved out, then the cgroup removed
  local cg=$1 p
  [ -d "$cg" ] || return 0
  for _ in 1 2 3; do
    for p in $(cat "$cg/cgroup.procs" 2> /dev/null); do echo "$p" > "$cg/../cgroup.procs" 2> /dev/null || true; done
    rmdir "$cg" 2> /dev/null && return 0
    sleep 0.2
  done
  echo "could not remove $cg" >&2
}
