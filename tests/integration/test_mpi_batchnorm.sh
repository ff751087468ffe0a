#!/usr/bin/env bash
# Batch norm over several ranks: each rank's running statistics see only its own batches, so after
# every epoch the ranks average them (otherwise the replica check - which compares parameters and
# buffers bitwise - would stop the job). 3 ranks, the VGG net with batch norm, 2 epochs on a
# CIFAR-10 subset (Fashion-MNIST or generated data where CIFAR-10 is absent, lib_data.sh), then the
# final snapshot evaluated on 1 rank gives the accuracy the run reported.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
pick_comparison_data 1536 500
common=(--config "$SRC/configs/cifar_vgg_bn.toml" "${DATA[@]}" --data.train_limit 1536
        --data.test_limit 500 --runtime.threads 1 --runtime.device cpu)
mpirun_local -np 3 "$BIN" "${common[@]}" --train.epochs 2 --train.batch_size 32 \
  --run-dir "$WORK/run" > "$WORK/log" 2>&1 || { cat "$WORK/log"; fail "3-rank batch-norm training failed"; }
grep -q "^final test accuracy" "$WORK/log" || fail "no final accuracy"
acc=$(summary_field "$WORK/run/metrics.jsonl" final_test_acc)
"$BIN" eval "${common[@]}" --snapshot "$WORK/run/snapshot_e0002.h5" > "$WORK/eval.log" 2>&1 ||
  { cat "$WORK/eval.log"; fail "eval of the snapshot failed"; }
got=$(awk '/^test accuracy:/ { sub("%", "", $3); printf "%.4f", $3 / 100 }' "$WORK/eval.log")
awk -v a="$acc" -v b="$got" 'BEGIN { d = a - b; exit !(d < 1e-9 && d > -1e-9) }' ||
  fail "the snapshot evaluates to $got, the run reported $acc"
pass "3 ranks with batch norm: replicas agree, snapshot accuracy $got as reported, on $DATA_NAME"
