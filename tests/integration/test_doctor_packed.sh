#!/usr/bin/env bash
# `ddp_train doctor` on packed files compares each file's fingerprint (its stored per-chunk CRCs,
# shape and class attributes, and size) across ranks. The config names node-local copies by the
# same relative path; ranks 0 and 1 run in one directory, rank 2 in another, as on two nodes with
# their own copies. Identical copies pass, with the fingerprint of each file; a copy of the training
# file that differs in one pixel of one sample (re-packed, so every CRC in it is valid) fails the
# dataset check naming the file, rank 2 and its host, and leaves the test file alone; the same
# holds when streaming (data.cache_mb > 0, where the pixels are not read); a truncated copy fails
# naming rank 2 and the file. Every fingerprint shown is the one h5py + zlib compute from the file
# as docs/dataset_format.md defines it (tests/integration/pack/fingerprint.py).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python numpy h5py
"$PY" - "$WORK" << 'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(3)
for split, n in (("train", 1500), ("test", 300)):
    x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, size=n)
    np.save("%s/%s_x.npy" % (out, split), x)
    np.save("%s/%s_y.npy" % (out, split), y)
    if split == "train":
        x[1234, 7, 9, 1] ^= 1  # another version of one sample: one bit of one pixel
        np.save("%s/other_x.npy" % out, x)
PYEOF
mkdir -p "$WORK/node_a" "$WORK/node_b"
pack() {  # pack X_PREFIX Y_PREFIX OUT
  "$BIN" pack --format npy --input "$WORK/$1_x.npy,$WORK/$2_y.npy" --output "$3" > "$WORK/pack.log" 2>&1 ||
    { cat "$WORK/pack.log"; fail "pack $3 failed"; }
}
pack train train "$WORK/node_a/train.h5"
pack test test "$WORK/node_a/test.h5"
pack other train "$WORK/other.h5"
cp "$WORK/node_a/train.h5" "$WORK/node_a/test.h5" "$WORK/node_b/"

args=(doctor --model.preset lenet --data.dataset packed --data.train_file train.h5
      --data.test_file test.h5 --data.normalize config --runtime.threads 1 --no-sweep)
# Ranks 0 and 1 in node_a, rank 2 in node_b: the same config, the same relative paths.
doctor() {  # doctor LOG EXTRA_ARGS...
  local log=$1; shift
  set +e
  mpirun_local -np 2 sh -c 'cd "$0" && exec "$@"' "$WORK/node_a" "$BIN" "${args[@]}" "$@" : \
    -np 1 sh -c 'cd "$0" && exec "$@"' "$WORK/node_b" "$BIN" "${args[@]}" "$@" > "$log" 2>&1
  rc=$?
  set -e
  cat "$log"
}

# --- the same copies everywhere ------------------------------------------------------------------
doctor "$WORK/same.log"
[ "$rc" = 0 ] || fail "doctor failed with identical copies on every rank"
grep -qE "^\[PASS\] dataset +packed files 'train.h5' and 'test.h5': 1500 train \+ 300 test samples, every chunk's CRC32 checked \(the same on every rank\)" "$WORK/same.log" ||
  fail "the dataset check does not pass with what every rank read"
grep -qE "^ +'train.h5': 1500 samples \(3x32x32 raw, 10 classes\), [0-9]+ bytes, fingerprint [0-9a-f]{8}$" "$WORK/same.log" ||
  fail "no fingerprint line for train.h5"
grep -qE "^ +'test.h5': 300 samples \(3x32x32 raw, 10 classes\)" "$WORK/same.log" || fail "no fingerprint line for test.h5"
# The fingerprint is the one docs/dataset_format.md defines, computed by h5py + zlib.
for f in train test; do
  want=$("$PY" "$SRC/tests/integration/pack/fingerprint.py" "$WORK/node_a/$f.h5")
  grep -qE "^ +'$f.h5': .* $(stat -c %s "$WORK/node_a/$f.h5") bytes, fingerprint $want$" "$WORK/same.log" ||
    fail "$f.h5: the doctor's fingerprint or size is not the documented one ($want)"
done

# --- rank 2's training file is another version -----------------------------------------------------
cp "$WORK/other.h5" "$WORK/node_b/train.h5"
[ "$(stat -c %s "$WORK/other.h5")" = "$(stat -c %s "$WORK/node_a/train.h5")" ] ||
  echo "note: the two versions differ in size too"
for mode in memory stream; do
  extra=()
  [ $mode = stream ] && extra=(--data.cache_mb 4)
  doctor "$WORK/diff_$mode.log" "${extra[@]}"
  [ "$rc" = 1 ] || fail "$mode: doctor exited $rc although rank 2 has another train.h5"
  grep -q "^\[FAIL\] dataset .*the ranks see different copies" "$WORK/diff_$mode.log" ||
    fail "$mode: the dataset check did not fail on different copies"
  grep -qE "^ +'train.h5' differs between ranks:$" "$WORK/diff_$mode.log" || fail "$mode: train.h5 not named"
  grep -qE "^ +rank 2 \($(hostname)\): 1500 samples .* fingerprint [0-9a-f]{8}$" "$WORK/diff_$mode.log" ||
    fail "$mode: rank 2 and its host are not named with its copy's fingerprint"
  grep -qE "^ +ranks 0, 1 \($(hostname)\): 1500 samples" "$WORK/diff_$mode.log" ||
    fail "$mode: ranks 0 and 1 not listed with their copy"
  if grep -q "'test.h5' differs" "$WORK/diff_$mode.log"; then fail "$mode: test.h5 reported though identical"; fi
  grep -q "^doctor: 1 check(s) failed" "$WORK/diff_$mode.log" || fail "$mode: no failure verdict"
done
# Each group is shown with its own copy's fingerprint (h5py + zlib's, as documented).
grep -qE "^ +rank 2 \(.* fingerprint $("$PY" "$SRC/tests/integration/pack/fingerprint.py" "$WORK/other.h5")$" \
  "$WORK/diff_stream.log" || fail "rank 2's fingerprint is not its file's"
grep -qE "^ +ranks 0, 1 \(.* fingerprint $("$PY" "$SRC/tests/integration/pack/fingerprint.py" "$WORK/node_a/train.h5")$" \
  "$WORK/diff_stream.log" || fail "the fingerprint of ranks 0 and 1 is not their file's"

# --- rank 2's test file is truncated ----------------------------------------------------------------
cp "$WORK/node_a/train.h5" "$WORK/node_b/train.h5"
head -c $(($(stat -c %s "$WORK/node_a/test.h5") / 2)) "$WORK/node_a/test.h5" > "$WORK/node_b/test.h5"
doctor "$WORK/trunc.log" --data.cache_mb 4
[ "$rc" != 0 ] || fail "doctor passed with a truncated test.h5 on rank 2"
# Either the doctor's report or the start-up check of the files (which opens them) names both.
grep -qE "rank 2[ (].*node_b/test\.h5" "$WORK/trunc.log" || fail "the truncated copy is not reported with rank 2 and its path"
pass "doctor: identical packed copies pass with their fingerprints; another version of train.h5 on rank 2 fails naming the file, rank 2 and its host (in memory and streamed); a truncated copy fails"
