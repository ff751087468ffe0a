#!/usr/bin/env bash
# A second SIGINT/SIGTERM exits at once. The first asks for a stop at the next step boundary (with
# a snapshot); a rank that cannot get there - here rank 0 waits in a collective for rank 1, which
# stalls (test-only DDP_FAULT_STALL_RANK) under a 120 s collective timeout - ignores it until the
# second one, which must end it immediately (exit 128 + 15, saying so), and with it the job.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
command -v mpirun > /dev/null || skip "mpirun not found"

export DDP_COMM_TIMEOUT_S=120 DDP_FAULT_STALL_RANK=1 DDP_FAULT_STALL_AT=15
mpirun_local -x DDP_COMM_TIMEOUT_S -x DDP_FAULT_STALL_RANK -x DDP_FAULT_STALL_AT -np 2 "$BIN" \
  --config "$FASHION_CONFIG" --data.train_limit 600 --data.test_limit 100 \
  --train.epochs 1 --train.batch_size 50 --run-dir "$WORK/run" > "$WORK/job.log" 2>&1 &
JOB=$!
cleanup() {  # never leave ranks or mpirun behind, whatever failed, and never wait for them
  kill -9 $(rank_pids "$WORK/run") 2> /dev/null || true
  [ -z "$JOB" ] || kill -9 $(pgrep -P "$JOB") "$JOB" 2> /dev/null || true
  [ "${DDP_KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
wait_for "$WORK/job.log" "rank 1 stalls before collective #15" 50 \
  || { cat "$WORK/job.log"; fail "rank 1 never reached the stall"; }
RANK0=$(rank_pid "$WORK/run" 0)
[ -n "$RANK0" ] || { cat "$WORK/job.log"; fail "rank 0's process not found"; }

sleep 0.5  # rank 0 is now waiting for rank 1's contribution
kill -TERM "$RANK0"
sleep 2
kill -0 "$RANK0" 2> /dev/null || { cat "$WORK/job.log"; fail "the first SIGTERM alone ended rank 0"; }
! grep -q "second signal" "$WORK/job.log" || fail "one signal was taken for two"

SECOND=$(date +%s.%N)
kill -TERM "$RANK0"
for ((i = 0; i < 100; i++)); do kill -0 "$JOB" 2> /dev/null || break; sleep 0.1; done
took=$(awk -v a="$SECOND" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if kill -0 "$JOB" 2> /dev/null; then
  cat "$WORK/job.log"
  fail "the job still runs $took s after the second SIGTERM"
fi
set +e
wait "$JOB"
rc=$?
set -e
JOB=""  # reaped: its PID may be reused
cat "$WORK/job.log"
grep -q "ddp_train: second signal, exiting immediately" "$WORK/job.log" \
  || fail "rank 0 did not say why it left"
[ "$rc" -ne 0 ] || fail "the job exited 0"
sleep 0.5
[ -z "$(rank_pids "$WORK/run")" ] || fail "ranks still running after the job ended"
echo "  second SIGTERM: the job ended $took s later, exit $rc"
pass "a second SIGTERM ends a rank stuck in a collective at once, and the job with it"
