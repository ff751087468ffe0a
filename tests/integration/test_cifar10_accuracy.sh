#!/usr/bin/env bash
# The CIFAR-10 recipe (PyTorch reference: 54.6%): LeNet, Adam 1e-3, batch 256, no augmentation,
# inputs in [-1, 1], 5 epochs on the real CIFAR-10 must reach >= 53%.
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
"$BIN" --config "$SRC/configs/cifar.toml" --data.root "$CIFAR" --run-dir "$WORK/run" \
  --train.epochs 5 --optim.name adam --optim.lr 0.001 --optim.momentum 0 \
  --optim.weight_decay 0 --optim.nesterov false --schedule.name constant --data.augment false \
  --data.normalize config --data.mean 0.5 --data.std 0.5 --train.batch_size 256 --train.save_every 0 \
  | tee "$WORK/log"
acc=$(summary_field "$WORK/run/metrics.jsonl" final_test_acc)
ge "$acc" 0.53 || fail "test accuracy $acc < 0.53"
pass "CIFAR-10 LeNet 5 epochs: test accuracy $acc"
