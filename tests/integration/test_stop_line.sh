#!/usr/bin/env bash
# The stop line says what stopped the run and names the snapshot it writes (issue 33, item 7): a
# SIGINT mid-epoch prints "stop requested (SIGINT): after E epoch(s) and S step(s) of epoch E+1,
# saving snapshot_eEEEE_sSSSSSS.h5", that file is what the run directory holds, and the run exits
# 75; on two ranks with the signal sent to rank 1 only, rank 0's line says another rank got it.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
# 3 epochs of 120 steps (batches of 16 over 1920 samples): the signal lands well inside epoch 2.
args=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 1920
      --data.test_limit 128 --train.batch_size 16 --train.epochs 3 --train.save_every 1
      --runtime.threads 1)

# check NAME WHO: the log's stop line names WHO and a mid-epoch snapshot the run directory holds.
check() {
  local name=$1 who=$2 line file
  line=$(grep "^stop requested" "$WORK/$name.log") || { cat "$WORK/$name.log"; fail "$name: no stop line"; }
  echo "  $name: $line"
  [[ $line =~ ^stop\ requested\ \($who\):\ after\ ([0-9]+)\ epoch\(s\)\ and\ ([0-9]+)\ step\(s\)\ of\ epoch\ ([0-9]+),\ saving\ (snapshot_e[0-9]{4}_s[0-9]{6}\.h5)$ ]] \
    || fail "$name: the stop line is not the expected one"
  [ "${BASH_REMATCH[3]}" = $((BASH_REMATCH[1] + 1)) ] || fail "$name: epoch numbers disagree"
  file=$(printf 'snapshot_e%04d_s%06d.h5' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
  [ "$file" = "${BASH_REMATCH[4]}" ] || fail "$name: the line names ${BASH_REMATCH[4]}, its position is $file"
  [ -f "$WORK/$name/$file" ] || fail "$name: $file is not in the run directory: $(ls "$WORK/$name")"
}

"$BIN" "${args[@]}" --run-dir "$WORK/one" > "$WORK/one.log" 2>&1 & job=$!
wait_for_file "$WORK/one/snapshot_e0001.h5" 120 || { cat "$WORK/one.log"; fail "epoch 1 never finished"; }
kill -INT $job
set +e; wait $job; rc=$?; set -e
[ "$rc" = 75 ] || { cat "$WORK/one.log"; fail "exit code $rc after SIGINT, expected 75"; }
check one SIGINT
grep -q '"exit": "stopped by Interrupt' "$WORK/one/run.json" || fail "run.json does not record the SIGINT"

command -v mpirun > /dev/null || pass "the stop line names SIGINT and the snapshot written (1 rank; no mpirun here)"
mpirun_local -np 2 "$BIN" "${args[@]}" --run-dir "$WORK/two" > "$WORK/two.log" 2>&1 & job=$!
wait_for_file "$WORK/two/snapshot_e0001.h5" 120 || { cat "$WORK/two.log"; fail "epoch 1 never finished on 2 ranks"; }
victim=$(rank_pid "$WORK/two" 1)
[ -n "$victim" ] || fail "rank 1's process not found"
kill -INT "$victim"
set +e; wait $job; rc=$?; set -e
[ "$rc" != 0 ] || { cat "$WORK/two.log"; fail "the 2-rank job exited 0 after a SIGINT"; }
check two "a stop signal on another rank"
pass "the stop line names the signal (or another rank's) and the snapshot it writes"
