#!/usr/bin/env bash
# Snapshots of a graph model (resnet20: residual adds, projection shortcuts, batch norm with
# model.sync_batchnorm, names with dots such as layer2.0.downsample.0) on a CIFAR-10 subset, 3 ranks,
# 3 steps per epoch:
#  - kill -9 of one rank after the epoch-1 snapshot, then --resume auto: bitwise-identical final
#    weights;
#  - the 3-rank epoch-2 snapshot resumed on 1 and on 2 ranks (same global batch; sync batch norm
#    makes the statistics those of the whole batch) for the last epoch. Other world sizes sum in
#    another order, and a ResNet with batch norm amplifies that rounding roughly twofold per step
#    (1 vs 3 ranks from one snapshot: 1e-5 after one step, 1e-2 after twelve, measured), so the
#    epoch is 3 steps and the check is: the epoch's loss to 4 digits, convolution and linear weights
#    within 1e-4, batch-norm tensors within 1e-3 (their bias gradients are sums that cancel to a
#    few digits). A resume that lost state (momentum, schedule position, running statistics,
#    sampler position) is off by 1e-2 or more.
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
common=(--config "$SRC/configs/cifar_resnet20.toml" --data.root "$CIFAR" --data.train_limit 144
        --data.test_limit 100 --train.epochs 3 --train.save_every 1 --runtime.threads 1
        --train.global_batch 48 --train.keep_last 0 --model.sync_batchnorm true)
train() {  # train NP RUN_DIR ARGS...: runs to completion or failure, log in RUN_DIR.log
  local np=$1 dir=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1
}
train 3 "$WORK/ref" || { cat "$WORK/ref.log"; fail "uninterrupted run failed"; }
grep -qE "^ +layer2\.0\.downsample\.0\.weight +32x16x1x1$" <<< "$("$BIN" inspect "$WORK/ref/snapshot_e0003.h5")" ||
  fail "the snapshot does not hold layer2.0.downsample.0.weight [32, 16, 1, 1]"
digest() { summary_field "$1/metrics.jsonl" weights_digest; }

train 3 "$WORK/kill" & job=$!
# Every rank held the moment the epoch-1 snapshot is written (an epoch is 3 steps of about 0.1 s:
# a polled kill could land after the last epoch), then one killed; the others go on into it.
seen_now "$WORK/kill.log" "^snapshot: .*snapshot_e0001\.h5" || { cat "$WORK/kill.log"; fail "epoch 1 never finished"; }
pids=$(rank_pids "$WORK/kill")
kill -STOP $pids 2> /dev/null || true
victim=$(echo "$pids" | tail -1)
[ -n "$victim" ] || fail "no rank process found to kill"
kill -9 "$victim"
kill -CONT $pids 2> /dev/null || true
if wait $job; then fail "the job survived the death of a rank"; fi
! ls "$WORK/kill" | grep -q snapshot_e0003 || fail "the killed run finished anyway (kill came too late)"
train 3 "$WORK/kill" --resume auto || { cat "$WORK/kill.log"; fail "resume after kill failed"; }
grep -q "resume: .*snapshot_e000[12]" "$WORK/kill.log" || fail "did not resume from a snapshot"
[ "$(digest "$WORK/kill")" = "$(digest "$WORK/ref")" ] || fail "kill + resume changed the weights"
echo "  kill -9 + resume: bitwise identical ($(digest "$WORK/ref"))"

loss3() { grep -o "^epoch 3/3 | steps 3 | loss [0-9.]*" "$1" | awk '{ print $NF }'; }
for np in 1 2; do
  mkdir -p "$WORK/ws$np"
  cp "$WORK/ref/snapshot_e0002.h5" "$WORK/ws$np/"
  train $np "$WORK/ws$np" --resume auto || { cat "$WORK/ws$np.log"; fail "resume on $np rank(s) failed"; }
  grep -q "resume: .*snapshot_e0002" "$WORK/ws$np.log" || fail "$np rank(s) did not resume from epoch 2"
  [ -n "$(loss3 "$WORK/ref.log")" ] && [ "$(loss3 "$WORK/ws$np.log")" = "$(loss3 "$WORK/ref.log")" ] ||
    fail "resumed on $np rank(s): epoch-3 loss $(loss3 "$WORK/ws$np.log"), uninterrupted $(loss3 "$WORK/ref.log")"
  "$BIN" diff "$WORK/ws$np/snapshot_e0003.h5" "$WORK/ref/snapshot_e0003.h5" > "$WORK/diff$np"
  worst=$(awk '/max rel diff/ { bn = $1 ~ /(\.bn[0-9]|downsample\.1)\./; tol = bn ? 1e-3 : 1e-4
                                if ($NF > tol) print $1, $NF, "> " tol }' "$WORK/diff$np")
  [ -z "$worst" ] || fail "resumed on $np rank(s): $worst"
  echo "  3 -> $np rank(s): epoch-3 loss $(loss3 "$WORK/ref.log") as uninterrupted; $(tail -1 "$WORK/diff$np")"
done
pass "resnet20 snapshots survive kill -9 and world-size change"
