#!/usr/bin/env bash
# A damaged or shared run directory never traps the user and never loses a file (issue 33, items
# 20, 21, 22; tiny Fashion-MNIST runs, LeNet):
#  - run.json that is garbage, empty, truncated, of wrong types or a directory: --run.overwrite
#    starts over (the old files, run.json included, move to archive/), as its error advises;
#  - a restart never writes over a file it did not write: with every snapshot corrupt, --resume
#    auto starts over and archives them; another run's snapshot in the directory is archived before
#    this run's snapshot of the same name is written;
#  - metrics.jsonl and config.toml deleted under a running job are written again, whole, at the
#    next epoch, with a warning (the previous version appended to the deleted inode, exit 0).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
tiny=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 256
      --data.test_limit 64 --train.batch_size 64 --runtime.threads 1)
run() {  # run DIR ARGS...: one process; output in DIR.log; returns its exit code
  local dir=$1; shift
  "$BIN" "${tiny[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1
}
failed=()
part() { local name=$1; shift; if ! ("$@"); then failed+=("$name"); fi; }

corrupt_run_json() {
  local kind dir
  # One first run, copied for each kind: a run directory is files only (run.json names no path),
  # and each kind breaks its copy's run.json differently (one start instead of five).
  run "$WORK/rj_first" --train.epochs 1 || { cat "$WORK/rj_first.log"; fail "the first run failed"; }
  for kind in garbage empty truncated types directory; do
    dir="$WORK/rj_$kind"
    cp -a "$WORK/rj_first" "$dir"
    case $kind in
      garbage) echo 'this is not json {' > "$dir/run.json" ;;
      empty) : > "$dir/run.json" ;;
      truncated) head -c 40 "$dir/run.json" > "$dir/x" && mv "$dir/x" "$dir/run.json" ;;
      types) sed -i 's/"epochs": [0-9]*/"epochs": "two"/' "$dir/run.json" ;;
      directory) rm "$dir/run.json" && mkdir "$dir/run.json" ;;
    esac
    if run "$dir" --train.epochs 1 --resume auto; then fail "$kind: --resume auto accepted a broken run.json"; fi
    grep -q "start over with --run.overwrite" "$dir.log" || { cat "$dir.log"; fail "$kind: the error does not advise --run.overwrite"; }
    run "$dir" --train.epochs 1 --run.overwrite || { cat "$dir.log"; fail "$kind: --run.overwrite failed on a broken run.json"; }
    grep -q '"status": "complete"' "$dir/run.json" || fail "$kind: the new run did not complete"
    ls "$dir"/archive/*/run.json > /dev/null 2>&1 || fail "$kind: the broken run.json was not archived"
    ls "$dir"/archive/*/snapshot_e0001.h5 > /dev/null 2>&1 || fail "$kind: the old snapshot was not archived"
    echo "  run.json $kind: --run.overwrite archives it and starts over"
  done
}

corrupt_snapshots() {
  local dir="$WORK/corrupt"
  run "$dir" --train.epochs 2 --train.save_every 1 || { cat "$dir.log"; fail "first run failed"; }
  for f in "$dir"/snapshot_e000[12].h5; do printf 'garbage' | dd of="$f" bs=1 seek=600 conv=notrunc 2> /dev/null; done
  cat "$dir"/snapshot_e000[12].h5 | sha1sum > "$WORK/corrupt.sum"
  # (train.epochs grew: a complete run with nothing to do touches nothing)
  run "$dir" --train.epochs 3 --resume auto || { cat "$dir.log"; fail "--resume auto over corrupt snapshots failed"; }
  grep -q "skipping unreadable" "$dir.log" || { cat "$dir.log"; fail "no warning about the corrupt snapshots"; }
  local n
  n=$(find "$dir/archive" -name 'snapshot_e000[12].h5' | wc -l)
  [ "$n" = 2 ] || { cat "$dir.log"; fail "the corrupt snapshots were not archived ($n of 2 in archive/)"; }
  [ "$(cat "$dir"/archive/*/snapshot_e0001.h5 "$dir"/archive/*/snapshot_e0002.h5 | sha1sum)" = "$(cat "$WORK/corrupt.sum")" ] \
    || fail "the archived snapshots are not the corrupt files"
  "$BIN" inspect "$dir/snapshot_e0003.h5" > /dev/null || fail "the new snapshot is not readable"
  echo "  corrupt snapshots + --resume auto: archived, not overwritten"
}

foreign_snapshot() {
  local a="$WORK/fa" b="$WORK/fb"
  run "$a" --train.epochs 1 || { cat "$a.log"; fail "run a failed"; }
  run "$b" --train.epochs 3 || { cat "$b.log"; fail "run b failed"; }
  cp "$b/snapshot_e0003.h5" "$a/"  # another run's file lands in a's directory
  local sum
  sum=$(sha1sum < "$a/snapshot_e0003.h5")
  run "$a" --train.epochs 3 --resume auto || { cat "$a.log"; fail "continuing run a failed"; }
  local archived
  archived=$(find "$a/archive" -name snapshot_e0003.h5 | head -1)
  [ -n "$archived" ] || { cat "$a.log"; fail "the other run's snapshot_e0003.h5 was not archived"; }
  [ "$(sha1sum < "$archived")" = "$sum" ] || fail "the archived file is not the other run's"
  [ "$(sha1sum < "$a/snapshot_e0003.h5")" != "$sum" ] || fail "snapshot_e0003.h5 is still the other run's"
  "$BIN" inspect "$a/snapshot_e0003.h5" > "$WORK/inspect.txt" || fail "snapshot_e0003.h5 is unreadable"
  grep -q "epoch 3 completed" "$WORK/inspect.txt" || fail "run a wrote no snapshot_e0003.h5"
  grep -q "did not write" "$a.log" || { cat "$a.log"; fail "the move was not reported"; }
  echo "  another run's snapshot in run.dir: archived before this run wrote its own"
}

deleted_logs() {
  local dir="$WORK/del"
  "$BIN" "${tiny[@]}" --data.train_limit 4096 --train.epochs 3 --run-dir "$dir" > "$dir.log" 2>&1 &
  local job=$!
  # The moment epoch 1's row is written (an event wait, not a 0.1 s poll), the job is held (SIGSTOP)
  # while its files go, so that they go before epoch 2 ends however loaded the machine.
  seen_now "$dir/metrics.jsonl" '"epoch": 1,' || { kill $job; cat "$dir.log"; fail "epoch 1 never ended"; }
  kill -STOP $job
  rm "$dir/metrics.jsonl" "$dir/config.toml"
  kill -CONT $job
  wait $job || { cat "$dir.log"; fail "the run failed after its logs were deleted"; }
  [ -f "$dir/metrics.jsonl" ] || fail "metrics.jsonl was not written again"
  [ -f "$dir/config.toml" ] || fail "config.toml was not written again"
  for e in 1 2 3; do grep -q "\"epoch\": $e," "$dir/metrics.jsonl" || fail "metrics.jsonl lacks epoch $e"; done
  grep -q '"summary": true' "$dir/metrics.jsonl" || fail "metrics.jsonl lacks the summary"
  grep -q "epochs = 3" "$dir/config.toml" || fail "config.toml is not the resolved configuration"
  grep -q "warning: .*metrics.jsonl was deleted or replaced" "$dir.log" || { cat "$dir.log"; fail "no warning for metrics.jsonl"; }
  grep -q "warning: .*config.toml was deleted or replaced" "$dir.log" || fail "no warning for config.toml"
  echo "  metrics.jsonl and config.toml deleted mid-run: written again, whole, with a warning"
}

part "corrupt run.json" corrupt_run_json
part "corrupt snapshots" corrupt_snapshots
part "another run's snapshot" foreign_snapshot
part "deleted logs" deleted_logs
[ ${#failed[@]} -eq 0 ] || fail "failed: ${failed[*]}"
pass "broken run.json -> --run.overwrite works; files the run did not write are archived, never overwritten; deleted logs come back"
