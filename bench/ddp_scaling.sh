#!/usr/bin/env bash
# Data-parallel figures on this machine (issue: MPI data parallelism), all with 1 thread per rank and
# 256 samples per rank per step on CIFAR-10:
#   1. images/s with 1 rank and with 2 ranks, LeNet and the VGG-style net (target: 2 ranks >= 1.85x);
#   2. the share of all-reduce time hidden behind backward (comm.overlap true vs false, VGG);
#   3. PyTorch 1.13 DDP (gloo, 2 processes) side by side: bench/torch_ddp.py.
# Usage: bench/ddp_scaling.sh [BUILD_DIR] (default build); CIFAR=/path/to/cifar-10-batches-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/ddp_train
data=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
limit=${LIMIT:-12800}   # training samples per epoch (epoch 2 is measured; epoch 1 warms up)
mpi=(mpirun --bind-to core --map-by core --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
echo "command: $0 $*  (LIMIT=$limit, data $data)"

field() {  # field RUN_DIR NAME: NAME of epoch 2
  grep '"epoch": 2' "$1/metrics.jsonl" | grep -o "\"$2\": [0-9.e+-]*" | awk '{ print $2 }'
}
run() {  # run NP MODEL OVERLAP -> prints the run dir
  local dir; dir=$(mktemp -d)
  "${mpi[@]}" -np "$1" "$bin" --config "$here/configs/cifar.toml" --model.preset "$2" \
    --data.root "$data" --data.train_limit "$limit" --data.test_limit 256 --train.epochs 2 \
    --train.batch_size 256 --runtime.threads 1 --optim.name sgd --optim.momentum 0.9 \
    --schedule.name constant --schedule.warmup_epochs 0 --comm.overlap "$3" --run-dir "$dir" \
    > "$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
  echo "$dir"
}
printf '%-10s %12s %12s %8s\n' model "1 rank img/s" "2 ranks img/s" speedup
for model in lenet vgg_small; do
  one=$(field "$(run 1 $model true)" images_per_s)
  two=$(field "$(run 2 $model true)" images_per_s)
  printf '%-10s %12.0f %12.0f %7.2fx\n' $model "$one" "$two" "$(awk -v a="$two" -v b="$one" 'BEGIN { print a / b }')"
done
echo
on=$(run 2 vgg_small true); off=$(run 2 vgg_small false)
w_on=$(field "$on" comm_wait_s); w_off=$(field "$off" comm_wait_s)
printf 'VGG, 2 ranks: all-reduce wait %.3f s blocking, %.3f s overlapped -> %.0f%% hidden behind backward\n' \
  "$w_off" "$w_on" "$(awk -v a="$w_on" -v b="$w_off" 'BEGIN { print (b > 0 ? 100 * (1 - a / b) : 0) }')"
