#!/usr/bin/env bash
# The start-up line gives the ranks' real thread counts (issue 15): 3 ranks with runtime.threads
# 2, 1, 1 (a per-rank key) say "threads per rank 2/1/1", as the rank table below it does, not one
# figure for all; ranks that agree say "N thread(s) per rank".
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
tiny=(--config "$FASHION_CONFIG" --data.root "$FASHION" --data.train_limit 192
      --data.test_limit 96 --train.epochs 1 --train.batch_size 32 --runtime.device cpu)
mpirun_local -np 1 "$BIN" "${tiny[@]}" --runtime.threads 2 --run-dir "$WORK/uneven" : \
  -np 2 "$BIN" "${tiny[@]}" --runtime.threads 1 --run-dir "$WORK/uneven" > "$WORK/uneven.log" 2>&1 ||
  { cat "$WORK/uneven.log"; fail "3 ranks with threads 2, 1, 1 did not train"; }
head -6 "$WORK/uneven.log"
grep -q '^ddp_train .*: 3 rank(s), threads per rank 2/1/1, device' "$WORK/uneven.log" ||
  fail "the start-up line does not give threads 2/1/1"
# The table's threads column (rank local host device threads ...) says the same.
[ "$(awk '/^rank +local +host/ { t = 1; next } t && /^ +[0-9]/ { printf "%s/", $5 } t && !/^ +[0-9]/ { exit }' "$WORK/uneven.log")" = 2/1/1/ ] ||
  fail "the rank table does not list threads 2, 1, 1"
mpirun_local -np 2 "$BIN" "${tiny[@]}" --runtime.threads 1 --run-dir "$WORK/even" > "$WORK/even.log" 2>&1 ||
  { cat "$WORK/even.log"; fail "2 ranks with 1 thread each did not train"; }
grep -q '^ddp_train .*: 2 rank(s), 1 thread(s) per rank, device' "$WORK/even.log" ||
  { head -3 "$WORK/even.log"; fail "the start-up line does not say 1 thread(s) per rank"; }
pass "the start-up line gives threads per rank 2/1/1 for uneven ranks and one figure when they agree"
