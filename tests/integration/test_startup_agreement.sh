#!/usr/bin/env bash
# Start-up errors under mpirun look like errors, not crashes (issue 33, item 4): when every rank
# fails alike (a configuration error, a bad option, a run.dir that holds another run, a missing
# dataset, a one-process command under mpirun), the ranks agree on it and end cleanly: the message
# is printed once, first, by rank 0 (naming the failing ranks), every rank exits 1 through
# MPI_Finalize, and Open MPI's "MPI_ABORT was invoked" banner never appears. The previous version
# printed the error once per rank and aborted the job.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
command -v mpirun > /dev/null || skip "mpirun not found"
TINY=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 256
      --data.test_limit 64 --train.epochs 1 --runtime.threads 1 --comm.timeout_s 60)

# expect_once NAME PATTERN ARGS...: a 2-rank job of ARGS fails, PATTERN is in its output exactly
# once and before anything of Open MPI's (after ddp_train's own start-up lines, if any), and no
# MPI_ABORT.
failed=()
expect_once() {
  local name=$1 pattern=$2 log="$WORK/$1.log" rc=0
  shift 2
  timeout 120 bash -c "$(declare -f mpirun_local); mpirun_local -np 2 \"\$@\"" _ "$BIN" "$@" > "$log" 2>&1 || rc=$?
  local problems=()
  [ $rc -ne 0 ] || problems+=("exit 0")
  [ $rc -ne 124 ] || problems+=("hung")
  local n
  n=$(grep -c -F -- "$pattern" "$log" || true)
  [ "$n" = 1 ] || problems+=("'$pattern' printed $n times")
  ! grep -q "MPI_ABORT was invoked" "$log" || problems+=("MPI_ABORT banner")
  ! grep -q "ORTE_ERROR_LOG" "$log" || problems+=("ORTE_ERROR_LOG")
  # Before anything Open MPI says (its notice that a process exited non-zero comes after).
  local at ompi
  at=$(grep -n -F -- "$pattern" "$log" | head -1 | cut -d: -f1) || true
  ompi=$(grep -n -E '^-{20}|Primary job|mpirun detected|MPI_ABORT' "$log" | head -1 | cut -d: -f1) || true
  [ -z "$at" ] || [ -z "$ompi" ] || [ "$at" -lt "$ompi" ] || problems+=("the message comes after Open MPI's (line $at, Open MPI's from line $ompi)")
  if [ ${#problems[@]} -gt 0 ]; then
    cat "$log"
    failed+=("$name: ${problems[*]}")
  else
    echo "  $name: exit $rc, said once: $(grep -F -- "$pattern" "$log" | head -1 | cut -c1-120)"
  fi
}

expect_once bad_value "ddp_train: error (rank 0 of 2; every rank alike): command line: --train.epochs 'abc'" \
  "${TINY[@]}" --train.epochs abc --run-dir "$WORK/r1"
printf '[train]\nepocs = 3\n' > "$WORK/typo.toml"
expect_once config_typo "ddp_train: error (rank 0 of 2; every rank alike): $WORK/typo.toml:2: unknown key 'train.epocs'" \
  --config "$WORK/typo.toml" --run-dir "$WORK/r2"
expect_once bad_option "ddp_train: error (rank 0 of 2; every rank alike): command line: unknown option '--train.epoch'" \
  "${TINY[@]}" --train.epoch 3 --run-dir "$WORK/r3"
# rank 0 decides on the run directory: its reason, once; the others do not repeat "rank 0 could
# not start the run".
"$BIN" "${TINY[@]}" --run-dir "$WORK/used" > "$WORK/used_first.log" 2>&1 || { cat "$WORK/used_first.log"; fail "first run failed"; }
expect_once used_run_dir "ddp_train: error (rank 0 of 2): run.dir '$WORK/used' already holds run" \
  "${TINY[@]}" --run-dir "$WORK/used"
! grep -q "could not start the run" "$WORK/used_run_dir.log" || failed+=("used_run_dir: 'could not start the run' printed")
# Every rank reads the dataset (data.distribute = each-reads): each fails alike.
expect_once no_data "ddp_train: error (rank 0 of 2; every rank alike): " \
  "${TINY[@]}" --data.root "$WORK/nodata" --run-dir "$WORK/r4"
grep -q "$WORK/nodata" "$WORK/no_data.log" || failed+=("no_data: the message does not name the directory")
expect_once predict_mpirun "ddp_train: error (rank 0 of 2; every rank alike): ddp_train predict runs as one process" \
  predict --snapshot "$WORK/used/snapshot_e0001.h5" "$WORK"
[ ${#failed[@]} -eq 0 ] || fail "$(printf '%s; ' "${failed[@]}")"
pass "start-up errors under mpirun: one message, first, once; every rank exits 1 without MPI_Abort"
