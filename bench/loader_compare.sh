#!/usr/bin/env bash
# Loader speed (issue 16): ddp_train's training input pipeline against torchvision's, on the same
# JPEG files, one thread each, side by side in one run. A generated ImageFolder of JPEGs of
# ImageNet-like sizes (bench/make_jpeg_folder.py: 400-500 x 300-375, varying, so every batch decodes)
# is packed encoded (ddp_train pack --encoding encoded); then, ROUNDS times with the order rotated
# each round:
#   ddp scaled  build/bench/ddp_loader_bench (the trainer's BatchLoader, one loader thread: decode,
#               RandomResizedCrop(224) with TurboJPEG scaled decoding, flip, normalise)
#   ddp exact   the same with --scaled-decode 0 (torchvision's pixels bit for bit)
#   torch       bench/torch_loader.py: ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip +
#               ToTensor + Normalize, DataLoader(num_workers=0, batch 64): one thread
# Each run: one untimed epoch, EPOCHS timed. Printed: medians [min-max] of images/s (wall) and of
# images per CPU second (the process's user+sys time: steadier on a shared machine), and the
# ratios ddp/torch of the medians.
# Usage: bench/loader_compare.sh [BUILD_DIR]; ROUNDS (5), EPOCHS (2), PER_CLASS (128, 4 classes),
# WORK (default a temporary dir; the folder and pack are kept there when given), PYTHON.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$here/build}")
rounds=${ROUNDS:-5}
epochs=${EPOCHS:-2}
per_class=${PER_CLASS:-128}
py=${PYTHON:-/usr/bin/python3}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
echo "command: $0 $*  (ROUNDS=$rounds, EPOCHS=$epochs, PER_CLASS=$per_class, work $work)"
echo "machine: $(nproc) CPUs, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -f "$work/jpegs.h5" ]; then
  "$py" "$here/bench/make_jpeg_folder.py" "$work/jpegs" --per-class "$per_class" \
    --cifar "$here/../shared/data/cifar-10-batches-bin"
  "$build/ddp_train" pack --format imagefolder --input "$work/jpegs" --output "$work/jpegs.h5" \
    --encoding encoded | tail -1
fi
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A wall cpu
names=(ddp_scaled ddp_exact torch)
run() {  # run NAME: the tool's output
  case $1 in
    ddp_scaled) "$build/bench/ddp_loader_bench" --train "$work/jpegs.h5" --epochs "$epochs" ;;
    ddp_exact) "$build/bench/ddp_loader_bench" --train "$work/jpegs.h5" --epochs "$epochs" --scaled-decode 0 ;;
    torch) "$py" "$here/bench/torch_loader.py" "$work/jpegs" --epochs "$epochs" --workers 0 ;;
  esac
}
for r in $(seq "$rounds"); do
  for k in 0 1 2; do
    name=${names[$(((k + r) % 3))]}
    out=$(run "$name")
    echo "$out" | grep -v '^csv,' | sed "s/^/round $r $name: /"
    read -r w c <<< "$(echo "$out" | awk -F, '/^csv,/ { print $4, $5 }')"
    wall[$name]+="$w "
    cpu[$name]+="$c "
  done
done
stats() {  # stats "v1 v2 ..." -> median [min-max]
  local m lo hi
  m=$(echo $1 | tr ' ' '\n' | median)
  lo=$(echo $1 | tr ' ' '\n' | sort -g | head -1)
  hi=$(echo $1 | tr ' ' '\n' | sort -g | tail -1)
  printf "%7.1f [%.1f-%.1f]" "$m" "$lo" "$hi"
}
echo
echo "images/s, 224x224 RandomResizedCrop + flip + normalise, batch 64, one thread each, median [min-max] of $rounds rounds"
printf "  %-11s %-26s %-26s\n" pipeline "images/s (wall)" "images per CPU second"
for n in "${names[@]}"; do printf "  %-11s %-26s %-26s\n" "$n" "$(stats "${wall[$n]}")" "$(stats "${cpu[$n]}")"; done
for n in ddp_scaled ddp_exact; do
  awk -v a="$(echo ${wall[$n]} | tr ' ' '\n' | median)" -v b="$(echo ${wall[torch]} | tr ' ' '\n' | median)" \
      -v c="$(echo ${cpu[$n]} | tr ' ' '\n' | median)" -v d="$(echo ${cpu[torch]} | tr ' ' '\n' | median)" -v n="$n" \
      'BEGIN { printf "%s / torch: %.2fx (wall), %.2fx (per CPU second); target >= 1.5x\n", n, a / b, c / d }'
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
