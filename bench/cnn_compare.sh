#!/usr/bin/env bash
# The CNNs of issue 14 side by side with PyTorch 1.13, in one run (issue: real models, item 5):
# ResNet-20 (and ResNet-18 with the CIFAR stem, MobileNetV2) on CIFAR-10-shaped data, batch 128
# per rank, SGD momentum 0.9,
#   1. one process x 2 threads: ddp_train against torch with torch.set_num_threads(2);
#   2. mpirun -np 2 x 1 thread: ddp_train against PyTorch DDP on gloo, 2 processes x 1 thread.
# ddp_train trains on real CIFAR-10 (its epoch 2 is measured, loading included; epoch 1 warms up);
# torch steps on a synthetic batch already in memory, which can only flatter torch. Runs alternate
# (ddp_train, torch, ddp_train, ...) so that a slow spell of this shared machine hits both; each
# figure is the median of REPEAT runs, with every run listed.
# Usage: bench/cnn_compare.sh [BUILD_DIR] (default build); MODELS="resnet20 resnet18 mobilenet_v2",
# REPEAT=3, LIMIT=2560 (training samples per epoch), CIFAR=/path/to/cifar-10-batches-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build}/ddp_train
data=${CIFAR:-$here/../shared/data/cifar-10-batches-bin}
models=${MODELS:-resnet20 resnet18 mobilenet_v2}
repeat=${REPEAT:-3}
limit=${LIMIT:-2560}
steps=${STEPS:-10}
mpi=(mpirun --bind-to core --map-by core --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
echo "command: $0 $*  (MODELS='$models' REPEAT=$repeat LIMIT=$limit STEPS=$steps, data $data)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

field() {  # field RUN_DIR NAME: NAME of epoch 2
  grep '"epoch": 2' "$1/metrics.jsonl" | grep -o "\"$2\": [0-9.e+-]*" | head -1 | awk '{ print $2 }'
}
ddp() {  # ddp NP THREADS MODEL -> images/s of epoch 2
  local dir; dir=$(mktemp -d)
  local launch=()
  [ "$1" -gt 1 ] && launch=("${mpi[@]}" -np "$1")
  "${launch[@]}" "$bin" --config "$here/configs/cifar.toml" --model.preset "$3" \
    --data.root "$data" --data.train_limit "$limit" --data.test_limit 128 --data.augment false \
    --train.epochs 2 --train.batch_size 128 --runtime.threads "$2" --optim.name sgd \
    --optim.momentum 0.9 --schedule.name constant --schedule.warmup_epochs 0 --run-dir "$dir" \
    > "$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
  field "$dir" images_per_s
  rm -rf "$dir"
}
torch() {  # torch WORLD MODEL -> images/s
  /usr/bin/python3 "$here/bench/torch_cnn.py" --model "$2" --batch 128 --threads 2 --world "$1" \
    --steps "$steps" 2> /dev/null | awk '/img\/s/ { print $(NF - 1) }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

printf '%-13s %-22s %12s %12s %8s\n' model setup "ddp_train" "torch 1.13" ratio
for model in $models; do
  for setup in "1 2" "2 1"; do
    read -r np threads <<< "$setup"
    ours=(); theirs=()
    for ((i = 0; i < repeat; i++)); do
      ours+=("$(ddp "$np" "$threads" "$model")")
      theirs+=("$(torch "$np" "$model")")
    done
    o=$(printf '%s\n' "${ours[@]}" | median); t=$(printf '%s\n' "${theirs[@]}" | median)
    label="$np proc x $threads thr"
    [ "$np" -gt 1 ] && label="$label (DDP)"
    printf '%-13s %-22s %12.1f %12.1f %7sx\n' "$model" "$label" "$o" "$t" "$(ratio "$o" "$t")"
    echo "    runs: ddp_train ${ours[*]} | torch ${theirs[*]}"
  done
done
