#!/usr/bin/env bash
# The speed-run recipe's features in real runs on real CIFAR-10 (CPU):
#  - configs/cifar10_speedrun.toml trains (one short epoch on a subset) with patch whitening,
#    partial-Dirac convolutions, alternating flips, the lookahead average and test-time
#    augmentation, and says so at start-up; after its epoch the weights are the average (lookahead
#    copies it into them), so the snapshot's /model and /ema hold the same values;
#  - a moving average resumed from a snapshot continues bitwise: 2 epochs in one run and 1 + 1
#    epochs with a resume end with the same /ema and the same weights;
#  - `ddp_train eval` of that snapshot scores the average (eval.weights auto / ema) or the weights
#    (live), with and without test-time augmentation, and refuses ema for a snapshot without one;
#  - two ranks keep one average (their BN statistics averaged at each epoch's end).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
find_python numpy h5py

# --- the recipe, one short epoch ------------------------------------------------------------------
# 256 images, 4 steps of 64: the average starts (as a copy) after step 2 and moves at steps 3, 4.
"$BIN" --config "$SRC/configs/cifar10_speedrun.toml" --data.root "$CIFAR" --run.dir "$WORK/speed" \
  --data.train_limit 256 --data.test_limit 128 --train.global_batch 64 --train.batch_size 64 \
  --train.epochs 1 --train.ema_start 1 --train.ema_every 1 --runtime.threads 2 \
  > "$WORK/speed.out" 2>&1 || { cat "$WORK/speed.out"; fail "the speed-run recipe did not train"; }
cat "$WORK/speed.out"
grep -q "^whitening: whiten.weight from 256 training images (246016 2x2 patches, eps 0.0005)$" "$WORK/speed.out" ||
  fail "no whitening line"
grep -qF "ema: decay 0.95 per step, updated every 1 step(s) after step 1, ramped by (step / 4)^3, lookahead (copied into the weights)" "$WORK/speed.out" ||
  fail "no moving-average line"
grep -q "^eval: test-time augmentation flip_translate (6 views per image)$" "$WORK/speed.out" ||
  fail "no test-time augmentation line"
grep -q "^final test accuracy: .* (128 samples)" "$WORK/speed.out" || fail "no final accuracy"
"$PY" - "$WORK/speed/snapshot_e0001.h5" << 'EOF2' || fail "lookahead: the weights are not the average"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f["meta"].attrs["ema_updates"] == 3, f["meta"].attrs["ema_updates"]
    names = []
    f["ema"].visit(lambda n: names.append(n) if isinstance(f["ema"][n], h5py.Dataset) else None)
    assert len(names) == 33, names  # whiten w, b; 6 convs; 6 batch norms x 4; fc
    for n in names:
        assert np.array_equal(f["ema"][n][()], f["model"][n][()]), n
    # partial Dirac and whitening left their mark: the whitening filters are not PyTorch's
    # uniform default (|w| <= 1/sqrt(12)) but eigenvectors / sqrt(eigenvalue + eps)
    assert np.abs(f["model/whiten/weight"][()]).max() > 1.0
EOF2

# --- a resumed average continues bitwise ----------------------------------------------------------
# LeNet, 512 images in 8 steps of 64 per epoch: updates after steps 4, 6, ..., 16 (7 of them).
common=(--config "$SRC/configs/cifar.toml" --data.root "$CIFAR" --data.train_limit 512
  --data.test_limit 256 --train.batch_size 64 --train.ema 0.9 --train.ema_start 2
  --train.ema_every 2 --train.ema_ramp 1 --train.save_every 1 --train.epochs 2
  --runtime.threads 2)
"$BIN" "${common[@]}" --run.dir "$WORK/once" > "$WORK/once.out" 2>&1 ||
  { cat "$WORK/once.out"; fail "2 epochs with a moving average"; }
mkdir -p "$WORK/twice"
cp "$WORK/once/snapshot_e0001.h5" "$WORK/twice/"
"$BIN" "${common[@]}" --run.dir "$WORK/twice" --train.resume auto > "$WORK/twice.out" 2>&1 ||
  { cat "$WORK/twice.out"; fail "the resumed epoch"; }
grep -q "^resume: .*snapshot_e0001.h5" "$WORK/twice.out" || fail "the second run did not resume"
"$PY" - "$WORK/once/snapshot_e0002.h5" "$WORK/twice/snapshot_e0002.h5" << 'EOF2' || fail "the resumed average differs"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert a["meta"].attrs["ema_updates"] == b["meta"].attrs["ema_updates"] == 7, a["meta"].attrs["ema_updates"]
names = []
a["ema"].visit(lambda n: names.append(n) if isinstance(a["ema"][n], h5py.Dataset) else None)
assert len(names) == 10, names
for n in names:
    assert np.array_equal(a["ema"][n][()], b["ema"][n][()]), n
    assert np.array_equal(a["model"][n][()], b["model"][n][()]), n
    assert not np.array_equal(a["ema"][n][()], a["model"][n][()]), n  # kept beside the weights
print("the average after a resume: bitwise equal,", len(names), "tensors")
EOF2

# --- eval: the average or the weights, with and without test-time augmentation --------------------
snap=$WORK/once/snapshot_e0002.h5
evaluate() { "$BIN" eval --snapshot "$1" --data.root "$CIFAR" --output-dir "$WORK/eval" "${@:2}" 2>&1; }
evaluate "$snap" > "$WORK/auto.out" || { cat "$WORK/auto.out"; fail "eval (auto)"; }
evaluate "$snap" --eval.weights ema > "$WORK/ema.out" || { cat "$WORK/ema.out"; fail "eval (ema)"; }
evaluate "$snap" --eval.weights live > "$WORK/live.out" || { cat "$WORK/live.out"; fail "eval (live)"; }
evaluate "$snap" --eval.tta flip_translate > "$WORK/tta.out" || { cat "$WORK/tta.out"; fail "eval (tta)"; }
acc() { grep "^test accuracy:" "$1"; }
grep -q "^evaluating the moving average of the weights (/ema)$" "$WORK/auto.out" || fail "auto did not take the average"
[ "$(acc "$WORK/auto.out")" = "$(acc "$WORK/ema.out")" ] || fail "auto and ema differ"
! grep -q "^evaluating" "$WORK/live.out" || fail "live said it evaluates something else"
grep -q "^evaluating the moving average of the weights (/ema), test-time augmentation flip_translate$" "$WORK/tta.out" ||
  fail "no test-time augmentation in eval"
# The same scores as the training run's last evaluation (the average, without augmentation).
final=$(grep -o "^final test accuracy: [0-9.]*%" "$WORK/once.out" | grep -o "[0-9.]*%")
acc "$WORK/auto.out" | grep -qF "test accuracy: $final " || fail "eval of the average ($(acc "$WORK/auto.out")) is not training's $final"
# A run without an average: ema is refused, naming the key.
"$BIN" --config "$SRC/configs/cifar.toml" --data.root "$CIFAR" --data.train_limit 128 \
  --data.test_limit 128 --train.epochs 1 --run.dir "$WORK/plain" --runtime.threads 2 > /dev/null 2>&1 ||
  fail "a plain run"
if evaluate "$WORK/plain/snapshot_e0001.h5" --eval.weights ema > "$WORK/none.out"; then
  fail "eval.weights = ema was accepted for a snapshot without an average"
fi
grep -q "holds no moving average of the weights" "$WORK/none.out" || { cat "$WORK/none.out"; fail "the refusal does not say why"; }

# --- two ranks ------------------------------------------------------------------------------------
mpirun_local -np 2 "$BIN" "${common[@]}" --run.dir "$WORK/ranks" --runtime.threads 1 \
  > "$WORK/ranks.out" 2>&1 || { cat "$WORK/ranks.out"; fail "two ranks with a moving average"; }
grep -q "^final test accuracy:" "$WORK/ranks.out" || fail "two ranks: no final accuracy"
pass "speed-run recipe: whitening, Dirac, alternating flips, lookahead, TTA; an average resumed bitwise; eval of /ema"
