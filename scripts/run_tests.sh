#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit + integration) with CTest,
# then builds the unit tests and ddp_train with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs the unit tests and the integration tests that send signals (label "signals") with them.
#   scripts/run_tests.sh            (DDP_SKIP_SANITIZE=1 skips the sanitizer pass)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)

# Where the CUDA toolkit is installed (as on our CI machines, which have no GPU), the CUDA backend
# must build: DDP_CUDA=ON turns a toolkit that cannot be used into a configuration error. Its GPU
# tests then report themselves skipped, with the reason, and everything else runs on the CPU.
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null; then
  export CMAKE_ARGS="-DDDP_CUDA=ON ${CMAKE_ARGS:-}"
  # Without a GPU to run them, the CUDA sources are only compiled: for the oldest and the newest
  # architecture we support (every #if __CUDA_ARCH__ branch), not all five, which takes minutes.
  # A build directory configured before keeps its architectures; CUDAARCHS set by you wins.
  if ! nvidia-smi -L > /dev/null 2>&1; then export CUDAARCHS=${CUDAARCHS:-75;90}; fi
fi
"$here/scripts/setup.sh" "$here/build"
# Unit tests are single processes (the multi-rank ones start their own mpirun): both CPUs at once.
# The integration tests time signals, stalls and rank speeds: one at a time.
(cd "$here/build" && ctest --output-on-failure -L unit -j "$jobs" --timeout 1500 &&
  ctest --output-on-failure -LE unit -j 1 --timeout 1500)

if [ "${DDP_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== unit tests, and the integration tests that send signals, under ASan + UBSan =="
  cmake -S "$here" -B "$here/build-asan" -DCMAKE_BUILD_TYPE=Debug -DDDP_SANITIZE=ON \
    -DDDP_BUILD_BENCH=OFF -DDDP_CUDA=OFF >/dev/null
  cmake --build "$here/build-asan" -j "$jobs" --target ddp_unit_tests ddp_train
  # oneDNN's JIT and OpenMP runtime keep allocations for the process lifetime by design.
  export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
  (cd "$here/build-asan" && ctest --output-on-failure -L unit -j "$jobs")
  # The stop path (signal handler, loader threads, mid-epoch snapshot, teardown) with ddp_train
  # itself instrumented; one at a time, as they time their signals. Reports go to files, checked
  # after: a test that expects a non-zero exit (a second signal) would not notice one.
  reports="$here/build-asan/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  (cd "$here/build-asan" && ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$reports/asan" \
    UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan" \
    ctest --output-on-failure -L signals -j 1 --timeout 1500)
  if [ -n "$(ls -A "$reports")" ]; then
    for f in "$reports"/*; do echo "== $f"; cat "$f"; done
    echo "sanitizer reports from ddp_train (above)" >&2
    exit 1
  fi
fi
