#!/usr/bin/env bash
# Corrupt snapshots and unwritable run directories.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
common=(--config "$FASHION_CONFIG" --data.train_limit 600 --data.test_limit 100
        --train.batch_size 100 --train.save_every 1 --runtime.threads 1)
"$BIN" "${common[@]}" --train.epochs 2 --run-dir "$WORK/run" > "$WORK/log"
newest="$WORK/run/snapshot_e0002.h5"
head -c $(( $(stat -c %s "$newest") / 2 )) "$newest" > "$WORK/half" && mv "$WORK/half" "$newest"
# --resume auto (asked for a third epoch: the run is complete at two) skips the truncated newest
# snapshot with a warning and resumes from epoch 1.
"$BIN" "${common[@]}" --train.epochs 3 --run-dir "$WORK/run" --resume auto > "$WORK/auto.log" 2> "$WORK/auto.err"
grep -q "snapshot_e0002.h5" "$WORK/auto.err" || { cat "$WORK/auto.err"; fail "no warning naming the corrupt snapshot"; }
grep -q "resume: .*snapshot_e0001.h5" "$WORK/auto.log" || fail "did not fall back to snapshot_e0001.h5"
# Passed explicitly, the corrupt file is an error naming it.
head -c 5000 "$WORK/run/snapshot_e0001.h5" > "$WORK/bad.h5"
if "$BIN" "${common[@]}" --train.epochs 2 --run-dir "$WORK/run2" --resume "$WORK/bad.h5" > /dev/null 2> "$WORK/err"; then
  fail "a truncated snapshot was accepted"
fi
grep -q "bad.h5" "$WORK/err" || { cat "$WORK/err"; fail "error does not name the file"; }
# A run directory that cannot be written fails before training starts.
touch "$WORK/not_a_dir"
if "$BIN" "${common[@]}" --train.epochs 1 --run-dir "$WORK/not_a_dir/run" > "$WORK/out" 2> "$WORK/err"; then
  fail "training started in an unwritable run directory"
fi
grep -q "not_a_dir" "$WORK/err" || { cat "$WORK/err"; fail "error does not name the run directory"; }
grep -q "^epoch" "$WORK/out" && fail "training ran before the run directory was checked"
pass "corrupt snapshots and unwritable run directories are reported"
