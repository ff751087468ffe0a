#!/usr/bin/env bash
# Data parallelism is exact: N ranks x batch B trains the same model as 1 rank x batch N*B.
# LeNet, 2 epochs on a CIFAR-10 subset (drawn from a copy of its first 5 x 1024 training samples;
# Fashion-MNIST or generated data where CIFAR-10 is absent, lib_data.sh): equal per-epoch losses to
# 5 significant digits, equal test accuracy. Also -np 2 vs -np 1, with 2 accumulated micro-batches
# vs none, and with data.distribute = broadcast vs each-reads.
# Why a short run: the runs differ only in float summation order (oneDNN's per-batch reductions, the
# MPI sum), ~1e-7 relative per step; over many steps a ReLU or max-pool decision of one sample can
# flip and move a weight by O(lr * grad), so 1e-5 holds for a short run, not for 50 epochs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
# Real CIFAR-10 is read from a copy of its first samples (dataset_head.py; 5 x 1024 training and
# 2000 test), which spares each of the 16 rank start-ups reading all 60,000 images.
if [ -z "${DDP_TEST_CIFAR:-}" ] && [ -f "$CIFAR/test_batch.bin" ]; then
  /usr/bin/python3 "$SRC/tests/integration/dataset_head.py" cifar10 "$CIFAR" "$WORK/cifar" 1024 2000 \
    || fail "could not copy the first CIFAR-10 samples"
  DDP_TEST_CIFAR="$WORK/cifar"
fi
pick_comparison_data 2500 1001
common=(--config "$SRC/configs/cifar.toml" "${DATA[@]}" --data.train_limit 2500
        --data.test_limit 1001 --train.epochs 2 --runtime.threads 1 --schedule.warmup_epochs 0
        --optim.lr 0.02)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
same() {  # same A B: equal losses (5 significant digits), weights within 1e-5 relative
  diff <(losses_5sig "$WORK/$1/metrics.jsonl") <(losses_5sig "$WORK/$2/metrics.jsonl") \
    || fail "$1 and $2 differ in training loss"
  local d
  d=$(max_rel_diff "$WORK/$1/snapshot_e0002.h5" "$WORK/$2/snapshot_e0002.h5")
  ge 1e-5 "$d" || fail "$1 and $2: final weights differ by $d (relative) > 1e-5"
  echo "  $1 == $2: losses $(losses_5sig "$WORK/$1/metrics.jsonl" | tr '\n' ' ')max rel weight diff $d"
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
# Exact evaluation: the same weights evaluated by 3 ranks and by 1 (1001 test samples, not divisible
# by 3) count every sample once and give the same accuracy and loss.
for np in 1 3; do
  mpirun_local -np $np "$BIN" eval --snapshot "$WORK/np1_b192/snapshot_e0002.h5" "${common[@]}" \
    > "$WORK/eval$np.log" 2>&1 || { cat "$WORK/eval$np.log"; fail "eval on $np rank(s) failed"; }
done
grep "test accuracy" "$WORK/eval1.log"
grep -q "(1001 samples)" "$WORK/eval3.log" || fail "-np 3 evaluation did not count 1001 samples"
diff <(grep "test accuracy" "$WORK/eval1.log") <(grep "test accuracy" "$WORK/eval3.log") \
  || fail "-np 3 and -np 1 evaluate the same weights differently"
pass "N ranks x B == 1 rank x N*B, on $DATA_NAME"
