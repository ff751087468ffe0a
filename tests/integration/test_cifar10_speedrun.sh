#!/usr/bin/env bash
# configs/cifar10_speedrun.toml runs on the CPU: one short epoch on a subset of real CIFAR-10 with
# patch whitening, partial-Dirac convolutions, frozen whitening filters and batch-norm weights,
# parameter groups, alternating flips, the lookahead average and test-time augmentation, and says
# so at start-up. After its epoch the weights are the average (lookahead copies it into them), so
# the snapshot's /model and /ema hold the same values; the frozen tensors are as initialised (the
# whitening filters, eigenvectors / sqrt(eigenvalue + eps); the batch-norm weights 1). Its real
# figures come from a GPU (bench/time_to_accuracy.sh).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
find_python numpy h5py

# 256 images, 4 steps of 64: the average starts (as a copy) at step 2 and moves at steps 3 and 4.
"$BIN" --config "$SRC/configs/cifar10_speedrun.toml" --data.root "$CIFAR" --run.dir "$WORK/speed" \
  --data.train_limit 256 --data.test_limit 128 --train.global_batch 64 --train.batch_size 64 \
  --train.epochs 1 --train.ema_start 1 --train.ema_every 1 --model.whitening_samples 256 \
  --runtime.threads 2 > "$WORK/speed.out" 2>&1 ||
  { cat "$WORK/speed.out"; fail "the speed-run recipe did not train"; }
cat "$WORK/speed.out"
grep -q "^whitening: whiten.weight from 256 training images (246016 2x2 patches, eps 0.0005)$" "$WORK/speed.out" ||
  fail "no whitening line"
grep -qF "ema: decay 0.95 per step, updated every 1 step(s) after step 1, ramped by (step / 4)^3, lookahead (copied into the weights)" "$WORK/speed.out" ||
  fail "no moving-average line"
grep -q "^eval: test-time augmentation flip_translate (6 views per image)$" "$WORK/speed.out" ||
  fail "no test-time augmentation line"
grep -q "^freeze: 7 of " "$WORK/speed.out" || fail "no freeze line for the whitening weight and 6 batch-norm weights"
grep -q "^final test accuracy: .* (128 samples)" "$WORK/speed.out" || fail "no final accuracy"
"$PY" - "$WORK/speed/snapshot_e0001.h5" << 'EOF2' || fail "the snapshot is not the recipe's"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f["meta"].attrs["ema_updates"] == 3, f["meta"].attrs["ema_updates"]
    names = []
    f["ema"].visit(lambda n: names.append(n) if isinstance(f["ema"][n], h5py.Dataset) else None)
    model = []
    f["model"].visit(lambda n: model.append(n) if isinstance(f["model"][n], h5py.Dataset) else None)
    assert sorted(names) == sorted(model) and len(names) > 20, names
    for n in names:  # lookahead: the weights took the average at the epoch's end
        assert np.array_equal(f["ema"][n][()], f["model"][n][()]), n
    w = f["model/whiten/weight"][()]
    assert w.shape == (24, 3, 2, 2), w.shape
    # Not PyTorch's uniform default (|w| <= 1/sqrt(12)): eigenvectors / sqrt(eigenvalue + eps), in
    # both signs, frozen.
    assert np.abs(w).max() > 1.0
    assert np.array_equal(w[12:], -w[:12])
    rows = w[:12].reshape(12, 12)
    norms = np.linalg.norm(rows, axis=1)
    unit = rows / norms[:, None]
    assert np.allclose(unit @ unit.T, np.eye(12), atol=1e-5), "the filters are not orthogonal"
    assert np.all(np.diff(norms) >= -1e-6 * norms[1:]), "not in descending eigenvalue order"
    for b in ("block1.norm1", "block2.norm2", "block3.norm2"):
        assert np.all(f[f"model/{b}/weight"][()] == 1.0), b  # frozen at 1
        assert not np.all(f[f"model/{b}/bias"][()] == 0.0), b  # trained
EOF2
pass "the speed-run recipe trains on the CPU: whitening (frozen), Dirac, groups, alternating flips, lookahead, TTA"
