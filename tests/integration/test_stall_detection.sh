#!/usr/bin/env bash
# No silent hangs. (1) One rank stalls before a collective (test-only fault injection
# DDP_FAULT_STALL_RANK/DDP_FAULT_STALL_AT): the others report it by number and the job exits
# non-zero within the timeout + 10 s of the stall. (2) One rank is killed with SIGKILL mid-run: the
# job ends within the same bound. In both cases no rank may survive the job.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
command -v mpirun > /dev/null || skip "mpirun not found"

T=5                 # DDP_COMM_TIMEOUT_S (until the config key comm.timeout_s reaches the comm)
BOUND=$((T + 10))
TAG="ddp_stall_test_$$_$RANDOM"  # marks this test's ranks in /proc/PID/environ
export DDP_COMM_TIMEOUT_S=$T DDP_TEST_TAG=$TAG

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# PIDs of this test's ranks (optionally only MPI rank $1): processes running $BIN whose environment
# carries our tag, so that nothing else on the machine is ever touched.
rank_pids() {
  local d pid env
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$(readlink "$d/exe" 2> /dev/null)" = "$BIN" ] || continue
    env=$({ tr '\0' '\n' < "$d/environ"; } 2> /dev/null) || continue
    grep -qx "DDP_TEST_TAG=$TAG" <<< "$env" || continue
    [ -z "${1:-}" ] || grep -qx "OMPI_COMM_WORLD_RANK=$1" <<< "$env" || continue
    echo "$pid"
  done
  return 0
}
# Waits (up to $2 s) until file $1 contains pattern $3; fails the test if the job ends first.
wait_for() {
  local deadline=$(($(date +%s) + $2))
  until grep -q "$3" "$1" 2> /dev/null; do
    kill -0 "$JOB" 2> /dev/null || { cat "$WORK"/*.log; fail "the job ended before: $3"; }
    [ "$(date +%s)" -lt "$deadline" ] || fail "waited $2 s for: $3"
    sleep 0.1
  done
}
# Waits for the job (at most 60 s after it started, then kills it: a hang fails, never blocks CI).
finish_job() {
  while kill -0 "$JOB" 2> /dev/null && [ "$(date +%s)" -lt $((STARTED + 60)) ]; do sleep 0.1; done
  END=$(now)
  if kill -0 "$JOB" 2> /dev/null; then
    for pid in $(pgrep -P "$JOB") $(rank_pids); do kill -9 "$pid" 2> /dev/null || true; done
    wait "$JOB" || true
    RC=124
    return
  fi
  set +e
  wait "$JOB"
  RC=$?
  set -e
  sleep 1
  [ -z "$(rank_pids)" ] || fail "ranks still running after the job ended: $(rank_pids)"
}

# --- (1) rank 1 stalls before its 15th collective (mid-training: today the second step's gradient
# bucket, a non-blocking all-reduce waited by GradientSync, after 7 collectives of start-up) -----
STARTED=$(date +%s)
DDP_FAULT_STALL_RANK=1 DDP_FAULT_STALL_AT=15 mpirun_local -x DDP_FAULT_STALL_RANK -x DDP_FAULT_STALL_AT \
  -x DDP_COMM_TIMEOUT_S -x DDP_TEST_TAG -np 3 "$BIN" --config "$FASHION_CONFIG" --data.train_limit 600 \
  --data.test_limit 100 --train.epochs 1 --train.batch_size 50 --run-dir "$WORK/run1" \
  > "$WORK/stall.log" 2>&1 &
JOB=$!
wait_for "$WORK/stall.log" 50 "rank 1 stalls before collective #15"
STALL=$(now)
finish_job
cat "$WORK/stall.log"
took=$(elapsed "$STALL" "$END")
echo "stall: exit $RC, $took s after the stall (bound $BOUND s)"
[ "$RC" -ne 124 ] || fail "the stalled job hung until the test's own timeout"
[ "$RC" -ne 0 ] || fail "the stalled job exited 0"
ge "$BOUND" "$took" || fail "the stalled job took $took s to end (bound $BOUND s)"
grep -q "did not complete within $T s; ranks not arrived: 1\b" "$WORK/stall.log" \
  || fail "no rank reported that rank 1 did not arrive"
# Each rank's own log (run.dir/logs) holds what it wrote to stderr, the error written just before
# MPI_Abort included: rank 1's stall, and the report of a rank that waited for it.
grep -q "rank 1 stalls before collective #15" "$WORK/run1/logs/rank_0001.log" ||
  fail "rank 1's log lacks its stall message: $(cat "$WORK/run1/logs/rank_0001.log" 2>&1)"
# (grep reads the files itself: `cat | grep -q` fails under pipefail when grep's early match kills
# cat with SIGPIPE before it has written the second file.)
grep -qs "^\[[0-9: -]*\] ddp_train: error (rank [02] of 3): .*did not complete within $T s; ranks not arrived: 1\b" \
  "$WORK/run1/logs/rank_0000.log" "$WORK/run1/logs/rank_0002.log" ||
  fail "no rank's log holds its report that rank 1 did not arrive: $(cat "$WORK"/run1/logs/* 2>&1)"

# --- (2) rank 1 is killed with SIGKILL mid-run ---------------------------------------------------
STARTED=$(date +%s)
mpirun_local -x DDP_COMM_TIMEOUT_S -x DDP_TEST_TAG -np 3 "$BIN" --config "$FASHION_CONFIG" --data.train_limit 60000 \
  --data.test_limit 100 --train.epochs 5 --train.batch_size 50 --run-dir "$WORK/run2" \
  > "$WORK/kill.log" 2>&1 &
JOB=$!
wait_for "$WORK/kill.log" 50 "^data:"
sleep 2  # into the training steps
VICTIM=$(rank_pids 1)
[ -n "$VICTIM" ] || { cat "$WORK/kill.log"; fail "rank 1's process not found"; }
KILLED=$(now)
kill -9 "$VICTIM"
finish_job
cat "$WORK/kill.log"
took=$(elapsed "$KILLED" "$END")
echo "kill -9: exit $RC, $took s after the kill (bound $BOUND s)"
[ "$RC" -ne 124 ] || fail "the job with a killed rank hung until the test's own timeout"
[ "$RC" -ne 0 ] || fail "the job with a killed rank exited 0"
ge "$BOUND" "$took" || fail "the job with a killed rank took $took s to end (bound $BOUND s)"
pass "a stalled rank is named and the job aborted; a killed rank ends the job"
