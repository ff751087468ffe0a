#!/usr/bin/env bash
# Data-parallel figures on this machine (issue: MPI data parallelism), all with 1 thread per rank and
# 256 samples per rank per step on CIFAR-10:
#   1. images/s with 1 rank and with 2 ranks, LeNet and the VGG-style net (target: 2 ranks >= 1.85x);
#   2. the share of all-reduce time hidden behind backward (VGG), by MPI_Test between layers and by a
#      progress thread (bench/progress_bench);
#   3. PyTorch 1.13 DDP (gloo, 2 processes x 1 thread) side by side: bench/torch_ddp.py runs after each
#      pair of ddp_train runs (when /usr/bin/python3 has torch), and the ratio of the medians is printed.
# Usage: bench/ddp_scaling.sh [BUILD_DIR] (default build); CIFAR=/path/to/cifar-10-batches-bin.
# Every figure is the median of REPEAT runs (default 3), interleaved (1 rank, 2 ranks, 1 rank, ...),
# because a shared or virtual machine has slow spells that would otherwise land on one side.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/ddp_train
data=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
limit=${LIMIT:-12800}   # training samples per epoch (epoch 2 is measured; epoch 1 warms up)
repeat=${REPEAT:-3}
mpi=(mpirun --bind-to core --map-by core --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
echo "command: $0 $*  (LIMIT=$limit, REPEAT=$repeat, data $data)"

field() {  # field RUN_DIR NAME: NAME of epoch 2
  grep '"epoch": 2' "$1/metrics.jsonl" | grep -o "\"$2\": [0-9.e+-]*" | head -1 | awk '{ print $2 }'
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
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
torch=0
/usr/bin/python3 -c 'import torch' 2> /dev/null && torch=1
torch_run() {  # torch_run lenet|vgg -> images/s of PyTorch DDP, 2 processes
  /usr/bin/python3 "$here/bench/torch_ddp.py" --steps 20 --model "$1" 2> /dev/null | awk '/img\/s/ { print $(NF - 1) }'
}
printf '%-10s %12s %12s %8s %12s %9s\n' model "1 rank img/s" "2 ranks img/s" speedup "torch DDP" "2r/torch"
for model in lenet vgg_small; do
  ones=(); twos=(); torchs=()
  for ((i = 0; i < repeat; i++)); do
    ones+=("$(field "$(run 1 $model true)" images_per_s)")
    twos+=("$(field "$(run 2 $model true)" images_per_s)")
    [ "$torch" = 1 ] && torchs+=("$(torch_run "${model%_small}")")
  done
  one=$(printf '%s\n' "${ones[@]}" | median); two=$(printf '%s\n' "${twos[@]}" | median)
  tor=0; [ "$torch" = 1 ] && tor=$(printf '%s\n' "${torchs[@]}" | median)
  printf '%-10s %12.0f %12.0f %7.2fx %12.0f %8.2fx\n' $model "$one" "$two" \
    "$(awk -v a="$two" -v b="$one" 'BEGIN { print a / b }')" "$tor" \
    "$(awk -v a="$two" -v b="$tor" 'BEGIN { print (b > 0 ? a / b : 0) }')"
  echo "    each run: 1 rank $(printf '%.0f ' "${ones[@]}")| 2 ranks $(printf '%.0f ' "${twos[@]}")| torch ${torchs[*]:-(not installed: apt-get install python3-torch libopenblas0)}"
done
echo
# The share of the all-reduce hidden behind backward, free of the ranks' jitter, and MPI_Test
# between layers (the trainer's way) against a progress thread: bench/progress_bench.cpp.
"${mpi[@]}" -np 2 "$(dirname "$bin")/bench/progress_bench" --model vgg_small --steps 20 --repeat "$((repeat + 2))"
