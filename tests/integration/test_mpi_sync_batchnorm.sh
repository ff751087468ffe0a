#!/usr/bin/env bash
# Sync batch norm (model.sync_batchnorm) over real MPI processes.
# 1. The layer on 2 ranks: finite-difference gradients of the loss summed over the ranks, and equality
#    with plain batch norm over the whole batch, with unequal per-rank batches and with a rank that
#    has none (the SyncBatchNorm unit tests, run again under mpirun -np 2).
# 2. Training: VGG with batch norm on Fashion-MNIST, 3 ranks x ~B equals 1 rank x 3B (losses to 5
#    significant digits, weights within 1e-5). Global batch 50 splits 17/17/16, and 102 samples
#    leave a last step of 2 samples, so one rank joins its collectives without samples. Plain batch
#    norm on 3 ranks must differ (each rank normalises with its own statistics): the check discerns.
# Why this seed and so short a run: batch-norm nets amplify float rounding far more than the
# BN-free ones of test_mpi_equivalence.sh. Even plain batch norm on 1 rank with 1 thread vs 2
# threads (oneDNN's summation order only) ends 2e-2 apart after 8 steps for some seeds: a ReLU or
# max-pool decision flips and the runs part. 3 of 8 seeds flip within these 6 steps; this one does
# not (1e-6), while plain batch norm on 3 ranks is 1e-1 away. A real error in the sync reductions
# moves the first step's weights already (test 1 checks the layer exactly).
source "$(dirname "$0")/lib.sh"
units="$(dirname "$BIN")/tests/ddp_unit_tests"
[ -x "$units" ] || skip "unit-test binary not built at $units (DDP_BUILD_TESTS)"
mpirun_local -np 2 "$units" --gtest_filter='*SyncBatchNorm*' --gtest_color=no > "$WORK/units.log" 2>&1 \
  || { cat "$WORK/units.log"; fail "sync batch norm unit tests failed on 2 ranks"; }
grep -q "sync batch norm over 2 ranks" "$WORK/units.log" \
  || { cat "$WORK/units.log"; fail "the unit tests did not run on 2 ranks"; }
[ "$(grep -c 'PASSED.* 4 tests' "$WORK/units.log")" = 2 ] \
  || { cat "$WORK/units.log"; fail "expected 4 passing tests on each of 2 ranks"; }

[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
common=(--data.dataset fashion_mnist --data.root "$FASHION" --model.preset vgg_small_bn
        --data.train_limit 102 --data.test_limit 200 --train.epochs 2 --train.global_batch 50
        --optim.lr 0.01 --train.seed 2 --runtime.threads 1 --runtime.device cpu)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
run np1 1 --model.sync_batchnorm true
run np3_sync 3 --model.sync_batchnorm true
diff <(losses_5sig "$WORK/np1/metrics.jsonl") <(losses_5sig "$WORK/np3_sync/metrics.jsonl") \
  || fail "sync batch norm: 3 ranks and 1 rank differ in training loss"
d=$(max_rel_diff "$WORK/np1/snapshot_e0002.h5" "$WORK/np3_sync/snapshot_e0002.h5")
ge 1e-5 "$d" || fail "sync batch norm: final weights of 3 ranks and 1 rank differ by $d (relative) > 1e-5"
run np3_plain 3
if diff -q <(losses_5sig "$WORK/np1/metrics.jsonl") <(losses_5sig "$WORK/np3_plain/metrics.jsonl") \
     > /dev/null; then
  fail "plain batch norm on 3 ranks trains like 1 rank: the comparison cannot tell sync from plain"
fi
pass "sync batch norm: 2-rank gradients exact; 3 ranks == 1 rank (losses $(losses_5sig "$WORK/np1/metrics.jsonl" | tr '\n' ' ')max rel weight diff $d)"
