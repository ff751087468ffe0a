#!/usr/bin/env bash
# The resume broadcast (ckpt::broadcast_resume_state) over 2 real MPI ranks: rank 0's snapshot
# state reaches rank 1 as one length and one byte broadcast, "no snapshot" as a length of 0, and
# rank 0's failure as an error on rank 1 instead of a hang (the ResumeBroadcast unit tests, run
# again under mpirun -np 2).
source "$(dirname "$0")/lib.sh"
units="$(dirname "$BIN")/tests/ddp_unit_tests"
[ -x "$units" ] || skip "unit-test binary not built at $units (DDP_BUILD_TESTS)"
mpirun_local -np 2 "$units" --gtest_filter='ResumeBroadcast*' --gtest_color=no > "$WORK/units.log" 2>&1 \
  || { cat "$WORK/units.log"; fail "resume broadcast unit tests failed on 2 ranks"; }
grep -q "resume broadcast over 2 ranks" "$WORK/units.log" \
  || { cat "$WORK/units.log"; fail "the unit tests did not run on 2 ranks"; }
[ "$(grep -c 'PASSED.* 3 tests' "$WORK/units.log")" = 2 ] \
  || { cat "$WORK/units.log"; fail "expected 3 passing tests on each of 2 ranks"; }
pass "resume broadcast over 2 ranks"
