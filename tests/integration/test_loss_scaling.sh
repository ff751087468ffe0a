#!/usr/bin/env bash
# Dynamic loss scaling through the real binary, on the CPU (the same trainer code scales, unscales
# and skips on GPUs, where runtime.precision = fp16 turns it on):
#  - a power-of-two loss scale changes no bit of the result (scaling by 2^k is exact in fp32);
#  - an overflow on one rank (test-only fault injection: an inf in rank 1's loss gradient at
#    step 5) is skipped by every rank alike: 1 step skipped, the scale halved, the replicas still
#    equal (checked every epoch), and the run ends like an uninterrupted one, one step short;
#  - runtime.precision = fp16/bf16 on a job that trains on the CPU is refused, naming the key.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
# 8 steps per epoch (2 ranks x 128 of 2048 samples): the fault at step 5 lands in epoch 1, and the
# resumed run's epoch 3 comes after it; the equalities are bitwise, so more data adds nothing.
common=(--config "$FASHION_CONFIG" --data.train_limit 2048 --data.test_limit 256
        --train.batch_size 128 --train.epochs 2 --runtime.threads 1)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" -x DDP_FAULT_INF_GRAD "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "run $name failed"; }
}
digest() { summary_field "$WORK/$1/metrics.jsonl" weights_digest; }

run plain 2
run scaled 2 --train.loss_scale 1024
grep -q "^loss scale 1024, 0 overflowing step(s) skipped" "$WORK/scaled.log" ||
  { cat "$WORK/scaled.log"; fail "no loss-scale report"; }
[ "$(digest scaled)" = "$(digest plain)" ] ||
  fail "loss scale 1024 changed the weights: $(digest scaled) vs $(digest plain)"
echo "  loss scale 1024: weights bitwise those of the unscaled run ($(digest plain))"

DDP_FAULT_INF_GRAD=1:5 run overflow 2 --train.loss_scale 1024
grep -q "rank 1 overflows its gradient at step 5" "$WORK/overflow.log" || fail "the fault was not injected"
grep -q "^loss scale 512, 1 overflowing step(s) skipped so far" "$WORK/overflow.log" ||
  { cat "$WORK/overflow.log"; fail "the overflow was not skipped once with the scale halved"; }
grep -q "^final test accuracy" "$WORK/overflow.log" || fail "the run with an overflow did not finish"
[ "$(digest overflow)" != "$(digest scaled)" ] || fail "the skipped step changed nothing"
echo "  inf on rank 1 at step 5: every rank skipped it, scale 1024 -> 512, replicas equal"

# The scale travels in snapshots: a resumed run goes on with 512 (not the configured 1024) and ends
# bitwise where an uninterrupted 3-epoch run with the same overflow ends.
"$BIN" inspect "$WORK/overflow/snapshot_e0002.h5" | grep "^loss scale    512 (" > /dev/null ||
  fail "the snapshot does not hold the loss scale"
DDP_FAULT_INF_GRAD=1:5 run straight3 2 --train.loss_scale 1024 --train.epochs 3
run overflow 2 --train.loss_scale 1024 --train.epochs 3 --resume auto
grep -q "^loss scale 512, 0 overflowing step(s) skipped so far" "$WORK/overflow.log" ||
  { cat "$WORK/overflow.log"; fail "the resumed run did not continue with scale 512"; }
[ "$(digest overflow)" = "$(digest straight3)" ] || fail "resuming changed the weights of a loss-scaled run"
echo "  the scale is in the snapshot: resumed with 512, weights bitwise those of the uninterrupted run"

for p in fp16 bf16; do
  if "$BIN" "${common[@]}" --run-dir "$WORK/p$p" --runtime.device cpu --runtime.precision $p \
    > "$WORK/p$p.log" 2>&1; then fail "precision $p on the CPU was accepted"; fi
  grep -q "runtime.precision = \"$p\" needs GPUs" "$WORK/p$p.log" || { cat "$WORK/p$p.log"; fail "unclear error for $p on the CPU"; }
done
pass "loss scaling is exact, overflows are skipped on every rank, reduced precision on CPUs refused"
