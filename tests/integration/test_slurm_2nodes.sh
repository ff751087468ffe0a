#!/usr/bin/env bash
# `sbatch slurm/train_2nodes.sh` on a real Slurm 22.05 cluster: slurmctld + two slurmd nodes (n1, n2)
# in network namespaces, with MUNGE (tests/harness/slurm_cluster.sh; torn down at exit, always).
# The template itself is submitted, configured for CPU and a tiny Fashion-MNIST run only through
# sbatch options and --export (the nodes advertise fake "gpu" GRES, so its --gpus-per-task=1 is
# scheduled as on a GPU cluster). It must reach COMPLETED, its log must show one rank on each node
# and a final test accuracy, and the snapshot must be in the job's run directory
# runs/<job name>-<job id> under the job's working directory.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION (apt-get install dataset-fashion-mnist)"
cluster_require slurm
cluster_up

args="--data.train_limit 6000 --data.test_limit 1000 --train.epochs 2 --train.batch_size 64"
mkdir -p "$WORK/submit"
job=$(submit "$WORK/submit/%x-%j.out" --chdir="$WORK/submit" --ntasks-per-node=1 --cpus-per-task=1 \
  --time=5 --export="$(template_env "DDP_CONFIG=$SRC/configs/fashion_mnist.toml,DDP_ARGS=$args")" \
  "$SRC/slurm/train_2nodes.sh") || fail "sbatch refused the template"
[ -n "$job" ] || fail "sbatch printed no job id"
log="$WORK/submit/ddp_train-$job.out"
wait_job_done "$job" "$log" 150
cat "$log"

grep -Eq '^0: n1$' "$log" && grep -Eq '^1: n2$' "$log" || fail "the log does not show rank 0 on n1 and rank 1 on n2"
grep -q '^ddp_train .*: 2 rank(s)' "$log" || fail "ddp_train did not run as one job of 2 ranks"
grep -q '^final test accuracy: ' "$log" || fail "no final test accuracy in the log"
run="$WORK/submit/runs/ddp_train-$job"
[ -f "$run/snapshot_e0002.h5" ] || fail "no snapshot_e0002.h5 in the run directory $run: $(ls "$run" 2>&1)"
[ "$(summary_field "$run/metrics.jsonl" world_size)" = 2 ] || fail "metrics.jsonl does not record 2 ranks"
[ "$(job_field "$job" ExitCode)" = 0:0 ] || fail "job exit code $(job_field "$job" ExitCode), expected 0:0"
pass "sbatch slurm/train_2nodes.sh: COMPLETED on n1+n2, $(grep '^final test accuracy' "$log" | cut -d, -f1)"
