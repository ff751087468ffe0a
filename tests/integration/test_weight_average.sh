#!/usr/bin/env bash
# The moving average of the weights (train.ema) in real runs on real CIFAR-10 (CPU), with a small
# conv-batchnorm net, so that the averaged batch-norm statistics are exercised too:
#  - resumed from a snapshot it continues bitwise: 2 epochs in one run and 1 + 1 epochs with a
#    resume end with the same /ema and the same weights, /ema beside (not equal to) the weights;
#  - `ddp_train eval` of that snapshot scores the average (eval.weights auto: the training run's
#    final accuracy) or the weights (live), with and without test-time augmentation, and refuses
#    ema for a snapshot without one (auto / ema / live on one snapshot: train_weight_average_test);
#  - train.reproducible keeps the average exact: 1 rank and 2 ranks write the same /ema bitwise;
#  - two ranks without it keep one average (their batch-norm statistics averaged at each epoch's
#    end, then checked equal by the replica check).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
find_python numpy h5py

cat > "$WORK/bn.toml" << 'EOF2'
[data]
dataset = "cifar10"
augment = true
mean = [0.5]
std = [0.5]
[train]
batch_size = 64
seed = 5
save_every = 1
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
[[model.layers]]
type = "conv2d"
name = "conv"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "batchnorm"
name = "bn"
[[model.layers]]
type = "relu"
[[model.layers]]
type = "maxpool"
kernel = 4
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "linear"
name = "fc"
out_features = 10
EOF2
# 512 images in 8 steps of 64 per epoch: updates after steps 4, 6, ..., 16 (7 of them).
common=(--config "$WORK/bn.toml" --data.root "$CIFAR" --data.train_limit 512 --data.test_limit 256
  --train.ema 0.9 --train.ema_start 2 --train.ema_every 2 --train.ema_ramp 1 --runtime.threads 2)
compare() {  # compare A.h5 B.h5 UPDATES [same|differ]: /ema and /model equal in both files
  "$PY" - "$@" << 'EOF2'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
updates, beside = int(sys.argv[3]), sys.argv[4] == "beside"
assert a["meta"].attrs["ema_updates"] == b["meta"].attrs["ema_updates"] == updates, \
    (a["meta"].attrs["ema_updates"], b["meta"].attrs["ema_updates"])
names = []
a["ema"].visit(lambda n: names.append(n) if isinstance(a["ema"][n], h5py.Dataset) else None)
assert len(names) >= 8 and "bn/running_mean" in names, names
for n in names:
    assert np.array_equal(a["ema"][n][()], b["ema"][n][()]), "/ema/" + n
    assert np.array_equal(a["model"][n][()], b["model"][n][()]), "/model/" + n
    if beside:
        assert not np.array_equal(a["ema"][n][()], a["model"][n][()]), n
print("  /ema and /model bitwise equal,", len(names), "tensors")
EOF2
}

# --- a resumed average continues bitwise ----------------------------------------------------------
"$BIN" "${common[@]}" --train.epochs 2 --run.dir "$WORK/once" > "$WORK/once.out" 2>&1 ||
  { cat "$WORK/once.out"; fail "2 epochs with a moving average"; }
grep -qF "ema: decay 0.9 per step, updated every 2 step(s) after step 2, ramped by (step / 16)^1, kept beside the weights" "$WORK/once.out" ||
  { cat "$WORK/once.out"; fail "no moving-average line"; }
"$BIN" "${common[@]}" --train.epochs 2 --run.dir "$WORK/twice" \
  --train.resume "$WORK/once/snapshot_e0001.h5" > "$WORK/twice.out" 2>&1 ||
  { cat "$WORK/twice.out"; fail "the resumed epoch"; }
grep -q "^resume: .*snapshot_e0001.h5" "$WORK/twice.out" || fail "the second run did not resume"
compare "$WORK/once/snapshot_e0002.h5" "$WORK/twice/snapshot_e0002.h5" 7 beside ||
  fail "the resumed average differs"

# --- eval: the average or the weights, with and without test-time augmentation --------------------
snap=$WORK/once/snapshot_e0002.h5
evaluate() { "$BIN" eval --snapshot "$1" --data.root "$CIFAR" "${@:2}" 2>&1; }
evaluate "$snap" > "$WORK/auto.out" || { cat "$WORK/auto.out"; fail "eval (auto)"; }
evaluate "$snap" --eval.weights live > "$WORK/live.out" || { cat "$WORK/live.out"; fail "eval (live)"; }
evaluate "$snap" --eval.tta flip_translate > "$WORK/tta.out" || { cat "$WORK/tta.out"; fail "eval (tta)"; }
cat "$WORK/auto.out"
acc() { grep "^test accuracy:" "$1"; }
grep -q "^evaluating the moving average of the weights (/ema)$" "$WORK/auto.out" || fail "auto did not take the average"
! grep -q "^evaluating" "$WORK/live.out" || fail "live said it evaluates something else"
[ "$(acc "$WORK/auto.out")" != "$(acc "$WORK/live.out")" ] || fail "the average and the weights score alike"
grep -q "^evaluating the moving average of the weights (/ema), test-time augmentation flip_translate$" "$WORK/tta.out" ||
  fail "no test-time augmentation in eval"
# The same score as the training run's last evaluation (the average, without augmentation).
final=$(grep -o "^final test accuracy: [0-9.]*%" "$WORK/once.out" | grep -o "[0-9.]*%")
acc "$WORK/auto.out" | grep -qF "test accuracy: $final " ||
  fail "eval of the average ($(acc "$WORK/auto.out")) is not training's $final"
# A run without an average: ema is refused, naming why.
"$BIN" "${common[@]}" --train.ema 0 --data.train_limit 128 --train.epochs 1 --run.dir "$WORK/plain" \
  > "$WORK/plain.out" 2>&1 || { cat "$WORK/plain.out"; fail "a plain run"; }
if evaluate "$WORK/plain/snapshot_e0001.h5" --eval.weights ema > "$WORK/none.out"; then
  fail "eval.weights = ema was accepted for a snapshot without an average"
fi
grep -q "holds no moving average of the weights" "$WORK/none.out" ||
  { cat "$WORK/none.out"; fail "the refusal does not say why"; }

# --- reproducible: the same average on 1 and 2 ranks ----------------------------------------------
repro=("${common[@]}" --train.epochs 1 --train.global_batch 64 --train.reproducible true --train.chunk 16)
"$BIN" "${repro[@]}" --run.dir "$WORK/r1" > "$WORK/r1.out" 2>&1 || { cat "$WORK/r1.out"; fail "reproducible, 1 rank"; }
mpirun_local -np 2 "$BIN" "${repro[@]}" --runtime.threads 1 --run.dir "$WORK/r2" > "$WORK/r2.out" 2>&1 ||
  { cat "$WORK/r2.out"; fail "reproducible, 2 ranks"; }
compare "$WORK/r1/snapshot_e0001.h5" "$WORK/r2/snapshot_e0001.h5" 3 beside ||
  fail "train.reproducible: the average on 2 ranks differs from 1 rank's"

# --- two ranks ------------------------------------------------------------------------------------
mpirun_local -np 2 "$BIN" "${common[@]}" --train.epochs 1 --runtime.threads 1 --run.dir "$WORK/ranks" \
  > "$WORK/ranks.out" 2>&1 || { cat "$WORK/ranks.out"; fail "two ranks with a moving average"; }
grep -q "^final test accuracy:" "$WORK/ranks.out" || fail "two ranks: no final accuracy"
pass "train.ema: resumed bitwise, eval of /ema or the weights with and without TTA, exact in reproducible mode, 2 ranks"
