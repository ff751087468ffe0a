#!/usr/bin/env bash
# The accuracy recipe (PyTorch reference: 85.2%): LeNet, Adam 1e-3, batch 256, inputs in [-1, 1],
# 3 epochs on the real Fashion-MNIST must reach >= 84% test accuracy. The config's defaults are the
# recipe, so no overrides.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
"$BIN" --config "$SRC/configs/fashion_mnist.toml" --run-dir "$WORK/run" | tee "$WORK/log"
acc=$(summary_field "$WORK/run/metrics.jsonl" final_test_acc)
[ "$(grep -c '"epoch"' "$WORK/run/metrics.jsonl")" = 3 ] || fail "expected 3 epoch records"
grep -q '"test_samples": 10000' "$WORK/run/metrics.jsonl" || fail "test set not counted exactly"
ge "$acc" 0.84 || fail "test accuracy $acc < 0.84"
pass "Fashion-MNIST LeNet 3 epochs: test accuracy $acc"
