#!/usr/bin/env bash
# The cost of train.reproducible (issue 30), side by side: ResNet-20 on real CIFAR-10, global batch
# 128, augmentation on, the default mode against train.reproducible = true (chunks of 32 samples,
# each computed alone on one thread, exact int64 sums), on 1 rank x 2 threads and 2 ranks x 1 thread.
# Every run trains 2 epochs of LIMIT samples and the second epoch's images/s is taken (the first
# warms up). The four configurations are interleaved REPEAT times (default, reproducible, default,
# ...) so that a slow spell of a shared machine does not land on one side; the table gives each
# side's median and its spread (min .. max), and the ratio of the medians.
#
#   bench/reproducible_cost.sh [BUILD_DIR]      # LIMIT=1280 REPEAT=5 CHUNK=32 by default
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/ddp_train
data=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
limit=${LIMIT:-1280}
repeat=${REPEAT:-5}
chunk=${CHUNK:-32}
[[ -f "$data/data_batch_1.bin" ]] || { echo "no CIFAR-10 at $data (set CIFAR=)"; exit 77; }
mpi=(mpirun --bind-to none --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "command: $0 $*  (LIMIT=$limit, REPEAT=$repeat, CHUNK=$chunk, data $data)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs;" \
  "flags: $(grep -m1 -o 'avx512f\|avx512_bf16\|avx512_vnni\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# run NP THREADS REPRODUCIBLE -> images/s of epoch 2
run() {
  local dir; dir=$(mktemp -d -p "$work")
  "${mpi[@]}" -np "$1" "$bin" --config "$here/configs/cifar_resnet20.toml" --data.root "$data" \
    --data.train_limit "$limit" --data.test_limit 128 --train.epochs 2 --train.global_batch 128 \
    --train.save_every 0 --runtime.threads "$2" --train.reproducible "$3" --train.chunk "$chunk" \
    --run.tensorboard false --run-dir "$dir" > "$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
  python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("epoch") == 2 and "test_acc" in r: print(round(r["images_per_s"], 1))' "$dir/metrics.jsonl"
  rm -rf "$dir"
}
stats() {  # median min max of the arguments
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f %.1f %.1f", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
declare -A runs
layouts=("1 2" "2 1")
for ((i = 0; i < repeat; i++)); do
  for layout in "${layouts[@]}"; do
    for mode in false true; do
      runs["$layout $mode"]+="$(run $layout $mode) "
    done
  done
done
printf '%-16s %22s %26s %7s\n' layout "default img/s (range)" "reproducible img/s (range)" ratio
for layout in "${layouts[@]}"; do
  read -r dm dlo dhi <<< "$(stats ${runs["$layout false"]})"
  read -r rm rlo rhi <<< "$(stats ${runs["$layout true"]})"
  set -- $layout
  printf '%-16s %8.1f (%5.1f..%5.1f) %12.1f (%5.1f..%5.1f) %6.2fx\n' "$1 rank x $2 thr" "$dm" "$dlo" "$dhi" \
    "$rm" "$rlo" "$rhi" "$(awk -v a="$rm" -v b="$dm" 'BEGIN { print a / b }')"
  echo "    each run: default ${runs["$layout false"]}| reproducible ${runs["$layout true"]}"
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
