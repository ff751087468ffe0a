#!/usr/bin/env bash
# `sbatch slurm/train_2nodes.sh` on a real Slurm 22.05 cluster: slurmctld + two slurmd nodes (n1, n2)
# in network namespaces, with MUNGE (tests/harness/slurm_cluster.sh; torn down at exit, always).
# The template itself is submitted, configured for CPU and a tiny Fashion-MNIST run only through
# sbatch options and --export (the nodes advertise fake "gpu" GRES, so its --gpus-per-task=1 is
# scheduled as on a GPU cluster), as a user of an installation would:
#  - ddp_train comes from `module load ddp_train` (this build installed with cmake --install), and
#    `module` is not defined in the batch shell: on this machine, as on many sites, only login
#    shells define it (/etc/profile.d); the template must initialise the module system itself, say
#    from where, and say what it loaded;
#  - the config (configs/fashion_mnist.toml) sets run.dir: the template must use it (relative to the
#    job's working directory) and say so;
#  - once the first epoch's snapshot exists, `scontrol requeue` (as an operator or a preemption
#    would) ends the running job: the log must say that Slurm is requeueing it (not "no requeue"),
#    and the restarted job must resume in the same run directory and reach COMPLETED with one rank
#    on each node, a final test accuracy and "finished";
# and, at the same time on the spare CPU, train_cpu.sh with a time limit of 1 minute and no warning
# signal (--signal=B:USR1@0): Slurm's time-limit SIGTERM must be reported as such, the job not
# requeued, and the run directory the one given by DDP_RUN_DIR.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
cluster_require slurm
build=$(dirname "$BIN")
[ -f "$build/cmake_install.cmake" ] || skip "$build is not a CMake build directory (no cmake_install.cmake)"

# The batch shell gets this environment (sbatch --export=ALL): nothing of a module system in it.
unset -f module ml 2> /dev/null || true
unset BASH_ENV ENV LMOD_PKG LMOD_CMD LMOD_DIR LMOD_ROOT MODULESHOME MODULEPATH_ROOT LOADEDMODULES _LMFILES_
prefix="$WORK/prefix"
cmake --install "$build" --prefix "$prefix" > "$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "cmake --install failed"; }
version=$(sed -nE 's/^project\(ddp_train VERSION ([0-9.]+).*/\1/p' "$SRC/CMakeLists.txt")
lmod_init=""
for f in /etc/profile.d/lmod.sh /etc/profile.d/z00_lmod.sh /usr/share/lmod/lmod/init/bash; do
  [ -f "$f" ] && { lmod_init=$f; break; }
done
if [ -n "$lmod_init" ]; then
  modenv=(MODULEPATH="$prefix/modulefiles" DDP_MODULES=ddp_train)
else
  echo "SKIPPED PART: no Lmod (apt-get install lmod): ddp_train given by DDP_BIN, no modules"
  modenv=(DDP_BIN="$BIN" DDP_MODULES=)
fi

cluster_up
if [ -n "$lmod_init" ]; then
  # what the batch shell and a login shell on a node see
  nonlogin=$(slc_exec srun -N1 -w n1 bash -c 'type -t module || echo undefined' 2>&1)
  login=$(slc_exec srun -N1 -w n1 bash -lc 'type -t module || echo undefined' 2>&1)
  echo "on n1: \`module\` in a non-login shell: $nonlogin; in a login shell: $login"
  [ "$nonlogin" = undefined ] || fail "'module' is defined in a non-login shell on the node: nothing would be tested"
fi

# The jobs share half a CPU (a cgroup CPU quota, where one can be set): the time-limited job only
# has to be training when its limit comes, and need not burn a whole CPU for a minute or more until
# then; and the requeued job trains for ~15 s on any machine, not 3 (the requeue below must find it
# still running after its first snapshot).
cluster_cpu_quota 0.5 || echo "the jobs run at full speed"
config=$SRC/configs/fashion_mnist.toml
cfg_dir=$(sed -n 's/^dir = "\([^"]*\)".*/\1/p' "$config")
[ -n "$cfg_dir" ] || fail "$config sets no run.dir (this test needs a config that does)"
mkdir -p "$WORK/submit"
tl_args="--data.train_limit 2000 --data.test_limit 200 --train.epochs 1000 --train.batch_size 64"
tl_job=$(submit "$WORK/submit/%x-%j.out" --chdir="$WORK/submit" --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 \
  --time=1 --signal=B:USR1@0 \
  --export="$(template_env "DDP_CONFIG=$config,DDP_RUN_DIR=$WORK/timelimit,DDP_ARGS=$tl_args")" \
  "$SRC/slurm/train_cpu.sh") || fail "sbatch refused train_cpu.sh"
t0=$SECONDS
args="--data.train_limit 6000 --data.test_limit 1000 --train.epochs 5 --train.batch_size 64 --train.save_every 1"
# The settings are exported and passed with a plain --export=ALL: `--export=ALL,NAME=VALUE` makes this
# Slurm start the batch shell from a login environment (as --get-user-env does), where Lmod's
# /etc/profile.d script has defined `module` already.
job=$(export DDP_DEVICE=cpu DDP_THREADS=1 DDP_CONFIG="$config" DDP_ARGS="$args" && export "${modenv[@]}" &&
  submit "$WORK/submit/%x-%j.out" --chdir="$WORK/submit" --ntasks-per-node=1 --cpus-per-task=1 --time=5 \
    --export=ALL "$SRC/slurm/train_2nodes.sh") || fail "sbatch refused the template"
[ -n "$job" ] || fail "sbatch printed no job id"
log="$WORK/submit/ddp_train-$job.out"
run="$WORK/submit/$cfg_dir"

# Requeue from outside once there is a snapshot to resume from.
for ((i = 0; i < 240; i++)); do
  [ -f "$run/snapshot_e0001.h5" ] && break
  case $(slc_job_state "$job") in PENDING | CONFIGURING | RUNNING) sleep 0.5 ;; *) break ;; esac
done
[ -f "$run/snapshot_e0001.h5" ] ||
  { cat "$log" 2> /dev/null; fail "no snapshot_e0001.h5 in $run (job $job: $(slc_job_state "$job"))"; }
[ "$(slc_job_state "$job")" = RUNNING ] && ! grep -q '^final test accuracy' "$log" ||
  { cat "$log"; fail "the job ended before the requeue (training too short for this machine?)"; }
slc_exec scontrol requeue "$job" || fail "scontrol requeue $job refused"
wait_job_done "$job" "$log" 240
echo "--- $log"
cat "$log"

if [ -n "$lmod_init" ]; then
  grep -qF 'modules: `module` was not defined in this batch shell: initialised it from /' "$log" ||
    fail "the template did not initialise the module system, or did not say from where"
  grep -q "modules loaded: ddp_train/$version" "$log" || fail "the log does not say that ddp_train/$version was loaded"
  grep -q "start (restart 0): .*$prefix/bin/ddp_train\$" "$log" || fail "the job did not run the ddp_train of the module"
fi
grep -qF "run dir $run (run.dir of $config" "$log" || fail "the config's run.dir ($run) was not used, or not said"
grep -q 'got SIGTERM: Slurm is requeueing the job' "$log" || fail "the external requeue was not reported as a requeue"
! grep -Eq 'no requeue|not requeued' "$log" || fail "the log says the job is not requeued while Slurm requeued it"
[ "$(job_field "$job" Restarts)" = 1 ] || fail "Restarts=$(job_field "$job" Restarts), expected 1"
grep -q '^resume: ' "$log" || fail "the restarted job did not resume from a snapshot"
grep -Eq '^0: n1$' "$log" && grep -Eq '^1: n2$' "$log" || fail "the log does not show rank 0 on n1 and rank 1 on n2"
grep -q '^ddp_train .*: 2 rank(s)' "$log" || fail "ddp_train did not run as one job of 2 ranks"
grep -q '^final test accuracy: ' "$log" || fail "no final test accuracy in the log"
grep -q 'finished: ddp_train completed (exit 0)' "$log" || fail "the log does not say that the job finished"
[ -f "$run/snapshot_e0005.h5" ] || fail "no snapshot_e0005.h5 in the run directory $run: $(ls "$run" 2>&1)"
# A person following the job's log: progress lines with a timestamp, step/total, loss, images/s and
# an ETA (47 steps per epoch, 235 in all; a line every run.log_every = 50 steps), timestamped epoch
# lines, and each rank's own log in run.dir/logs (one start line per job segment, both segments).
stamp='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}'
grep -Eq "^\[$stamp\] step (50|100|150|200)/235 \(epoch [1-5] of 5\) \| train loss [0-9.]+ \| lr [0-9.e-]+ \| [0-9,]+ img/s \| ETA [0-9hms]+\$" "$log" ||
  fail "no progress line (time, step/total, loss, images/s, ETA) in the job's output"
grep -Eq "^epoch 5/5 \| .* \| $stamp\$" "$log" || fail "the epoch lines carry no timestamp"
grep -Eq '^final test accuracy: [0-9.]+% \([0-9]+ samples\), test loss [0-9.]+' "$log" ||
  fail "the final line does not say that its loss is the test loss"
for r in 0 1; do
  rlog="$run/logs/rank_000$r.log"
  [ -f "$rlog" ] || fail "no per-rank log $rlog: $(ls "$run/logs" 2>&1)"
  echo "--- $rlog"
  cat "$rlog"
  [ "$(grep -Ec "^\[$stamp\] ddp_train .*: rank $r of 2 on n$((r + 1)), pid [0-9]+: training in " "$rlog")" = 2 ] ||
    fail "$rlog does not name rank $r on n$((r + 1)) once per job segment"
done
[ "$(summary_field "$run/metrics.jsonl" world_size)" = 2 ] || fail "metrics.jsonl does not record 2 ranks"
[ "$(job_field "$job" ExitCode)" = 0:0 ] || fail "job exit code $(job_field "$job" ExitCode), expected 0:0"
job_s=$((SECONDS - t0))

tl_log="$WORK/submit/ddp_train_cpu-$tl_job.out"
st=$(slc_wait_job "$tl_job" 150) || { cat "$tl_log"; fail "the time-limited job is still $st"; }
echo "--- $tl_log"
grep -v '^  ' "$tl_log"
[ "$st" = TIMEOUT ] || fail "the time-limited job ended $st, expected TIMEOUT"
grep -qF "run dir $WORK/timelimit (DDP_RUN_DIR)" "$tl_log" || fail "DDP_RUN_DIR was not used, or not said"
grep -q 'got SIGTERM: the time limit is reached' "$tl_log" || fail "the time-limit SIGTERM was not reported as such"
! grep -q 'requeueing\|Slurm requeues' "$tl_log" || fail "the time-limited job claims a requeue"
[ "$(job_field "$tl_job" Restarts)" = 0 ] || fail "the time-limited job was requeued"
pass "train_2nodes.sh: module system initialised in the batch shell, config's run.dir used, scontrol requeue reported and resumed, COMPLETED on n1+n2 in ${job_s}s; time limit reported as such"
