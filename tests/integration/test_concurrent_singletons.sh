#!/usr/bin/env bash
# Processes started without a launcher are MPI singletons, and a host may run several at once
# (two experiments side by side, `ddp_train doctor` beside a run, ctest -j). Open MPI gives every
# isolated singleton the same session directory, <tmp>/ompi.<host>.<uid>/jf.0/1/0, and removes it
# at exit: one's clean-up could delete the path another was creating, and that one's MPI_Init
# aborted. Each must have its own. Here a file where that shared directory would go makes the
# clash certain rather than a matter of timing.
source "$(dirname "$0")/lib.sh"

clean_env=(env)
for v in $(compgen -e); do
  case "$v" in SLURM_* | OMPI_* | PMIX_* | PMI_*) clean_env+=(-u "$v") ;; esac
done
tmp="$WORK/tmp"
mkdir "$tmp"
host=$(hostname)
blocker="$tmp/ompi.${host%%.*}.$(id -u)"  # Open MPI names the node by its short name
touch "$blocker"

set +e
"${clean_env[@]}" TMPDIR="$tmp" timeout 60 "$BIN" --version > "$WORK/out" 2> "$WORK/err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$WORK/out" "$WORK/err"; fail "a singleton used the shared session directory (exit $rc)"; }
grep -q "ddp_train" "$WORK/out" || fail "--version printed no version"

# Many at once, as ctest -j starts them: all start and finish.
pids=()
for i in $(seq 1 12); do
  "${clean_env[@]}" TMPDIR="$tmp" timeout 60 "$BIN" --version > "$WORK/out.$i" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { failed=$((failed + 1)); cat "$WORK/out.$((i + 1))"; }
done
[ "$failed" -eq 0 ] || fail "$failed of 12 concurrent singletons failed"

# Each removed its session directory: only the blocker is left.
left=$(find "$tmp" -mindepth 1 ! -path "$blocker")
[ -z "$left" ] || fail "session directories left behind: $left"

# A session base of the user's (a site module may set one for everyone) is used, with a directory
# per process in it all the same.
mkdir "$WORK/base" && touch "$WORK/base/ompi.${host%%.*}.$(id -u)"
set +e
"${clean_env[@]}" TMPDIR="$tmp" OMPI_MCA_orte_tmpdir_base="$WORK/base" timeout 60 "$BIN" --version \
  > "$WORK/out" 2> "$WORK/err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$WORK/out" "$WORK/err"; fail "a singleton with the user's tmpdir_base failed (exit $rc)"; }
# A user's own session directory wins: it is the one used, and here it is blocked.
set +e
"${clean_env[@]}" TMPDIR="$tmp" OMPI_MCA_orte_top_session_dir="$blocker" timeout 60 "$BIN" --version \
  > "$WORK/out" 2> "$WORK/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the user's OMPI_MCA_orte_top_session_dir (blocked) was not the one used"
pass "concurrent singletons each have their own session directory and remove it"
