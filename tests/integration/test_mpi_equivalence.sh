#!/usr/bin/env bash
# Data parallelism is exact: N ranks x batch B trains the same model as 1 rank x batch N*B.
# LeNet, 2 epochs on a CIFAR-10 subset: equal per-epoch losses to 5 significant digits, equal test
# accuracy. Also -np 2 vs -np 1, with 2 accumulated micro-batches vs none, and with
# data.distribute = broadcast vs each-reads.
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
common=(--config "$SRC/configs/cifar.toml" --data.root "$CIFAR" --data.train_limit 2500
        --data.test_limit 1001 --train.epochs 2 --runtime.threads 1 --schedule.warmup_epochs 0
        --optim.lr 0.02)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
same() {  # same A B: equal losses (5 significant digits) and test accuracy
  diff <(losses_5sig "$WORK/$1/metrics.jsonl") <(losses_5sig "$WORK/$2/metrics.jsonl") \
    || fail "$1 and $2 differ in training loss"
  [ "$(summary_field "$WORK/$1/metrics.jsonl" final_test_acc)" = \
    "$(summary_field "$WORK/$2/metrics.jsonl" final_test_acc)" ] || fail "$1 and $2 differ in accuracy"
  echo "  $1 == $2: losses $(losses_5sig "$WORK/$1/metrics.jsonl" | tr '\n' ' ')"
}
run np1_b192 1 --train.batch_size 192
run np3_b64 3 --train.batch_size 64
same np1_b192 np3_b64
run np1_b128 1 --train.batch_size 128
run np2_b64 2 --train.batch_size 64
same np1_b128 np2_b64
run np2_b64_acc2 2 --train.batch_size 64 --train.accumulate 2
same np2_b64 np2_b64_acc2
run np3_b64_bcast 3 --train.batch_size 64 --data.distribute broadcast
same np3_b64 np3_b64_bcast
grep -q '"test_samples": 1001' "$WORK/np3_b64/metrics.jsonl" || fail "-np 3 did not count 1001 test samples"
pass "N ranks x B == 1 rank x N*B"
