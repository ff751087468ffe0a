#!/usr/bin/env bash
# A job whose time limit is shorter than its training finishes anyway, through the template's own
# mechanism: `sbatch slurm/train_cpu.sh` (2 nodes x 1 rank) with --time=1 (60 s) and ~70 s of
# training (the epoch count is calibrated on the machine; the job's ranks share half a CPU where a
# cgroup CPU quota can be set, so that the ~70 s cost a quarter of the CPU-seconds). Slurm warns the batch shell with SIGUSR1
# (--signal=B:USR1@...), the template's trap passes
# it to ddp_train through srun, ddp_train writes a mid-epoch snapshot and exits 75, the template runs
# `scontrol requeue`, and the requeued job (same id, same run directory) resumes with --resume auto;
# this repeats until the training is done. The final weights must be bitwise those of an
# uninterrupted run (mpirun -np 2 here, same global batch and threads). The log must tell each
# requeue as one (never "no requeue", which the SIGTERM that ends a requeued run once produced) and
# the end as "finished"; the run directory is the config's run.dir.
#
# Timing on this cluster: the template says @120 (2 minutes' warning for real jobs); a 1-minute job
# needs a shorter lead, so the test passes --signal=B:USR1@10 on the sbatch command line (same
# signal, same B: delivery to the batch shell only). slurmctld looks at time limits every 30 s
# (PERIODIC_TIMEOUT, fixed in Slurm 22.05) and sends the warning at the first look that finds the
# end less than lead + 30 s away: 20-50 s into a run, and Slurm's own SIGTERM at the time limit
# comes at a later look, 30 s after the warning or more. The harness sets cred_expire=10, so a
# requeued job may start again ~12 s after its requeue (instead of Slurm's default 121 s); its
# warning is then the second look after the one that stopped the run before, 60 s later, and a run
# trains ~40 s. (With @20 it was the next look, 30 s later: a requeued run trained 2-15 s of every
# 30, and the job took 4-20 runs; now the job takes 2 or 3.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
cluster_require slurm
cluster_up

config=$SRC/configs/fashion_mnist.toml
common="--data.test_limit 1000 --train.batch_size 64 --train.save_every 1 --train.keep_last 0"
# The job's ranks share half a CPU (cluster_cpu_quota): the job trains as long as at full speed, for
# a quarter of the CPU-seconds (and the reference run below trains as few epochs), and runs no
# faster on an idle machine than the epochs were chosen for.
quota=0.5
if cluster_cpu_quota "$quota"; then
  # The training must outlast the first warning (20-50 s into the run): ~90 s of the CPU-seconds of
  # a one-epoch run as the template runs it (2 ranks x 1 thread), start-up included (so the epochs
  # train 70 s or more), at the quota's rate. CPU-seconds do not grow on a busy machine as wall
  # seconds do.
  TIMEFORMAT='%3U %3S'
  { time mpirun_local -np 2 "$BIN" --config "$config" --run-dir "$WORK/calib" --runtime.threads 1 \
      --runtime.device cpu $common --train.epochs 1 > "$WORK/calib.log" 2>&1; } 2> "$WORK/calib.cpu" ||
    { cat "$WORK/calib.log"; fail "the calibration run failed"; }
  cpu_s=$(awk '{ print $1 + $2 }' "$WORK/calib.cpu")
  epochs=$(awk -v c="$cpu_s" -v q="$quota" 'BEGIN { e = int(90 * q / c) + 1; print (e < 4 ? 4 : (e > 60 ? 60 : e)) }')
  echo "one epoch takes ${cpu_s} CPU-s here, start-up included: $epochs epochs at $quota CPUs"
else
  # At full speed: time one epoch and take enough epochs for ~70 s of training, and at least 12 (a
  # job that runs faster than the calibration did, as the load of the machine falls, still outlasts
  # its first warning).
  mpirun_local -np 2 "$BIN" --config "$config" --run-dir "$WORK/calib" --runtime.threads 1 \
    --runtime.device cpu $common --train.epochs 1 > "$WORK/calib.log" 2>&1 ||
    { cat "$WORK/calib.log"; fail "the calibration run failed"; }
  epoch_s=$(grep -o '"\(epoch_s\|eval_s\)": [0-9.e+-]*' "$WORK/calib/metrics.jsonl" |
    awk '{ s += $2 } END { print s }')
  epochs=$(awk -v t="$epoch_s" 'BEGIN { e = int(70 / t) + 1; print (e < 12 ? 12 : (e > 60 ? 60 : e)) }')
  echo "one epoch takes ${epoch_s}s here: training $epochs epochs"
fi
args="$common --train.epochs $epochs"
# The same training, uninterrupted (2 ranks, 1 thread each, as the template runs it), for the
# weights below. It runs meanwhile on what CPU the job leaves idle (SCHED_IDLE: start-up, Slurm's
# requeue and restart), so it neither changes the job's timing nor lengthens the test by a minute.
(chrt --idle -p 0 "$BASHPID" 2> /dev/null || renice -n 19 -p "$BASHPID" > /dev/null
 exec > "$WORK/ref.log" 2>&1
 mpirun_local -np 2 "$BIN" --config "$config" --run-dir "$WORK/ref" --runtime.threads 1 \
   --runtime.device cpu $args) &
ref_job=$!
# A test that fails before the end must not leave it running (mpirun takes its ranks along).
trap "[ -z \"\$ref_job\" ] || kill \$(pgrep -P \$ref_job) \$ref_job 2> /dev/null || true; $(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")" EXIT
mkdir -p "$WORK/submit"
t0=$SECONDS
job=$(submit "$WORK/submit/%x-%j.out" --chdir="$WORK/submit" --nodes=2 --ntasks-per-node=1 \
  --cpus-per-task=1 --time=1 --signal=B:USR1@10 \
  --export="$(template_env "DDP_CONFIG=$config,DDP_ARGS=$args")" "$SRC/slurm/train_cpu.sh") ||
  fail "sbatch refused the template"
log="$WORK/submit/ddp_train_cpu-$job.out"
wait_job_done "$job" "$log" 900
job_s=$((SECONDS - t0))
# The job is done: what the reference run has left, it now runs at normal priority (on a machine
# kept busy by other work it would not finish otherwise).
for p in $(pgrep -P "$ref_job") $(rank_pids "$WORK/ref"); do
  chrt -a --other -p 0 "$p" 2> /dev/null || renice -n 0 -p "$p" > /dev/null 2>&1 || true
done
grep -v '^  ' "$log"

restarts=$(job_field "$job" Restarts)
[ "${restarts:-0}" -ge 1 ] || fail "the job was never requeued (Restarts=$restarts): was the training shorter than the warning?"
[ "$(job_field "$job" TimeLimit)" = 00:01:00 ] || fail "unexpected time limit $(job_field "$job" TimeLimit)"
grep -q 'got SIGUSR1: passing it to ddp_train' "$log" || fail "the batch shell never got the warning"
grep -q "^stop requested" "$log" || fail "ddp_train never saw SIGUSR1 (the trap did not reach it)"
grep -q 'stopped with a snapshot (exit 75): requeueing' "$log" || fail "the template did not requeue on exit 75"
# Every stop here is the template's own requeue: the SIGTERM with which Slurm then ends that run of
# the job must not be reported as a stop without requeue.
! grep -Eq 'no requeue|not requeued' "$log" || fail "the log says 'no requeue' while the job was requeued"
grep -q 'finished: ddp_train completed (exit 0)' "$log" || fail "the log does not say that the training finished"
# The config sets run.dir (relative: under the job's working directory); the template uses it.
run="$WORK/submit/$(sed -n 's/^dir = "\([^"]*\)".*/\1/p' "$config")"
grep -qF "run dir $run (run.dir of $config" "$log" || fail "the config's run.dir was not used, or not said"
mid=$(ls "$run" | grep -E '^snapshot_e[0-9]{4}_s[0-9]{6}\.h5$' | head -1 || true)
[ -n "$mid" ] || fail "no mid-epoch snapshot in $run: $(ls "$run")"
grep -Eq '^resume: .*snapshot_e[0-9]{4}_s[0-9]{6}\.h5' "$log" || fail "no run resumed from a mid-epoch snapshot"
grep -q '^final test accuracy: ' "$log" || fail "the requeued job did not finish the training"
[ -f "$run/$(printf 'snapshot_e%04d.h5' "$epochs")" ] || fail "no final snapshot in $run"

t1=$SECONDS
rc=0 && wait "$ref_job" || rc=$?
ref_job=""  # reaped: its PID may be reused
[ "$rc" = 0 ] || { cat "$WORK/ref.log"; fail "the reference run failed"; }
got=$(summary_field "$run/metrics.jsonl" weights_digest)
want=$(summary_field "$WORK/ref/metrics.jsonl" weights_digest)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "requeued training ended with weights $got, the uninterrupted run with $want"
pass "time limit 60 s, $restarts requeue(s), first stop at $mid; job took ${job_s}s (the reference run $((SECONDS - t1))s more); weights $got == uninterrupted"
