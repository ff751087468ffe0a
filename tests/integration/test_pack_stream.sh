#!/usr/bin/env bash
# Streaming a packed file (data.cache_mb > 0) trains bitwise the weights of holding it in memory:
# 1 rank and 2 ranks, 1 or 3 loader threads, a cache of one chunk (every batch re-reads chunks)
# or a few, with augmentation and a random data.train_limit subset; the evaluations agree. With
# data.shuffle_window, the loader threads and the cache size change nothing either; nor does
# data.cache = node (the file held once per node when it fits, streamed per rank when not).
# data.normalize = "dataset" is refused (it needs every image up front). A chunk corrupted in the
# file is found while streaming: the error names the file, the chunk and its samples. The snapshots
# are compared bitwise (pack/same_weights.py) in one python process after the trainings. A subset
# of 1000 samples (it was 2000): with a cache of one chunk nearly every sample re-reads a 2 MiB
# chunk, which was most of the test's CPU time; what is compared does not depend on the count.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
source "$(dirname "$0")/pack/pack_npy.sh"
find_python numpy h5py
"$PY" - "$WORK" << 'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
for split, n in (("train", 3000), ("test", 700)):
    labels = rng.integers(0, 10, size=n)
    # Each class a bright bar at its own height on noise: learnable, so the weights move.
    x = rng.integers(0, 90, size=(n, 32, 32, 3), dtype=np.uint8)
    for i, c in enumerate(labels):
        x[i, 2 + 3 * c:5 + 3 * c, 4:28, :] = 220
    np.save("%s/%s_x.npy" % (out, split), x)
    np.save("%s/%s_y.npy" % (out, split), labels)
PYEOF
pack_npy_splits "$WORK"
# 3x32x32 images: 682 samples per ~2 MiB chunk, so the training file has 5 chunks.
common=(--model.preset lenet --data.dataset packed --data.train_file "$WORK/train.h5"
        --data.test_file "$WORK/test.h5" --data.train_limit 1000 --data.augment true
        --train.epochs 2 --train.batch_size 50 --runtime.threads 1 --train.seed 4)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
# same A B: equal evaluations now, and bitwise-equal final weights, checked by weights_checked
# with every other pair in one python process (h5py's start-up costs more than a comparison).
weight_pairs=()
same() {
  weight_pairs+=(same "$1" "$2")
  diff <(grep -o '"test_\(loss\|acc\)": [^,]*' "$WORK/$1/metrics.jsonl") \
    <(grep -o '"test_\(loss\|acc\)": [^,]*' "$WORK/$2/metrics.jsonl") || fail "$2 evaluates unlike $1"
}
# weights_checked: each pair given to same (and "differ A B" ones) compared by same_weights.py.
weights_checked() {
  "$PY" - "$SRC/tests/integration/pack/same_weights.py" "$WORK" "${weight_pairs[@]}" << 'PYEOF' ||
import contextlib, io, runpy, sys
script, work, args = sys.argv[1], sys.argv[2], sys.argv[3:]
bad = []
for want, a, b in zip(args[::3], args[1::3], args[2::3]):
    sys.argv = [script] + ["%s/%s/snapshot_e0002.h5" % (work, r) for r in (a, b)]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(script, run_name="__main__")
        equal = True
    except SystemExit as e:
        equal = not e.code
    if want == "same" and not equal:
        bad.append("%s trained other weights than %s" % (b, a))
    if want == "differ" and equal:
        bad.append("%s trained the weights of %s" % (b, a))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PYEOF
    fail "weights compared bitwise (same_weights.py): see above"
}
run mem1 1
run stream1 1 --data.cache_mb 2 --data.workers 1
run stream1w3 1 --data.cache_mb 6 --data.workers 3 --data.prefetch false
same mem1 stream1
same mem1 stream1w3
run mem2 2
run stream2 2 --data.cache_mb 3 --data.workers 2
same mem2 stream2
[ "$(grep -c '"test_acc"' "$WORK/mem1/metrics.jsonl")" = 2 ] || fail "not two evaluations in the metrics"

# data.cache = node: the training subset (1000 samples, ~3 MiB) fits in 2 ranks x 6 MiB, so each
# node holds it once in shared memory; in 2 ranks x 1 MiB it does not, so each rank streams it
# (through a cache of one chunk: the one being read is never evicted), and says so.
# Either way the weights are those of holding it in memory.
run node2 2 --data.cache_mb 6 --data.cache node
# The node holds only the 1000 kept samples of 3000 (data.train_limit): 3 MiB, not the file's 9.
grep -q "data.cache = node: .*train.h5 (3 MiB) is held once per node in shared memory" "$WORK/node2.log" ||
  { cat "$WORK/node2.log"; fail "data.cache = node did not say it holds the file per node"; }
same mem2 node2
run node2small 2 --data.cache_mb 1 --data.cache node
grep -q "data.cache = node: .*train.h5 takes 3 MiB in memory, more than 2 ranks x data.cache_mb = 2 MiB on this node: each rank streams it" "$WORK/node2small.log" ||
  { cat "$WORK/node2small.log"; fail "data.cache = node did not say why it streams per rank"; }
same mem2 node2small
# With data.shuffle_window the file held per node gives the chunk-wise order of streaming it.
run node2win 2 --data.cache_mb 6 --data.cache node --data.shuffle_window 2
grep -q "is held once per node in shared memory" "$WORK/node2win.log" ||
  { cat "$WORK/node2win.log"; fail "data.cache = node did not hold the file per node"; }
if "$BIN" "${common[@]}" --run-dir "$WORK/nodemem" --data.cache node > "$WORK/nodemem.log" 2>&1; then
  fail "data.cache = node was accepted for a file held in memory"
fi
grep -q 'data.cache = "node" shares a streamed file' "$WORK/nodemem.log" ||
  { cat "$WORK/nodemem.log"; fail "the error does not say that data.cache = node needs streaming"; }

# Settings streaming cannot honour are refused up front, naming the key.
if "$BIN" "${common[@]}" --run-dir "$WORK/norm" --data.cache_mb 2 --data.normalize dataset \
    > "$WORK/norm.log" 2>&1; then
  fail "data.normalize = dataset was accepted with a streamed file"
fi
grep -q 'data.normalize = "dataset" reads every training image up front' "$WORK/norm.log" ||
  { cat "$WORK/norm.log"; fail "the error does not say why data.normalize = dataset cannot stream"; }

# data.shuffle_window: chunk by chunk, in windows of 2 chunks. Its own order (not mem1's), but
# the same weights whatever the loader threads, on 1 rank and on 2 (the order is the same on
# every rank: data_sampler_test.cpp); an order that differs from the full shuffle's (so the key
# did something); refused without streaming.
run win1 1 --data.cache_mb 6 --data.workers 1 --data.shuffle_window 2
run win1w3 1 --data.cache_mb 6 --data.workers 3 --data.shuffle_window 2
run win2 2 --data.cache_mb 6 --data.workers 2 --data.shuffle_window 2
run win2w1 2 --data.cache_mb 4 --data.workers 1 --data.shuffle_window 2
same win1 win1w3
same win2 win2w1
same win2 node2win
# data.shuffle_window = 2 must not train the full shuffle's weights (else the window changed nothing).
weight_pairs+=(differ mem1 win1)
weights_checked
if "$BIN" "${common[@]}" --run-dir "$WORK/winmem" --data.shuffle_window 2 > "$WORK/winmem.log" 2>&1; then
  fail "data.shuffle_window was accepted for a file held in memory"
fi
grep -q "data.shuffle_window = 2 orders a streamed file's chunks" "$WORK/winmem.log" ||
  { cat "$WORK/winmem.log"; fail "the error does not say that data.shuffle_window needs streaming"; }

# Corrupt one byte of chunk 2 of the training images (the file's own chunk table says where).
"$PY" - "$WORK/train.h5" << 'PYEOF'
import sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    off = f["images"].id.get_chunk_info(2).byte_offset
with open(sys.argv[1], "r+b") as g:
    g.seek(off + 100)
    b = g.read(1)
    g.seek(off + 100)
    g.write(bytes([b[0] ^ 0xFF]))
PYEOF
if mpirun_local -np 1 "$BIN" "${common[@]}" --run-dir "$WORK/bad" --data.cache_mb 2 > "$WORK/bad.log" 2>&1; then
  fail "training streamed a corrupt chunk without an error"
fi
grep -q "train.h5'*: chunk 2 of 5 (samples 1364..2045) has CRC32 .* the file is corrupt" "$WORK/bad.log" ||
  { cat "$WORK/bad.log"; fail "the error does not name the file, the chunk and its samples"; }
pass "streamed training == in-memory training bitwise (1 and 2 ranks, 1-3 loader threads, data.cache = node shared or not); chunk-windowed shuffles agree across ranks and threads; a corrupt chunk is named"
