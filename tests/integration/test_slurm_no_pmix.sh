#!/usr/bin/env bash
# `srun --mpi=none -N2 -n2 ddp_train ...` (and --mpi=pmi2) on the two-node Slurm cluster: without
# PMIx the tasks cannot form one MPI job; Debian's Open MPI aborts inside MPI_Init with a generic text
# about rebuilding Slurm, so ddp_train must check before MPI_Init and fail with a message that tells
# the user what to do: `srun --mpi=pmix`.
# Then the same command with --mpi=pmix must work, so the failure is really the launch, not the cluster.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
cluster_require slurm
cluster_up

train=("$BIN" --config "$SRC/configs/fashion_mnist.toml" --data.train_limit 600 --data.test_limit 100
       --train.epochs 1 --train.batch_size 64 --runtime.threads 1 --runtime.device cpu)
# --mpi=none: no PMI at all (the tasks get SLURM_STEP_ID/SLURM_PROCID but no PMIX_RANK);
# --mpi=pmi2: a PMI that Debian's Open MPI cannot use either.
for plugin in none pmi2; do
  set +e
  slc_exec timeout 120 srun --mpi=$plugin -N2 -n2 --chdir="$WORK" "${train[@]}" --run-dir "$WORK/$plugin" \
    > "$WORK/$plugin.log" 2>&1
  rc=$?
  set -e
  cat "$WORK/$plugin.log"
  [ "$rc" != 124 ] || fail "srun --mpi=$plugin hung (killed after 120 s) instead of failing"
  [ "$rc" != 0 ] || fail "srun --mpi=$plugin: exit 0; ddp_train must refuse to train as 2 unconnected processes"
  grep -q -- '--mpi=pmix' "$WORK/$plugin.log" ||
    fail "srun --mpi=$plugin failed (exit $rc) without telling the user to use 'srun --mpi=pmix'"
  [ ! -f "$WORK/$plugin/metrics.jsonl" ] || fail "srun --mpi=$plugin: a rank trained alone and wrote metrics.jsonl"
done

slc_exec srun --mpi=pmix -N2 -n2 --chdir="$WORK" "${train[@]}" --run-dir "$WORK/pmix" > "$WORK/pmix.log" 2>&1 ||
  { cat "$WORK/pmix.log"; fail "srun --mpi=pmix failed on the same cluster"; }
grep -q '^ddp_train .*: 2 rank(s)' "$WORK/pmix.log" || fail "srun --mpi=pmix did not give one job of 2 ranks"
# `ddp_train doctor` under srun: 3 ranks over the two nodes pass every check and see the cluster's
# subnet; the same without PMIx is refused like the training.
slc_exec srun --mpi=pmix -N2 -n3 --chdir="$WORK" "$BIN" doctor --config "$SRC/configs/fashion_mnist.toml" \
  --runtime.threads 1 --sweep-max-mb 1 > "$WORK/doctor.log" 2>&1 ||
  { cat "$WORK/doctor.log"; fail "srun --mpi=pmix ddp_train doctor failed on a healthy cluster"; }
cat "$WORK/doctor.log"
grep -q '^\[PASS\] launch      3 rank(s) on 2 host(s)' "$WORK/doctor.log" || fail "doctor under srun: launch check"
grep -qF "[PASS] network     2 hosts sharing subnet(s) $SLC_NET.0/24" "$WORK/doctor.log" ||
  fail "doctor under srun does not see both nodes on $SLC_NET.0/24"
grep -q '^doctor: all checks passed' "$WORK/doctor.log" || fail "doctor under srun did not pass"
set +e
slc_exec timeout 120 srun --mpi=none -N2 -n2 --chdir="$WORK" "$BIN" doctor --no-sweep > "$WORK/doctor_none.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q -- '--mpi=pmix' "$WORK/doctor_none.log" ||
  { cat "$WORK/doctor_none.log"; fail "srun --mpi=none ddp_train doctor: exit $rc without the --mpi=pmix advice"; }
pass "srun --mpi=none and --mpi=pmi2 are refused with advice to use --mpi=pmix; --mpi=pmix trains; doctor passes under srun over 2 nodes"
