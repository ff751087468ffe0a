#!/usr/bin/env bash
# Cost of a snapshot relative to an epoch (issue: HDF5 snapshots, target < 5%): trains the VGG-style
# net with SGD momentum (weights + momentum in the snapshot) for one epoch on CIFAR-10 and prints the
# epoch time, the snapshot write time and the ratio.
# Usage: bench/snapshot_cost.sh [BUILD_DIR] (default build); CIFAR=..., LIMIT=samples (default all).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/ddp_train
data=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
dir=$(mktemp -d)
"$bin" --config "$here/configs/cifar_vgg.toml" --data.root "$data" --train.epochs 1 \
  --data.train_limit "${LIMIT:-0}" --data.test_limit 1000 --run-dir "$dir" > "$dir/log"
epoch_s=$(grep -o '"epoch_s": [0-9.e+-]*' "$dir/metrics.jsonl" | head -1 | awk '{ print $2 }')
snap_s=$(grep -o '^snapshot: .*(\([0-9.]*\) s)' "$dir/log" | tail -1 | sed 's/.*(\([0-9.]*\) s)/\1/')
size=$(stat -c %s "$dir"/snapshot_e0001.h5)
echo "command: $0 $*  (LIMIT=${LIMIT:-0})"
printf 'VGG epoch %.2f s, snapshot (%d bytes) %.3f s = %.2f%% of the epoch\n' "$epoch_s" "$size" "$snap_s" \
  "$(awk -v a="$snap_s" -v b="$epoch_s" 'BEGIN { print 100 * a / b }')"
rm -rf "$dir"
