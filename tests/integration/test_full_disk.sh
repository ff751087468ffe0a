#!/usr/bin/env bash
# A full disk during a snapshot write (run.dir on a small tmpfs): a clear error naming the file and
# the reason, a non-zero exit, the older snapshot intact, no partial or temporary file; once there
# is room, --resume auto continues the run.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
[ "$(id -u)" = 0 ] || skip "mounting a small tmpfs needs root"
D="$WORK/disk"; mkdir -p "$D"
mount -t tmpfs -o size=1100k ddp_full_disk "$D" 2> /dev/null || skip "cannot mount a tmpfs here"
trap 'umount "$D" 2> /dev/null; [ "${DDP_KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"' EXIT
# Adam keeps two moments per weight: a LeNet snapshot is ~0.7 MB, so the first fits and the second
# (written beside the first before pruning) does not.
args=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 512
      --data.test_limit 256 --train.batch_size 64 --train.epochs 3 --train.save_every 1
      --train.keep_last 1 --runtime.threads 1 --run-dir "$D/run")
if "$BIN" "${args[@]}" > "$WORK/full.log" 2>&1; then fail "a run on a full disk exited 0"; fi
grep -q "cannot write snapshot '$D/run/snapshot_e0002.h5'.*No space left on device" "$WORK/full.log" ||
  { cat "$WORK/full.log"; fail "the error does not name the snapshot and the full disk"; }
"$BIN" inspect "$D/run/snapshot_e0001.h5" > /dev/null || fail "the older snapshot was damaged"
leftovers=$(ls -A "$D/run" | grep -E '\.tmp\.|snapshot_e0002' || true)
[ -z "$leftovers" ] || fail "partial files left: $leftovers"
grep -q '"status": "failed"' "$D/run/run.json" || fail "run.json does not record the failure"
echo "  full disk: clear error, e0001 intact, nothing partial"
mount -o remount,size=8m "$D"
"$BIN" "${args[@]}" --resume auto > "$WORK/resume.log" 2>&1 || { cat "$WORK/resume.log"; fail "resume after freeing space failed"; }
grep -q "resume: $D/run/snapshot_e0001.h5" "$WORK/resume.log" || fail "did not resume from e0001"
for e in 1 2 3; do [ "$(grep -c "\"epoch\": $e," "$D/run/metrics.jsonl")" = 1 ] || fail "epoch $e not once"; done
pass "full disk: error named, older snapshot intact, no partial file; resumed once there was room"
