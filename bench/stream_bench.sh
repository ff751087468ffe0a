#!/usr/bin/env bash
# Streaming packed files (data.cache_mb > 0), two figures (issue 16, item 3):
#   1. speed: LeNet on CIFAR-10 repacked (ddp_train pack --format cifar10), images/s of epoch 2
#      held in memory (cache_mb 0) and streamed with a cache holding the whole file (256 MB: the
#      cost of the stream path itself) and a smaller one (64 MB of the 147 MB file: shuffled
#      batches re-read chunks), the latter also with data.shuffle_window 8 (8 chunks of ~2 MiB
#      shuffled at a time: each chunk read once); target: streamed within 5% of in-memory. Medians of REPEAT runs,
#      interleaved, 1 rank x THREADS compute threads.
#   2. larger than memory: a generated packed file of SIZE_GB (default 2.2) GB (3x64x64 noise), one
#      epoch on 2 ranks with data.cache_mb 128, each rank's peak resident memory (/usr/bin/time)
#      against the file size; target <= 25%. train.shuffle = false: in file order every chunk is
#      read once; a shuffled order reads about one ~2 MiB chunk per sample when the cache is much
#      smaller than the file.
# Usage: bench/stream_bench.sh [BUILD_DIR] (default build); CIFAR=/path/to/cifar-10-batches-bin,
# WORK=dir for the generated files (default a temporary dir; needs SIZE_GB + 0.2 GB free).
# Run on a quiet machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/build}")/ddp_train
cifar=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
repeat=${REPEAT:-3}
threads=${THREADS:-2}
size_gb=${SIZE_GB:-2.2}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
mpi=(mpirun --bind-to core --map-by core --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root --oversubscribe)
echo "command: $0 $*  (REPEAT=$repeat, THREADS=$threads, SIZE_GB=$size_gb, data $cifar, work $work)"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() {  # field RUN_DIR NAME: NAME of epoch 2
  grep '"epoch": 2' "$1/metrics.jsonl" | grep -o "\"$2\": [0-9.e+-]*" | head -1 | awk '{ print $2 }'
}

# 1. Speed on CIFAR-10.
if [ -f "$cifar/test_batch.bin" ]; then
  for split in train test; do
    [ -f "$work/cifar_$split.h5" ] || "$bin" pack --format cifar10 --input "$cifar" --split $split \
      --output "$work/cifar_$split.h5" > /dev/null
  done
  declare -A ips
  for r in $(seq "$repeat"); do
    for cache in 0 256 64 64w8; do
      dir=$(mktemp -d)
      window=0
      [[ $cache == *w* ]] && window=${cache#*w}
      "$bin" --config "$here/configs/cifar.toml" --model.preset lenet --data.dataset packed \
        --data.train_file "$work/cifar_train.h5" --data.test_file "$work/cifar_test.h5" \
        --data.normalize config --data.cache_mb "${cache%w*}" --data.shuffle_window "$window" \
        --train.epochs 2 --train.batch_size 128 \
        --data.test_limit 256 --runtime.threads "$threads" --run-dir "$dir" > "$dir.log" 2>&1 ||
        { tail "$dir.log"; exit 1; }
      ips[$cache]+="$(field "$dir" images_per_s) "
      rm -rf "$dir" "$dir.log"
    done
  done
  mem=$(echo ${ips[0]} | tr ' ' '\n' | median)
  for cache in 256 64 64w8; do
    s=$(echo ${ips[$cache]} | tr ' ' '\n' | median)
    what="cache_mb ${cache%w*}"
    [[ $cache == *w* ]] && what+=", shuffle_window ${cache#*w}"
    echo "LeNet/CIFAR-10 epoch 2, $threads threads: in memory $mem images/s [${ips[0]% }], streamed ($what) $s images/s [${ips[$cache]% }] = $(awk -v a="$s" -v b="$mem" 'BEGIN { printf "%.1f%%", 100 * a / b }') of in-memory (target >= 95%)"
  done
else
  echo "speed: skipped, no CIFAR-10 at $cifar (set CIFAR=)"
fi

# 2. Larger than memory (SIZE_GB=0 leaves it out).
[ "$size_gb" = 0 ] && exit 0
n=$(awk -v g="$size_gb" 'BEGIN { printf "%d", g * 1e9 / (3 * 64 * 64) }')
if [ ! -f "$work/big.h5" ]; then
  /usr/bin/python3 - "$work" "$n" << 'PYEOF'
import sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
x = np.lib.format.open_memmap(out + "/big_x.npy", mode="w+", dtype=np.uint8, shape=(n, 3, 64, 64))
rng = np.random.default_rng(1)
for i in range(0, n, 10000):
    x[i:i + 10000] = rng.integers(0, 256, size=x[i:i + 10000].shape, dtype=np.uint8)
x.flush()
np.save(out + "/big_y.npy", rng.integers(0, 10, size=n))
np.save(out + "/small_x.npy", rng.integers(0, 256, size=(500, 3, 64, 64), dtype=np.uint8))
np.save(out + "/small_y.npy", rng.integers(0, 10, size=500))
PYEOF
  "$bin" pack --format npy --input "$work/big_x.npy,$work/big_y.npy" --output "$work/big.h5" > /dev/null
  "$bin" pack --format npy --input "$work/small_x.npy,$work/small_y.npy" --output "$work/small.h5" > /dev/null
  rm -f "$work/big_x.npy"
fi
file_mb=$(($(stat -c %s "$work/big.h5") / 1048576))
dir=$(mktemp -d)
start=$(date +%s.%N)
"${mpi[@]}" -np 2 bash -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$dir" "$bin" \
  --model.preset lenet --data.dataset packed --data.train_file "$work/big.h5" \
  --data.test_file "$work/small.h5" --data.cache_mb 128 --data.normalize config \
  --train.shuffle false --train.epochs 1 --train.batch_size 256 --runtime.threads 1 \
  --run-dir "$dir/run" > "$dir.log" 2>&1 || { tail "$dir.log"; exit 1; }
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
for r in 0 1; do
  rss=$(($(tail -1 "$dir/rss.$r") / 1024))
  echo "larger than memory: $file_mb MB file, 1 epoch on 2 ranks in $secs s, rank $r peak RSS $rss MB = $(awk -v a=$rss -v b=$file_mb 'BEGIN { printf "%.1f%%", 100 * a / b }') of the file (target <= 25%)"
done
rm -rf "$dir" "$dir.log"
