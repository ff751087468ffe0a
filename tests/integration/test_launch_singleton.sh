#!/usr/bin/env bash
# Mis-launch: `srun -n 3` without a working PMIx starts three processes that each initialise MPI as
# a singleton (rank 0 of 1). A task of such a step sees SLURM_NTASKS=3 and a real step id; the
# program must refuse to train alone and tell the user to launch with `srun --mpi=pmix`.
# Control: the same variables in a batch script (step id 0xfffffffe, no srun) only warn.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

# Start from an environment without any launcher's variables (CI may itself run under one).
clean_env=(env)
for v in $(compgen -e); do
  case "$v" in SLURM_* | OMPI_* | PMIX_* | PMI_*) clean_env+=(-u "$v") ;; esac
done
args=(--config "$FASHION_CONFIG" --train.epochs 1 --data.train_limit 100
      --data.test_limit 100 --run-dir "$WORK/run")

set +e
"${clean_env[@]}" SLURM_NTASKS=3 SLURM_STEP_ID=0 SLURM_PROCID=0 \
  timeout 120 "$BIN" "${args[@]}" > "$WORK/out" 2> "$WORK/err"
rc=$?
set -e
cat "$WORK/out" "$WORK/err"
[ "$rc" -ne 124 ] || fail "the mis-launched singleton hung"
[ "$rc" -ne 0 ] || fail "a singleton that sees SLURM_NTASKS=3 in an srun step exited 0"
grep -q "srun --mpi=pmix" "$WORK/err" || fail "the error does not say to launch with srun --mpi=pmix"
grep -q "srun started 3 tasks" "$WORK/err" || fail "the error does not say what happened"
grep -q "rank 0 of 1" "$WORK/err" || fail "the error does not name the rank"
grep -q "^epoch" "$WORK/out" && fail "the mis-launched singleton trained"

set +e
"${clean_env[@]}" SLURM_NTASKS=3 SLURM_STEP_ID=4294967294 \
  timeout 120 "$BIN" "${args[@]}" --run-dir "$WORK/run2" > "$WORK/out2" 2> "$WORK/err2"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$WORK/out2" "$WORK/err2"; fail "a singleton in a batch script failed (exit $rc)"; }
grep -q "warning" "$WORK/err2" || fail "a singleton in a 3-task allocation ran without a warning"
pass "srun without PMIx is diagnosed; a singleton in a batch script only warns"
