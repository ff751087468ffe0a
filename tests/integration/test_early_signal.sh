#!/usr/bin/env bash
# Slurm's SIGUSR1 (or a SIGTERM) right after start must not kill the process: the handlers are
# installed before any library initialises (.preinit_array), so the signal is taken like any other
# (a snapshot at the first step, exit 75). Sent (A) the moment the handler exists, as seen in
# /proc/PID/status, and (B) 0.15 s and 0.4 s after launch: inside MPI's start-up and the data load,
# which is where a handler installed later (after MPI_Init, as it once nearly was) would miss it.
# What remains, the dynamic loader's few milliseconds before any of our code runs, is documented
# in the README ("Snapshots, resuming, stopping").
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
ARGS=(--config "$FASHION_CONFIG" --data.train_limit 512 --data.test_limit 256
      --train.batch_size 64 --model.preset lenet_mnist --train.epochs 1)
SIGUSR1_BIT=$((1 << 9))  # bit (signal - 1) of /proc/PID/status SigCgt

# True once process $1 runs $BIN and catches SIGUSR1 (builtins only: the poll must stay fast).
catches_usr1() {
  local key value
  [[ /proc/$1/exe -ef $BIN ]] || return 1
  while read -r key value; do
    [ "$key" = SigCgt: ] && return $(((0x$value & SIGUSR1_BIT) == 0))
  done < "/proc/$1/status"
  return 1
}

# check NAME RC: the run stopped cleanly after the signal (75 with a snapshot) or finished (0).
check() {
  local name=$1 rc=$2
  [ "$rc" -ne $((128 + 10)) ] || { cat "$WORK/$name.log"; fail "$name: SIGUSR1 killed the process"; }
  if [ "$rc" -eq 75 ]; then
    ls "$WORK/$name"/snapshot_e0000_s*.h5 > /dev/null 2>&1 \
      || { cat "$WORK/$name.log"; fail "$name: exit 75 without a mid-epoch snapshot"; }
  elif [ "$rc" -ne 0 ]; then
    cat "$WORK/$name.log"
    fail "$name: exit $rc"
  fi
  echo "$name: exit $rc"
}

# (A) the moment the handler exists.
for i in 1 2 3; do
  "$BIN" "${ARGS[@]}" --run.dir "$WORK/a$i" > "$WORK/a$i.log" 2>&1 &
  pid=$!
  start=$(date +%s%N)
  until catches_usr1 $pid; do kill -0 $pid 2> /dev/null || break; done
  kill -USR1 $pid
  echo "handler after $((($(date +%s%N) - start) / 1000)) us"
  set +e
  wait $pid
  rc=$?
  set -e
  check a$i $rc
done

# (B) at fixed times after launch.
for delay in 0.15 0.4; do
  "$BIN" "${ARGS[@]}" --run.dir "$WORK/b$delay" > "$WORK/b$delay.log" 2>&1 &
  pid=$!
  sleep "$delay"
  kill -USR1 $pid
  set +e
  wait $pid
  rc=$?
  set -e
  check b$delay $rc
done
pass "SIGUSR1 right after start is taken: a snapshot and exit 75, never a signal death"
