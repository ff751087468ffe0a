#!/usr/bin/env bash
# `pack --val-fraction F` makes a training folder alone into a train + validation pair: F of each
# class (rounded; a class of one sample stays in training), chosen by --seed, goes to --val-output
# (default OUTPUT.val.h5); the two files together hold exactly the samples of a pack without the
# split, each in the source's order, disjoint; the split is recorded in both files' attributes;
# the same seed gives the same split, another seed another; training takes the pair.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
"$PY" - "$WORK/img" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(8)
for cls, n in [("ant", 10), ("bee", 7), ("cow", 1)]:
    os.makedirs(os.path.join(sys.argv[1], cls))
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            os.path.join(sys.argv[1], cls, "%02d.png" % i))
PYEOF
pack() {  # pack LOG ARGS...
  local log=$1; shift
  "$BIN" pack --format imagefolder --input "$WORK/img" "$@" > "$WORK/$log.log" 2>&1 \
    || { cat "$WORK/$log.log"; fail "pack $log failed"; }
}
pack full --output "$WORK/full.h5"
pack split --output "$WORK/train.h5" --val-fraction 0.3
grep -q "packed 13 samples in 3 classes" "$WORK/split.log" &&
  grep -qF "validation split: 5 samples (0.3 of each class, --seed 0) into $WORK/train.val.h5" "$WORK/split.log" \
  || { cat "$WORK/split.log"; fail "the summary does not give both files"; }
pack again --output "$WORK/again.h5" --val-fraction 0.3 --val-output "$WORK/again_val.h5"
pack seed1 --output "$WORK/seed1.h5" --val-fraction 0.3 --val-output "$WORK/seed1_val.h5" --seed 1
"$PY" - "$WORK" << 'PYEOF' || fail "the split is wrong"
import sys
import h5py
import numpy as np
w = sys.argv[1]
def load(name):
    f = h5py.File("%s/%s" % (w, name), "r")
    return f, list(f["labels"][()]), [bytes(x.tobytes()) for x in f["images"][()]]
full, fl, fi = load("full.h5")
train, tl, ti = load("train.h5")
val, vl, vi = load("train.val.h5")
def check(ok, what):
    if not ok:
        print("FAIL:", what); sys.exit(1)
for c, n in [(0, 3), (1, 2), (2, 0)]:
    check(vl.count(c) == n, "class %d: %d validation samples, want %d" % (c, vl.count(c), n))
check(len(tl) + len(vl) == len(fl) == 18, "sample counts")
pairs = list(zip(fl, fi))
check(sorted(list(zip(tl, ti)) + list(zip(vl, vi))) == sorted(pairs), "train + validation != the full pack")
check(not set(ti) & set(vi), "a sample is in both files")
def subsequence(part):
    it = iter(pairs)
    return all(p in it for p in part)
check(subsequence(list(zip(tl, ti))) and subsequence(list(zip(vl, vi))), "the source order is not kept")
for f, split in [(train, "train"), (val, "validation")]:
    a = f.attrs
    s = a["split"].decode() if isinstance(a["split"], bytes) else a["split"]
    check(s == split and abs(a["split_fraction"] - 0.3) < 1e-12 and a["split_seed"] == 0,
          "attributes of the %s file: %s" % (split, dict(a)))
    check(list(f["classes"].asstr()[()]) == ["ant", "bee", "cow"], "class names")
_, al, ai = load("again_val.h5")
check(ai == vi, "the same seed gave another split")
_, sl, si = load("seed1_val.h5")
check(si != vi and len(si) == len(vi), "--seed 1 gave the same split")
print("split checked: stratified, complete, disjoint, ordered, recorded, seeded")
PYEOF

"$BIN" --data.dataset packed --data.train_file "$WORK/train.h5" --data.test_file "$WORK/train.val.h5" \
  --model.preset lenet --train.epochs 1 --train.batch_size 4 --runtime.threads 2 --run-dir "$WORK/run" \
  > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training on the pair failed"; }
grep -q '"test_samples": 5' "$WORK/run/metrics.jsonl" || grep -q '"test_samples":5' "$WORK/run/metrics.jsonl" \
  || { head -c 600 "$WORK/run/metrics.jsonl"; fail "evaluation did not use the 5 validation samples"; }

refused() {  # refused WHAT PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  if "$BIN" pack --format imagefolder --input "$WORK/img" "$@" > "$WORK/log" 2>&1; then fail "$what: accepted"; fi
  grep -qE -- "$pattern" "$WORK/log" || { cat "$WORK/log"; fail "$what: message does not match '$pattern'"; }
}
refused "the same file twice" "val-output '$WORK/same.h5' is the --output file" \
  --output "$WORK/same.h5" --val-fraction 0.2 --val-output "$WORK/same.h5"
refused "--val-output alone" "val-output .* is written only with --val-fraction" \
  --output "$WORK/o.h5" --val-output "$WORK/v.h5"
refused "a fraction too small" "val-fraction 0.01.* takes no sample .* for validation" \
  --output "$WORK/o.h5" --val-fraction 0.01
refused "a fraction of 1" "val-fraction" --output "$WORK/o.h5" --val-fraction 1
[ ! -e "$WORK/o.h5" ] && [ ! -e "$WORK/o.val.h5" ] || fail "a refused pack wrote a file"
pass "pack --val-fraction: stratified, seeded, recorded; the pair trains"
