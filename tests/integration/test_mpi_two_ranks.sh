#!/usr/bin/env bash
# The quick-start shape: two MPI ranks on one machine train, rank 0 alone prints and writes metrics,
# and evaluation counts every test sample exactly once (test size not divisible by the ranks).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
mpirun_local -np 2 "$BIN" --config "$FASHION_CONFIG" --data.train_limit 2000 \
  --data.test_limit 1001 --train.epochs 1 --run-dir "$WORK/run" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; fail "mpirun -np 2 failed"; }
cat "$WORK/log"
grep -q "2 rank(s)" "$WORK/log" || fail "banner does not report 2 ranks"
[ "$(grep -c '^epoch 1/1' "$WORK/log")" = 1 ] || fail "epoch line printed by more than one rank"
grep -q '"test_samples": 1001' "$WORK/run/metrics.jsonl" || fail "evaluation did not count 1001 samples"
pass "two ranks train and evaluate exactly"
