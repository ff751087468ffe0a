#!/usr/bin/env bash
# Streaming keeps memory bounded: a 147 MB packed file (48000 images of 3x32x32, 70 chunks) trains
# with data.cache_mb = 16 in a peak resident set (VmHWM, /usr/bin/time) within 48 MB of a run on a
# small file, while holding it in memory (data.cache_mb = 0) costs at least 60 MB more (the
# control: the measurement sees the data; start-up's own peak hides part of the file's 147 MB). train.shuffle = false and a subset make the epoch read every
# chunk of the file once, in order, in seconds.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python numpy
[ -x /usr/bin/time ] || skip "no /usr/bin/time (apt install time)"
"$PY" - "$WORK" << 'PYEOF'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(3)
for split, n in (("big", 48000), ("small", 600)):
    np.save("%s/%s_x.npy" % (out, split), rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8))
    np.save("%s/%s_y.npy" % (out, split), rng.integers(0, 10, size=n))
PYEOF
for split in big small; do
  "$BIN" pack --format npy --input "$WORK/${split}_x.npy,$WORK/${split}_y.npy" \
    --output "$WORK/$split.h5" > "$WORK/pack_$split.log" 2>&1 ||
    { cat "$WORK/pack_$split.log"; fail "pack $split failed"; }
  rm "$WORK/${split}_x.npy"
done
peak_mb() {  # peak_mb NAME TRAIN_FILE ARGS...: trains 1 epoch, prints the peak RSS in MB
  local name=$1 file=$2; shift 2
  /usr/bin/time -f "%M" -o "$WORK/$name.rss" "$BIN" --model.preset lenet --data.dataset packed \
    --data.train_file "$file" --data.test_file "$WORK/small.h5" --data.train_limit 3000 \
    --train.shuffle false --train.epochs 1 --train.batch_size 100 --runtime.threads 1 \
    --data.normalize none --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name failed"; }
  echo $(($(tail -1 "$WORK/$name.rss") / 1024))
}
base=$(peak_mb base "$WORK/small.h5" --data.train_limit 0)
streamed=$(peak_mb streamed "$WORK/big.h5" --data.cache_mb 16 --data.workers 2)
held=$(peak_mb held "$WORK/big.h5")
echo "  peak RSS: small file $base MB, 147 MB file streamed (cache 16 MB) $streamed MB, held $held MB"
[ $((streamed - base)) -le 48 ] || fail "streaming took $((streamed - base)) MB over the small run (> 48)"
[ $((held - streamed)) -ge 60 ] || fail "holding the file cost only $((held - streamed)) MB more: the measurement is blind"
pass "a 147 MB file streams through a 16 MB cache in $((streamed - base)) MB over a small file's run"
