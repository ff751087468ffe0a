#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit + integration) with CTest,
# then builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer and runs them.
#   scripts/run_tests.sh            (DDP_SKIP_SANITIZE=1 skips the sanitizer pass)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)

# Where the CUDA toolkit is installed (as on our CI machines, which have no GPU), the CUDA backend
# must build: DDP_CUDA=ON turns a toolkit that cannot be used into a configuration error. Its GPU
# tests then report themselves skipped, with the reason, and everything else runs on the CPU.
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null; then
  export CMAKE_ARGS="-DDDP_CUDA=ON ${CMAKE_ARGS:-}"
fi
"$here/scripts/setup.sh" "$here/build"
(cd "$here/build" && ctest --output-on-failure -j 1 --timeout 1500)

if [ "${DDP_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== unit tests under ASan + UBSan =="
  cmake -S "$here" -B "$here/build-asan" -DCMAKE_BUILD_TYPE=Debug -DDDP_SANITIZE=ON \
    -DDDP_BUILD_BENCH=OFF -DDDP_CUDA=OFF >/dev/null
  cmake --build "$here/build-asan" -j "$jobs" --target ddp_unit_tests
  # oneDNN's JIT and OpenMP runtime keep allocations for the process lifetime by design.
  (cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -L unit -j "$jobs")
fi
