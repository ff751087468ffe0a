#!/usr/bin/env bash
# Training from an encoded pack of JPEGs of varying sizes (40..260 pixels a side) with
# data.train_size 32: random-resized crops + flips for training, Resize + CenterCrop for evaluation,
# TurboJPEG's scaled decoding for small crops. The crops depend only on (seed, epoch, sample index):
# 2 ranks x batch 4 train what 1 rank x batch 8 does (to the float-summation tolerance of
# test_mpi_equivalence.sh), and without prefetching the bytes are the same. A varying-size pack
# without data.train_size, and data.eval_crop != data.train_size, are refused naming the keys.
# Streamed from disk, broadcast or held once per node, the pack trains bitwise the same weights.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL numpy
T=$SRC/tests/integration/pack
"$PY" "$T/make_sizes.py" "$WORK/train" 16 1
"$PY" "$T/make_sizes.py" "$WORK/test" 6 2
for split in train test; do
  "$BIN" pack --threads 2 --format imagefolder --input "$WORK/$split" --encoding encoded \
    --output "$WORK/$split.h5" > "$WORK/pack_$split.log" 2>&1 \
    || { cat "$WORK/pack_$split.log"; fail "pack $split failed"; }
done
data=(--data.dataset packed --data.train_file "$WORK/train.h5" --data.test_file "$WORK/test.h5")
common=(--model.preset lenet --train.epochs 1 --runtime.threads 1 "${data[@]}" --train.seed 3
        --data.train_size 32 --data.augment true --data.mean 0.5 --data.std 0.25)

# Refusals, each naming what to set.
if "$BIN" --model.preset lenet "${data[@]}" --run-dir "$WORK/no_size" > "$WORK/no_size.log" 2>&1; then
  fail "a varying-size pack trained without data.train_size"
fi
grep -q "varying sizes: set data.train_size" "$WORK/no_size.log" \
  || { cat "$WORK/no_size.log"; fail "no clear error for a varying-size pack without data.train_size"; }
if "$BIN" "${common[@]}" --data.eval_crop 28 --run-dir "$WORK/crop" > "$WORK/crop.log" 2>&1; then
  fail "data.eval_crop 28 with data.train_size 32 was accepted"
fi
grep -q "data.eval_crop = 28 differs from data.train_size = 32" "$WORK/crop.log" \
  || { cat "$WORK/crop.log"; fail "no clear error for data.eval_crop != data.train_size"; }

run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
run np1_b8 1 --train.batch_size 8
run np2_b4 2 --train.batch_size 4
run np2_b4_sync 2 --train.batch_size 4 --data.prefetch false
grep -q "of 3x32x32" "$WORK/np1_b8.log" || { cat "$WORK/np1_b8.log"; fail "the input is not 3x32x32"; }
grep -q '"test_samples": 18' "$WORK/np1_b8/metrics.jsonl" || fail "evaluation did not see 18 samples"
da=$(summary_field "$WORK/np2_b4/metrics.jsonl" weights_digest)
db=$(summary_field "$WORK/np2_b4_sync/metrics.jsonl" weights_digest)
[ -n "$da" ] && [ "$da" = "$db" ] || fail "prefetching changed the weights ($da vs $db)"
diff <(losses_5sig "$WORK/np1_b8/metrics.jsonl") <(losses_5sig "$WORK/np2_b4/metrics.jsonl") \
  || fail "1 rank x 8 and 2 ranks x 4 differ in training loss"
d=$(max_rel_diff "$WORK/np1_b8/snapshot_e0001.h5" "$WORK/np2_b4/snapshot_e0001.h5")
ge 1e-5 "$d" || fail "1 rank x 8 and 2 ranks x 4: final weights differ by $d (relative) > 1e-5"
# The same pack streamed (a 1 MiB cache of its chunks, the encoded bytes staged per batch) or
# shared once per node (data.distribute = broadcast; data.cache = node) trains bitwise the same.
run np1_stream 1 --train.batch_size 8 --data.cache_mb 1 --data.workers 2
run np2_stream 2 --train.batch_size 4 --data.cache_mb 1
run np2_bcast 2 --train.batch_size 4 --data.distribute broadcast
run np2_node 2 --train.batch_size 4 --data.cache_mb 1 --data.cache node
grep -q "is held once per node in shared memory" "$WORK/np2_node.log" ||
  { cat "$WORK/np2_node.log"; fail "data.cache = node did not hold the small pack per node"; }
for name in np1_stream np2_stream np2_bcast np2_node; do
  ref=np2_b4; [ "$name" = np1_stream ] && ref=np1_b8
  a=$(summary_field "$WORK/$ref/metrics.jsonl" weights_digest)
  b=$(summary_field "$WORK/$name/metrics.jsonl" weights_digest)
  [ -n "$b" ] && [ "$a" = "$b" ] || fail "$name trained other weights than $ref ($b vs $a)"
done
# Scaled decoding changes the pixels of small crops (an approximation), so the weights too.
run np1_full 1 --train.batch_size 8 --data.scaled_decode false
dfull=$(summary_field "$WORK/np1_full/metrics.jsonl" weights_digest)
d1=$(summary_field "$WORK/np1_b8/metrics.jsonl" weights_digest)
[ "$dfull" != "$d1" ] || fail "data.scaled_decode false gave the weights of scaled decoding"
pass "varying-size encoded pack trains at 32x32; 1x8 == 2x4 (max rel diff $d); streamed, broadcast and node-shared == in memory"
