#!/usr/bin/env bash
# data.train_limit / data.test_limit take a subset chosen by train.seed, not the first N: on a
# class-ordered packed file (labels 0,0,...,9,9, as a folder-by-folder export holds them) the
# limited sets span all 10 classes where data.limit_subset = "first" holds one or two, and the
# subset is the same on every world size: 2 ranks x 30 train the weights of 1 rank x 60 (within
# 1e-5, the float summation order; another subset moves them by far more).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
source "$(dirname "$0")/pack/pack_npy.sh"
find_python numpy
"$PY" - "$WORK" << 'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
for split, n in (("train", 2000), ("test", 1000)):
    labels = np.repeat(np.arange(10, dtype=np.int64), n // 10)  # class-ordered
    # Each class a bright square at its own place on noise: learnable, so weights move.
    x = rng.integers(0, 64, size=(n, 28, 28, 1), dtype=np.uint8)
    for i, c in enumerate(labels):
        x[i, 2 + 2 * c:10 + 2 * c, 4:20, 0] = 230
    np.save("%s/%s_x.npy" % (out, split), x)
    np.save("%s/%s_y.npy" % (out, split), labels)
PYEOF
pack_npy_splits "$WORK"
common=(--config "$FASHION_CONFIG" --data.dataset packed
        --data.train_file "$WORK/train.h5" --data.test_file "$WORK/test.h5"
        --data.train_limit 300 --data.test_limit 100 --train.epochs 1 --runtime.threads 1
        --train.seed 9)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
run np1 1 --train.batch_size 60
grep -q "^data subset: .*train.h5' (300 of 2000 samples, a random subset by train.seed 9), 10 of 10 classes present" "$WORK/np1.log" ||
  { grep "^data" "$WORK/np1.log"; fail "the training subset does not span the 10 classes"; }
grep -q "^data subset: .*test.h5' (100 of 1000 samples, a random subset by train.seed 9), 10 of 10 classes present" "$WORK/np1.log" ||
  { grep "^data" "$WORK/np1.log"; fail "the test subset does not span the 10 classes"; }
grep -q '"test_samples": 100' "$WORK/np1/metrics.jsonl" || fail "the run did not evaluate 100 test samples"

run np2 2 --train.batch_size 30
diff <(losses_5sig "$WORK/np1/metrics.jsonl") <(losses_5sig "$WORK/np2/metrics.jsonl") ||
  fail "1 rank and 2 ranks differ in training loss: not the same subset"
d=$(max_rel_diff "$WORK/np1/snapshot_e0001.h5" "$WORK/np2/snapshot_e0001.h5")
ge 1e-5 "$d" || fail "1 rank x 60 and 2 ranks x 30: final weights differ by $d (relative) > 1e-5"
# The control: the first N train other weights (so the comparison above can see a subset change).
run first 1 --train.batch_size 60 --data.limit_subset first
grep -q "^data subset: .*train.h5' (first 300 of 2000 samples), 2 of 10 classes present" "$WORK/first.log" ||
  { grep "^data" "$WORK/first.log"; fail "limit_subset = first does not take the first 300"; }
grep -q "^data subset: .*test.h5' (first 100 of 1000 samples), 1 of 10 classes present" "$WORK/first.log" ||
  { grep "^data" "$WORK/first.log"; fail "limit_subset = first does not take the first 100"; }
f=$(max_rel_diff "$WORK/np1/snapshot_e0001.h5" "$WORK/first/snapshot_e0001.h5")
ge "$f" 1e-3 || fail "the first 300 and the random 300 train weights only $f apart"
echo "  random subset: 10 of 10 classes; 1 rank == 2 ranks within $d; first N: other weights ($f)"
pass "limits take a seeded random subset that spans the classes, the same on 1 and 2 ranks"
