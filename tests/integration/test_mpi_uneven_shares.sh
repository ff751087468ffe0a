#!/usr/bin/env bash
# Uneven ranks are exact: 3 ranks with train.rank_shares = [3, 1, 2] (slices 96/32/64 of a global
# batch of 192) train the same model as 1 rank with the batch of 192 - losses to 5 significant
# digits, weights within 1e-5 - also when train.max_micro_batch = 40 makes the ranks run 3, 1 and 2
# micro-batches, and with batch norm: sync batch norm weights each rank by its samples, and plain
# batch norm's running statistics are averaged weighted by the samples each rank trained. LeNet on a
# Fashion-MNIST subset (installed by setup.sh), 2 short epochs (see test_mpi_equivalence.sh for why
# short). Also: the sync room's MPI unit tests on 3 ranks, evaluation shards sized by the shares,
# snapshots that keep the shares (resumed on 3 and on 2 ranks), and the start-up errors.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
units="$(dirname "$BIN")/tests/ddp_unit_tests"

# 1. The sync room on 3 real ranks: ranks run 1, 2 and 3 micro-batches of 3, 5 and 7 samples and
#    still sum to the whole gradient (overlapped and blocking); buffer averaging weighted by samples;
#    frozen gradients stay out of the all-reduce.
if [ -x "$units" ]; then
  # (Both suites in one 3-rank start: each start of the unit-test binary costs ~1 CPU-second.)
  mpirun_local -np 3 "$units" --gtest_filter='SyncGradient*:SyncReplica*:StopAgreement*' \
    --gtest_color=no > "$WORK/units.log" 2>&1 || { cat "$WORK/units.log"; fail "sync unit tests failed on 3 ranks"; }
  [ "$(grep -c 'PASSED.* 12 tests' "$WORK/units.log")" = 3 ] \
    || { cat "$WORK/units.log"; fail "expected 12 passing tests (9 sync, 3 stop agreement) on each of 3 ranks"; }
  # The stop agreement (comm/stop_agreement.hpp): one step late, every rank's flags counted.
  [ "$(grep -cE '^\[       OK \] (SyncGradient|SyncReplica)' "$WORK/units.log")" = 27 ] \
    || { cat "$WORK/units.log"; fail "expected 9 passing sync tests on each of 3 ranks"; }
  [ "$(grep -c '^\[       OK \] StopAgreement' "$WORK/units.log")" = 9 ] \
    || { cat "$WORK/units.log"; fail "expected 3 passing stop agreement tests on each of 3 ranks"; }
else
  echo "  (unit-test binary not built at $units: skipping the 3-rank sync unit tests)"
fi

# 2. 3 uneven ranks == 1 rank. 3072 samples = 16 full global batches per epoch; SGD with Nesterov
#    momentum, which LeNet learns with in these 32 steps (test accuracy 16% -> 37%). (Adam is no
#    good here: it divides by the root of tiny second moments, so float rounding moves some
#    weights by 1e-4 relative.) The first 3072 samples (limit_subset first): on the seeded random
#    subset a ReLU/max-pool tie in conv1 moves its small bias by 5e-5 relative (losses still equal
#    to 8 digits); the 1e-5 bound was measured on these samples (1.6e-7).
#    Those first samples (and the first 301 test samples) are all these runs read: from a copy of
#    them (dataset_head.py), ~30 rank start-ups are spared decompressing and holding the 70,000
#    images; the samples, and so the figures, are the same.
/usr/bin/python3 "$SRC/tests/integration/dataset_head.py" fashion_mnist "$FASHION_GZ" "$WORK/fashion" 3072 301 \
  || fail "could not copy the first Fashion-MNIST samples"
common=(--data.dataset fashion_mnist --data.root "$WORK/fashion" --model.preset lenet_mnist
        --data.train_limit 3072 --data.test_limit 301 --data.limit_subset first --train.epochs 2
        --train.global_batch 192
        --optim.name sgd --optim.lr 0.05 --optim.momentum 0.9 --optim.nesterov true
        --runtime.threads 1 --runtime.device cpu)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
same() {  # same A B [EPOCH]: equal losses (5 significant digits), weights within 1e-5 relative
  diff <(losses_5sig "$WORK/$1/metrics.jsonl") <(losses_5sig "$WORK/$2/metrics.jsonl") \
    || fail "$1 and $2 differ in training loss"
  local d
  d=$(max_rel_diff "$WORK/$1/snapshot_e000${3:-2}.h5" "$WORK/$2/snapshot_e000${3:-2}.h5")
  ge 1e-5 "$d" || fail "$1 and $2: final weights differ by $d (relative) > 1e-5"
  echo "  $1 == $2: losses $(losses_5sig "$WORK/$1/metrics.jsonl" | tr '\n' ' ')max rel weight diff $d"
}
run np1 1
run np3_shares 3 --train.rank_shares 3,1,2
grep -q "global batch 192 (rank shares 96 + 32 + 64)" "$WORK/np3_shares.log" \
  || { cat "$WORK/np3_shares.log"; fail "the shares 3,1,2 did not give slices 96/32/64"; }
same np1 np3_shares
"$BIN" inspect "$WORK/np3_shares/snapshot_e0002.h5" | grep "rank shares   96 32 64" > /dev/null \
  || fail "the snapshot does not keep the rank shares"
# Rank 0 runs 96 samples as 3 micro-batches of 32, rank 1 one of 32, rank 2 two of 32.
run np3_cap 3 --train.rank_shares 3,1,2 --train.max_micro_batch 40
grep -q "micro-batches of at most 40, 40, 40 sample(s)" "$WORK/np3_cap.log" \
  || { cat "$WORK/np3_cap.log"; fail "the micro-batch cap is not reported"; }
same np1 np3_cap

# rank_shares = auto, with a re-balancing threshold of 0: after epoch 1 the measured speeds (however
# noisy) give new shares for epoch 2, and whatever they are, the run still equals 1 rank.
run np3_auto 3 --train.rank_shares auto --train.rebalance_threshold 0
grep -q "^rank_shares = auto: [0-9]*/[0-9]*/[0-9]* samples per rank from epoch 2" "$WORK/np3_auto.log" \
  || { cat "$WORK/np3_auto.log"; fail "rank_shares = auto did not re-balance after epoch 1"; }
/usr/bin/python3 - "$WORK/np3_auto/metrics.jsonl" <<'PY' || fail "the ranks arrays do not show the shares taken"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"ranks"' in l]
shares = [[r["share"] for r in row["ranks"]] for row in rows]
assert len(shares) == 2 and all(sum(s) == 192 and min(s) >= 1 for s in shares), shares
assert shares[0] == [64, 64, 64], shares
print("  auto shares per epoch:", shares)
PY
same np1 np3_auto

# 3. Evaluation shards follow the shares (100/34/167 of 301 test samples) and count each sample once.
for np in 1 3; do
  mpirun_local -np $np "$BIN" eval --snapshot "$WORK/np1/snapshot_e0002.h5" "${common[@]}" \
    --train.rank_shares "$([ $np = 1 ] && echo equal || echo 1,0.333,1.667)" > "$WORK/eval$np.log" 2>&1 \
    || { cat "$WORK/eval$np.log"; fail "eval on $np rank(s) failed"; }
done
grep -q "(301 samples)" "$WORK/eval3.log" || { cat "$WORK/eval3.log"; fail "-np 3 evaluation did not count 301 samples"; }
diff <(grep "test accuracy" "$WORK/eval1.log") <(grep "test accuracy" "$WORK/eval3.log") \
  || fail "3 uneven ranks and 1 rank evaluate the same weights differently"

# 4. Snapshots keep the shares. With train.rank_shares = auto, a resume on 3 ranks keeps the
#    snapshot's 96/32/64; a resume on 2 ranks starts from equal shares. Both finish as the 1-rank
#    run did.
run seg1 3 --train.rank_shares 3,1,2 --train.epochs 1
cp -r "$WORK/seg1" "$WORK/seg2"
run seg1 2 --train.resume auto --train.rank_shares auto
grep -q "were for another world size or global batch; starting from equal shares" "$WORK/seg1.log" \
  && grep -q "global batch 192 (2 rank(s) x 96)" "$WORK/seg1.log" \
  || { cat "$WORK/seg1.log"; fail "the resume on 2 ranks did not start from equal shares"; }
same np1 seg1
run seg2 3 --train.resume auto --train.rank_shares auto
grep -q "rank shares 96 + 32 + 64 kept from the snapshot" "$WORK/seg2.log" \
  && grep -q "^rank shares: 96 + 32 + 64 samples of each global batch of 192" "$WORK/seg2.log" \
  || { cat "$WORK/seg2.log"; fail "the resume on 3 ranks did not keep the snapshot's shares"; }
same np1 seg2

# 5. Batch norm. Sync batch norm with shares 3,1,2 of a global batch of 50 (25/8/17; 102 samples
#    leave a last batch of 2, split 1/0/1) equals 1 rank, running statistics included; settings of
#    test_mpi_sync_batchnorm.sh.
bn=(--data.dataset fashion_mnist --data.root "$FASHION" --model.preset vgg_small_bn
    --data.train_limit 102 --data.test_limit 50 --train.epochs 2 --train.global_batch 50
    --optim.lr 0.01 --train.seed 2 --runtime.threads 1 --runtime.device cpu --model.sync_batchnorm true)
for spec in "bn1 1" "bn3 3 --train.rank_shares 3,1,2"; do
  set -- $spec
  name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${bn[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
done
same bn1 bn3
# With micro-batch caps the ranks need 3, 1 and 2 micro-batches of their 25/8/17, but every sync
# batch norm forward and backward is a collective: all run 3 (ranks 1 and 2 the extra ones without
# samples). A rank that ran fewer would leave the others waiting (the stall timeout names it).
mpirun_local -np 3 "$BIN" "${bn[@]}" --run-dir "$WORK/bn3_cap" --train.rank_shares 3,1,2 \
  --train.max_micro_batch 10 --comm.timeout_s 30 > "$WORK/bn3_cap.log" 2>&1 \
  || { cat "$WORK/bn3_cap.log"; fail "sync batch norm with uneven micro-batch counts failed"; }
grep -q "^final test accuracy" "$WORK/bn3_cap.log" || fail "bn3_cap: no final accuracy"
# Plain batch norm as the first layer sees only the images, so its running mean after averaging
# the ranks' - weighted by the samples each trained (96/32/64 of every batch) - is the 1-rank
# run's; a plain mean over the ranks would not be.
cat > "$WORK/bn_first.toml" <<'TOML'
[[model.layers]]
type = "batchnorm"
name = "bn0"
[[model.layers]]
type = "conv2d"
out_channels = 4
kernel = 5
stride = 2
[[model.layers]]
type = "relu"
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "linear"
out_features = 10
TOML
for spec in "plain1 1" "plain3 3 --train.rank_shares 3,1,2"; do
  set -- $spec
  name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" --config "$WORK/bn_first.toml" "${common[@]}" --model.preset "" \
    --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "$name failed"; }
done
"$BIN" diff "$WORK/plain1/snapshot_e0002.h5" "$WORK/plain3/snapshot_e0002.h5" > "$WORK/plain.diff"
d=$(awk '$1 == "bn0.running_mean" { print $5 }' "$WORK/plain.diff")
[ -n "$d" ] || { cat "$WORK/plain.diff"; fail "no bn0.running_mean in the snapshots"; }
ge 1e-5 "$d" || { cat "$WORK/plain.diff"; fail "plain batch norm: the running mean of 3 uneven ranks differs from 1 rank's by $d (relative) > 1e-5"; }
echo "  plain batch norm, running mean of 3 uneven ranks vs 1 rank: max rel diff $d"

# 6. Start-up errors name the key, on every rank, before training.
mpirun_local -np 3 "$BIN" "${common[@]}" --run-dir "$WORK/err1" --train.rank_shares 3,1 \
  > "$WORK/err1.log" 2>&1 && fail "2 shares for 3 ranks were accepted"
grep -q "train.rank_shares = \[3, 1\]: 2 share(s) for 3 rank(s)" "$WORK/err1.log" \
  || { cat "$WORK/err1.log"; fail "no clear error for a share list of the wrong length"; }
mpirun_local -np 3 "$BIN" "${common[@]}" --run-dir "$WORK/err2" --train.rank_shares 1,1,400 \
  > "$WORK/err2.log" 2>&1 && fail "shares that leave a rank without a sample were accepted"
grep -q "train.rank_shares = \[1, 1, 400\]: rank 1 gets no sample of the global batch of 192 (train.global_batch): every rank needs at least one; a global batch of at least [0-9]* gives each rank one" "$WORK/err2.log" \
  || { cat "$WORK/err2.log"; fail "no clear error for a rank without a sample"; }
[ ! -e "$WORK/err1/snapshot_e0001.h5" ] || fail "a refused run wrote a snapshot"
pass "uneven ranks == 1 rank (shares 3,1,2; with micro-batch caps; sync and plain batch norm; resumed on 3 and 2 ranks)"
