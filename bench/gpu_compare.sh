#!/usr/bin/env bash
# ddp_train against PyTorch on the same GPU, in one run: images/s of the training step of resnet20,
# resnet56 and resnet18 (cifar stem) at 32x32, batch 512, and of resnet50 and mobilenet_v2 at
# 224x224, batch 128, in fp32 (TF32 on both sides) and bf16; ddp_train (bench/gpu_bench), PyTorch
# eager (channels_last, cudnn.benchmark, fused SGD) and torch.compile(mode="max-autotune"),
# interleaved over rounds, within a time budget. Writes a Markdown table ready for BENCHMARKS.md
# (medians, min-max, ours/peer ratios, the GPU, driver, CUDA, cuDNN and torch versions) and every
# run's numbers.
#
# How to run it on the next GPU session: make the bundle here (scripts/gpu_bundle.sh, as for
# every gpu_check run), then one call of the device tool, about 7-8 minutes on an H100 (unpack and
# configure ~30 s, build ~70 s, this script's budget of 300 s, up to ~80 s of grace and start-up):
#
#   run(carry=["gpu_bundle"], timeout_s=600, command="scripts/gpu_check.sh --work build-gpu
#     --only gpu_compare --report $OUT/gpu_check_report.txt --compare-out $OUT; rc=$?;
#     cp build-gpu/logs/build.log $OUT/ 2>/dev/null; exit $rc")
#
#   (one line in the call). For a before/after check of a change to the GPU step, give ddp_train
#   in two variants measured in the same rounds beside PyTorch eager (the A/B of issue 29's first
#   changes: cuDNN's batch norm and heuristic algorithms against the defaults; gpu_check.sh splits
#   --compare-args on spaces, so a variant's gpu_bench arguments are separated by commas):
#
#   run(carry=["gpu_bundle"], timeout_s=600, command="scripts/gpu_check.sh --work build-gpu
#     --only gpu_compare --compare-budget 330 --compare-args '--no-compile --ours-variant
#     before:--bn,cudnn,--algos,heuristic --ours-variant after:' --report
#     $OUT/gpu_check_report.txt --compare-out $OUT; rc=$?; cp build-gpu/logs/build.log $OUT/
#     2>/dev/null; exit $rc")
#
#   Everything is written into $OUT as it comes, so a call cut short still
#   brings back what was measured: gpu_check_report.txt (every step's verdict, the table at its
#   end), table.md (the table for BENCHMARKS.md), raw.jsonl (every answer of both sides, one JSON
#   object a line), log.txt (both sides' output and errors), profiles.txt (gpu_bench --profile of
#   resnet20 and resnet50 in bf16), build.log. --compare-budget S of gpu_check.sh changes the
#   budget. `bench/gpu_compare.sh --from-raw raw.jsonl` makes the table again from the raw
#   numbers, anywhere.
#
# Directly, on a machine with the build and a Python that has PyTorch:
#
#   bench/gpu_compare.sh [--gpu-bench build/bench/gpu_bench] [--out DIR] [--budget 300]
#                        [--rounds 3] [--seconds auto|S] [--models resnet20,...]
#                        [--precisions bf16,fp32] [--compile-mode max-autotune]
#                        [--compile-fallback reduce-overhead|none] [--compile-cap 150]
#                        [--no-compile] [--profile resnet20:bf16,...|none] [--ours-find]
#                        [--ours-variant NAME:"GPU_BENCH ARGS" ...]
#   bench/gpu_compare.sh --from-raw RAW.jsonl      the table of recorded numbers (no GPU, no torch)
#
# --ours-variant NAME:ARGS (repeatable; ARGS separated by spaces or commas, may be empty: the
# defaults) runs ddp_train as several gpu_bench processes, one per variant, measured in the same
# interleaved rounds (NAME1, NAME2, ..., eager, compiled); the table then has a row per variant,
# each with the same PyTorch figures and its own ratios, and names each variant's arguments, and
# each --profile row is profiled in every variant.
#
# The order within the budget (bench/gpu_compare.py): every row with ddp_train and PyTorch eager;
# profiles; then torch.compile row by row (resnet20 first, then bf16, then fp32), each compiled
# within what is left (max-autotune, else --compile-fallback; a compile that does not fit is
# stopped and said so in the table: max-autotune's autotuning takes minutes per model, so not
# every row gets a compiled figure in 300 s). --seconds auto sizes each measurement so that the
# first part takes about half the budget.
#
# The environment: PYTHON names the interpreter with PyTorch (default: the first python3 on
# TORCH_PATH or PATH that imports torch, else /usr/bin/python3). gpu_bench runs with the PATH and
# LD_LIBRARY_PATH this script was started with; PyTorch with TORCH_PATH and TORCH_LD_LIBRARY_PATH
# when set (gpu_check.sh passes the node's own, so that its bundle's libraries stay out of
# PyTorch's way). Exit status: 0 when rows were measured and none failed (rows left out for time
# are no failure), 77 when there is no GPU or no PyTorch, 1 otherwise; the table is written in
# every case.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_path=$PATH
bench_ld=${LD_LIBRARY_PATH-}
torch_path=${TORCH_PATH:-$PATH}
torch_ld=${TORCH_LD_LIBRARY_PATH-$bench_ld}

from_raw=0
for a in "$@"; do
  case $a in
    --from-raw | --from-raw=*) from_raw=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  esac
done

# in_torch_env CMD...: runs CMD with PyTorch's PATH and library path.
in_torch_env() { PATH=$torch_path LD_LIBRARY_PATH=$torch_ld "$@"; }
python=${PYTHON:-}
if [ -z "$python" ]; then
  for cand in "$(PATH=$torch_path command -v python3)" /usr/bin/python3; do
    [ -n "$cand" ] && [ -x "$cand" ] || continue
    if [ "$from_raw" = 1 ] || in_torch_env "$cand" -c 'import torch' > /dev/null 2>&1; then
      python=$cand
      break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "gpu_compare: skipped: no python3 with PyTorch (set PYTHON)" >&2
  exit 77
fi

export DDP_BENCH_PATH=$bench_path DDP_BENCH_LD_LIBRARY_PATH=$bench_ld
in_torch_env "$python" "$here/gpu_compare.py" --python "$python" "$@"
