#!/usr/bin/env bash
# Time to accuracy on CIFAR-10: ddp_train's speed-run recipe (configs/cifar10_speedrun.toml) and
# airbench94 (KellerJordan/cifar10-airbench, eager and torch.compile'd) on the same GPU, in the same
# session, from the same CIFAR-10 binaries; each run a fresh process timed from its start (every
# import, initialisation, compilation and warm-up included) to its final test accuracy.
#
#   bench/time_to_accuracy.sh [--seeds N] [--bin build/ddp_train] [--config FILE] [--data DIR]
#                             [--airbench FILE] [--airbench-compiled FILE] [--python PY]
#                             [--precision P] [--out DIR] [-- EXTRA ddp_train ARGS]
#
#   --seeds N               runs per tool (default 5), seeds 1..N for ddp_train (airbench seeds
#                           itself from the clock, as its script does)
#   --data DIR              the CIFAR-10 binaries (default ../shared/data/cifar-10-batches-bin)
#   --airbench FILE         airbench94.py, --airbench-compiled FILE airbench94_compiled.py: the
#                           scripts are not in this repository (we do not ship their code) and a
#                           GPU machine may have no network: fetch them where there is one and copy
#                           them over (e.g. into gpu_bundle/, which travels with the tree), see
#                           bench/README.md. Without them only ddp_train is timed.
#   --python PY             the Python with a CUDA torch for airbench (default python3)
#   --precision P           ddp_train's runtime.precision (default bf16; fp32 on a CPU)
#   --out DIR               results.jsonl, table.md and every run's log (default
#                           time_to_accuracy_out/)
#
# Prints the table (mean ± sample standard deviation, min and max of wall time and accuracy, and
# each tool's wall time relative to ddp_train's) and writes it to DIR/table.md.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seeds=5
bin=$src/build/ddp_train
config=$src/configs/cifar10_speedrun.toml
data=$src/../shared/data/cifar-10-batches-bin
airbench=""
compiled=""
py=python3
precision=bf16
out=time_to_accuracy_out
extra=()
while (($#)); do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --airbench) airbench=$2; shift 2 ;;
    --airbench-compiled) compiled=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "time_to_accuracy: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "time_to_accuracy: $*" >&2; exit 1; }
[ -x "$bin" ] || die "no ddp_train at $bin (--bin)"
[ -f "$config" ] || die "no config $config (--config)"
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  [ -f "$data/$f.bin" ] || die "CIFAR-10 file $data/$f.bin not found (--data DIR): both sides need the full set"
done
for f in "$airbench" "$compiled"; do
  [ -z "$f" ] || [ -f "$f" ] || die "no airbench script at $f"
done
if [ -n "$airbench$compiled" ]; then
  "$py" -c 'import torch, torchvision, numpy; assert torch.cuda.is_available()' 2> /dev/null ||
    die "$py has no torch/torchvision with a GPU: airbench needs one (--python PY)"
fi
data=$(cd "$data" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
results=$out/results.jsonl
: > "$results"
driver=("$py" "$src/bench/time_to_accuracy.py")
[ -n "$airbench$compiled" ] || driver=(python3 "$src/bench/time_to_accuracy.py")

# The tools take turns seed by seed, so that a drift of the machine (clocks, temperature) touches
# them alike.
for ((s = 1; s <= seeds; s++)); do
  echo "seed $s: ddp_train"
  "${driver[@]}" ours --seed "$s" --out "$results" -- "$bin" --config "$config" \
    --data.root "$data" --train.seed "$s" --run.dir "$out/run_$s" --run.overwrite true \
    --runtime.precision "$precision" "${extra[@]}"
  if [ -n "$airbench" ]; then
    echo "seed $s: airbench94"
    "${driver[@]}" airbench --tool airbench94 --seed "$s" --out "$results" \
      --workdir "$out/airbench_work" --cifar "$data" -- "$py" "$(cd "$(dirname "$airbench")" && pwd)/$(basename "$airbench")"
  fi
  if [ -n "$compiled" ]; then
    echo "seed $s: airbench94_compiled"
    "${driver[@]}" airbench --tool airbench94_compiled --seed "$s" --out "$results" \
      --workdir "$out/airbench_work" --cifar "$data" -- "$py" "$(cd "$(dirname "$compiled")" && pwd)/$(basename "$compiled")"
  fi
done
"${driver[@]}" table "$results" | tee "$out/table.md"
