#!/usr/bin/env bash
# A job whose time limit is shorter than its training finishes anyway, through the template's own
# mechanism: `sbatch slurm/train_cpu.sh` (2 nodes x 1 rank) with --time=1 (60 s) and ~60-150 s of
# training. Slurm warns the batch shell with SIGUSR1 (--signal=B:USR1@...), the template's trap passes
# it to ddp_train through srun, ddp_train writes a mid-epoch snapshot and exits 75, the template runs
# `scontrol requeue`, and the requeued job (same id, same run directory) resumes with --resume auto;
# this repeats until the training is done. The final weights must be bitwise those of an
# uninterrupted run (mpirun -np 2 here, same global batch and threads).
#
# Timing on this cluster: the template says @120 (2 minutes' warning for real jobs); a 1-minute job
# needs a shorter lead, so the test passes --signal=B:USR1@20 on the sbatch command line (same
# signal, same B: delivery to the batch shell only). slurmctld checks time limits every 30 s and
# sends the warning up to 30 s early, so it arrives 10-40 s into each run. The harness sets
# cred_expire=10, so a requeued job may start again after ~11 s instead of Slurm's default 121 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION (apt-get install dataset-fashion-mnist)"
cluster_require slurm
cluster_up

config=$SRC/configs/fashion_mnist.toml
args="--data.test_limit 1000 --train.epochs 12 --train.batch_size 64 --train.save_every 1 --train.keep_last 0"
mkdir -p "$WORK/submit"
t0=$SECONDS
job=$(submit "$WORK/submit/%x-%j.out" --chdir="$WORK/submit" --nodes=2 --ntasks-per-node=1 \
  --cpus-per-task=1 --time=1 --signal=B:USR1@20 \
  --export="$(template_env "DDP_CONFIG=$config,DDP_ARGS=$args")" "$SRC/slurm/train_cpu.sh") ||
  fail "sbatch refused the template"
log="$WORK/submit/ddp_train_cpu-$job.out"
wait_job_done "$job" "$log" 900
job_s=$((SECONDS - t0))
grep -v '^  ' "$log"

restarts=$(job_field "$job" Restarts)
[ "${restarts:-0}" -ge 1 ] || fail "the job was never requeued (Restarts=$restarts): was the training shorter than the warning?"
[ "$(job_field "$job" TimeLimit)" = 00:01:00 ] || fail "unexpected time limit $(job_field "$job" TimeLimit)"
grep -q 'got SIGUSR1: passing it to ddp_train' "$log" || fail "the batch shell never got the warning"
grep -q "^stop requested" "$log" || fail "ddp_train never saw SIGUSR1 (the trap did not reach it)"
grep -q 'stopped with a snapshot (exit 75): requeueing' "$log" || fail "the template did not requeue on exit 75"
run="$WORK/submit/runs/ddp_train_cpu-$job"
mid=$(ls "$run" | grep -E '^snapshot_e[0-9]{4}_s[0-9]{6}\.h5$' | head -1 || true)
[ -n "$mid" ] || fail "no mid-epoch snapshot in $run: $(ls "$run")"
grep -Eq '^resume: .*snapshot_e[0-9]{4}_s[0-9]{6}\.h5' "$log" || fail "no run resumed from a mid-epoch snapshot"
grep -q '^final test accuracy: ' "$log" || fail "the requeued job did not finish the training"
[ -f "$run/snapshot_e0012.h5" ] || fail "no final snapshot in $run"

# The same training, uninterrupted: 2 ranks, 1 thread each, as the template ran it.
mpirun_local -np 2 "$BIN" --config "$config" --run-dir "$WORK/ref" --runtime.threads 1 \
  --runtime.device cpu $args > "$WORK/ref.log" 2>&1 || { cat "$WORK/ref.log"; fail "the reference run failed"; }
got=$(summary_field "$run/metrics.jsonl" weights_digest)
want=$(summary_field "$WORK/ref/metrics.jsonl" weights_digest)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "requeued training ended with weights $got, the uninterrupted run with $want"
pass "time limit 60 s, $restarts requeue(s), first stop at $mid; job took ${job_s}s; weights $got == uninterrupted"
