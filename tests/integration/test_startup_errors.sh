#!/usr/bin/env bash
# Start-up with MPMD launches (mpirun -np 1 A : -np 1 B), where ranks get different command lines.
# (1) A rank that fails before training - a missing --config, an unknown option - prints its message
# with its rank and ends the whole job at once; it used to exit alone while rank 0 waited forever,
# silently, in a collective the timeout did not cover. (2) Ranks started with different
# configurations (train.batch_size, train.seed) are refused: rank 0 names each differing key with
# its value per rank, once, and every rank exits non-zero; keys that may differ per rank
# (runtime.threads) are accepted.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
command -v mpirun > /dev/null || skip "mpirun not found"
TINY=(--config "$FASHION_CONFIG" --data.train_limit 512 --data.test_limit 256
      --model.preset lenet_mnist --train.epochs 1 --comm.timeout_s 60 --run.dir "$WORK/run")
LIMIT=90  # seconds before a job counts as hung (and is killed); the fixed code ends in ~2 s
QUICK=40  # a failing job must end within this (MPI start-up on a busy machine included: 16.5 s
          # at load 12), well below comm.timeout_s, which a job waiting for a dead rank would reach

# mpmd NAME ARGS_OF_RANK_0 -- ARGS_OF_RANK_1: runs the two-rank MPMD job, killed after LIMIT s.
# Sets RC (124: hung) and TOOK (seconds); the output is in $WORK/NAME.log.
mpmd() {
  local name=$1 a=() b=()
  shift
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  local start job
  start=$(date +%s.%N)
  mpirun_local -np 1 "$BIN" "${a[@]}" : -np 1 "$BIN" "${b[@]}" > "$WORK/$name.log" 2>&1 &
  job=$!
  while kill -0 $job 2> /dev/null; do
    if ! ge "$LIMIT" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"; then
      kill $(pgrep -P $job) 2> /dev/null || true  # mpirun, which takes its ranks with it
      sleep 2
      kill -9 $(pgrep -P $job) $job 2> /dev/null || true
      wait $job 2> /dev/null || true
      RC=124
      TOOK=$LIMIT
      return
    fi
    sleep 0.1
  done
  set +e
  wait $job
  RC=$?
  set -e
  TOOK=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# expect_quick_failure NAME PATTERN...: the job failed (not hung, not 0) within QUICK s, and its
# output holds every PATTERN.
expect_quick_failure() {
  local name=$1 p
  shift
  echo "$name: exit $RC after $TOOK s"
  [ "$RC" -ne 124 ] || { cat "$WORK/$name.log"; fail "$name: the job hung (killed after $LIMIT s)"; }
  [ "$RC" -ne 0 ] || { cat "$WORK/$name.log"; fail "$name: the job exited 0"; }
  ge "$QUICK" "$TOOK" || { cat "$WORK/$name.log"; fail "$name: took $TOOK s to end (bound $QUICK s)"; }
  for p in "$@"; do
    grep -qF -- "$p" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no '$p' in the output"; }
  done
  ! grep -q "^epoch" "$WORK/$name.log" || fail "$name: training started"
}

# --- (1) one rank fails before training ----------------------------------------------------------
mpmd missing_config "${TINY[@]}" -- --config /nonexistent.toml
expect_quick_failure missing_config "ddp_train: error (rank 1 of 2)" "/nonexistent.toml"

mpmd unknown_option "${TINY[@]}" -- "${TINY[@]}" --train.epoch 3
expect_quick_failure unknown_option "ddp_train: error (rank 1 of 2)" \
  "unknown option '--train.epoch'; did you mean '--train.epochs'?"

# --- (2) different configurations ----------------------------------------------------------------
mpmd batch_size "${TINY[@]}" --train.batch_size 64 -- "${TINY[@]}" --train.batch_size 32
expect_quick_failure batch_size "ddp_train: error (rank 0 of 2): the ranks were started with different configurations" \
  "train.batch_size: 64 on rank 0; 32 on rank 1"
[ "$(grep -c "different configurations" "$WORK/batch_size.log")" = 1 ] \
  || { cat "$WORK/batch_size.log"; fail "batch_size: the mismatch was not reported exactly once"; }

mpmd seed "${TINY[@]}" -- "${TINY[@]}" --train.seed 7
expect_quick_failure seed "train.seed: 42 on rank 0; 7 on rank 1"
! grep -q "train.batch_size:" "$WORK/seed.log" || fail "seed: a key that agrees was listed"

# Per-rank keys may differ: this job trains.
mpmd threads "${TINY[@]}" --runtime.threads 1 -- "${TINY[@]}" --runtime.threads 2
[ "$RC" -eq 0 ] || { cat "$WORK/threads.log"; fail "threads: runtime.threads per rank was refused (exit $RC)"; }
grep -q "^final test accuracy" "$WORK/threads.log" || { cat "$WORK/threads.log"; fail "threads: did not train"; }
pass "a rank failing at start-up ends the job at once, naming itself; different configurations are refused, naming the keys"
