#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit + integration) with CTest,
# then builds the unit tests and ddp_train with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs the unit tests and the integration tests that send signals (label "signals") with them.
#   scripts/run_tests.sh            (DDP_SKIP_SANITIZE=1 skips the sanitizer pass)
# DDP_INTEGRATION_JOBS: integration tests run at once (default: the CPUs); DDP_ASAN_CMAKE_ARGS:
# extra configure options for build-asan (e.g. a compiler launcher).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
# Each phase with the time it starts: where CI's minutes go.
phase() { echo "== $(date +%T) $*"; }
# The unit tests that skipped, with the reason, from a CTest log: CTest shows the output of a shard
# (many tests in one process) only when it fails.
skipped_unit_tests() {
  awk '/^[0-9]+\/[0-9]+ Testing: / { shard = ($3 ~ /^unit_shard/) }
       !shard { next }
       /^\[ RUN      \]/ { why = "" }
       /: Skipped$/ { taking = 1; next }
       taking && /^\[/ { taking = 0 }
       taking { why = why (why == "" ? "" : " ") $0 }
       /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { print "  " $4 ": " why }' "$1" | sort -u
}
# Every unit test ran in the shards of a CTest log (a test that ended its process with status 0
# would end its shard early without a failure): their counts add up to the binary's list.
all_unit_tests_ran() {  # LOG BINARY
  local ran listed
  # Only the shards' blocks of the log: an integration test may print a gtest summary of its own.
  ran=$(awk '/^[0-9]+\/[0-9]+ Testing: / { shard = ($3 ~ /^unit_shard/) }
             shard && /^\[==========\] [0-9]+ tests? from .* ran\./ { n += $2 }
             END { print n + 0 }' "$1")
  listed=$("$2" --gtest_list_tests | grep -c '^  ')
  [ "$ran" = "$listed" ] && return 0
  echo "the unit-test shards ran $ran tests; $2 has $listed" >&2
  return 1
}

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
# Both builds compile in unity batches of 48 sources, not 16: fewer translation units parse the
# same heavy headers (oneDNN, HDF5, the standard library) less often, 24% fewer CPU-seconds for
# the ASan build and 10% for the release one; and a build from scratch gains nothing from the
# finer rebuilds of small batches. It also keeps the tree compiling in large batches.
export CMAKE_ARGS="-DDDP_UNITY_BATCH=48 ${CMAKE_ARGS:-}"
# The packages first: the sanitizer build below needs them too.
phase "packages"
DDP_SETUP_NO_BUILD=1 "$here/scripts/setup.sh"

# The sanitizer build is built, and its unit tests run, meanwhile, from now on, on the CPU that the
# build and the tests leave idle: SCHED_IDLE (nice 19 where that is refused) yields to every other
# process at once, so the timing-sensitive tests keep the machine they are calibrated for. Its own
# session, so that a failing step (the script ends) takes the whole build along. A new session is
# also a new scheduler autogroup (sched_autogroup_enabled, the default of Debian's kernels), which
# the kernel gives a fair share of the CPU against the tests' group whatever its tasks' policy: the
# group is made nice 19 as well, or the "idle" build took half the CPU (CI's build phase: 17
# minutes instead of 7). Debug information at -g1: function names and line tables, all that the
# sanitizers' reports show, in 9% less compile time than -g. Output: build-asan/build.log.
asan_build=""
if [ "${DDP_SKIP_SANITIZE:-0}" != 1 ]; then
  mkdir -p "$here/build-asan"
  setsid --wait bash -c '{ echo 19 > /proc/self/autogroup; } 2> /dev/null || true
    chrt --idle -p 0 $$ 2> /dev/null || renice -n 19 -p $$ > /dev/null
    cmake -S "$1" -B "$1/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDDP_SANITIZE=ON \
      -DDDP_BUILD_BENCH=OFF -DDDP_CUDA=OFF -DDDP_UNITY_BATCH=48 $3 &&
      cmake --build "$1/build-asan" -j "$2" --target ddp_unit_tests ddp_train &&
      echo "== built at $(date +%T)" &&
      cd "$1/build-asan" && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -L shards -j "$2" > unit.log 2>&1' \
    asan "$here" "$jobs" "${DDP_ASAN_CMAKE_ARGS:-}" > "$here/build-asan/build.log" 2>&1 &
  asan_build=$!
  trap '[ -z "$asan_build" ] || kill -- -"$asan_build" 2> /dev/null || true' EXIT
fi

phase "build"
"$here/scripts/setup.sh" "$here/build"

# Unit tests: in shards (label "shards", tests/CMakeLists.txt), single processes (the multi-rank
# tests start their own mpirun). Integration tests: a few ranks each, or waiting (start-up, Python
# oracles, downloads). One CTest run schedules both, DDP_INTEGRATION_JOBS (default: as many as
# CPUs) at a time, the costliest first (COST in tests/CMakeLists.txt): the integration tests start
# while the last shards run instead of after the slowest shard. Those that time signals, stalls,
# rank speeds or Slurm's time limits are RUN_SERIAL: they run alone. The sanitizer build takes the
# CPU they leave idle.
phase "unit tests (shards) and integration tests"
rc=0
(cd "$here/build" && ctest --output-on-failure -LE "^unit$" -j "${DDP_INTEGRATION_JOBS:-$jobs}" \
  --timeout 1500) || rc=$?
(cd "$here/build" && all_unit_tests_ran Testing/Temporary/LastTest.log tests/ddp_unit_tests &&
  echo "unit tests that skipped:" && skipped_unit_tests Testing/Temporary/LastTest.log) || rc=1
[ "$rc" = 0 ] || exit "$rc"

if [ -n "$asan_build" ]; then
  phase "unit tests, and the integration tests that send signals, under ASan + UBSan"
  rc=0 && wait "$asan_build" || rc=$?
  asan_build=""
  if ! grep -q "^== built" "$here/build-asan/build.log"; then
    tail -50 "$here/build-asan/build.log"
    echo "the ASan build failed" >&2
    exit 1
  fi
  grep "^== built" "$here/build-asan/build.log"
  # Its unit tests ran right after it, at idle priority too, while the tests above ran.
  cat "$here/build-asan/unit.log"
  [ "$rc" = 0 ] || { echo "unit tests failed under ASan + UBSan" >&2; exit 1; }
  (cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=0 all_unit_tests_ran \
    Testing/Temporary/LastTest.log tests/ddp_unit_tests) || exit 1
  # oneDNN's JIT and OpenMP runtime keep allocations for the process lifetime by design.
  export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
  # The stop path (signal handler, loader threads, mid-epoch snapshot, teardown) with ddp_train
  # itself instrumented; one at a time, as they time their signals. Reports go to files, checked
  # after: a test that expects a non-zero exit (a second signal) would not notice one.
  phase "signal tests under ASan + UBSan"
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
phase "all tests passed"
