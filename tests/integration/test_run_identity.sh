#!/usr/bin/env bash
# A run directory holds one run, and resuming never destroys or mixes results (tiny Fashion-MNIST
# runs, LeNet):
#  - run.json (id, status, segments) and config.toml; a finished run resumed with --resume auto
#    exits 0 without touching a file, and continues when train.epochs grew;
#  - a fresh run into a used run.dir is refused; --run.overwrite archives the old run;
#  - configuration changes on resume: allowed ones listed and recorded, the model refused, a
#    mid-epoch snapshot refuses another seed or global batch, and keeps the run's global batch
#    on another world size;
#  - an epoch interrupted and finished in another segment has one complete row, the summary's
#    time covers both segments;
#  - pruning never deletes another run's or a corrupt file, and keeps the file just written;
#  - a stop signal is honoured in an epoch of one step; train/test images of different sizes are
#    refused; a loss that becomes NaN stops training with no snapshot of the NaN weights.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION"
tiny=(--config "$SRC/configs/fashion_mnist.toml" --model.preset lenet_mnist --data.test_limit 256
      --train.batch_size 64 --runtime.threads 1)
run() {  # run DIR ARGS...: one process; output in DIR.log; returns its exit code
  local dir=$1; shift
  "$BIN" "${tiny[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1
}
fingerprint() { (cd "$1" && find . -type f -printf '%p %s %T@\n' | sort && cat run.json metrics.jsonl) | sha1sum; }
rows_of() { grep -c "\"epoch\": $2," "$1/metrics.jsonl" || true; }

# Each part runs on its own (a subshell: `fail` ends only that part), so that every observed
# failure is reported, e.g. against an older binary; the test fails when any part did.
failed=()
part() { local name=$1; shift; if ! ("$@"); then failed+=("$name"); fi; }
A="$WORK/a"; B="$WORK/b"

finished_run() {  # observed 1: --resume auto on a finished run destroyed its summary

run "$A" --data.train_limit 512 --train.epochs 2 || { cat "$A.log"; fail "first run failed"; }
for f in run.json config.toml metrics.jsonl snapshot_e0002.h5; do [ -f "$A/$f" ] || fail "no $f"; done
grep -q '"status": "complete"' "$A/run.json" || fail "run.json not complete: $(cat "$A/run.json")"
grep -q 'epochs = 2' "$A/config.toml" || fail "config.toml lacks the resolved epochs"
id=$(grep -o '"run_id": "[^"]*"' "$A/run.json" | cut -d'"' -f4)
before=$(fingerprint "$A")
sleep 1.1  # a rewrite would show in the modification times
run "$A" --data.train_limit 512 --train.epochs 2 --resume auto || { cat "$A.log"; fail "resume of a complete run failed"; }
grep -q "is complete: nothing to do" "$A.log" || { cat "$A.log"; fail "no 'nothing to do' message"; }
[ "$(fingerprint "$A")" = "$before" ] || fail "resume auto of a complete run changed files"
echo "  complete run + --resume auto: exit 0, nothing touched"
# train.epochs grew: it continues, every epoch once, the same run.
run "$A" --data.train_limit 512 --train.epochs 3 --resume auto || { cat "$A.log"; fail "continuing to 3 epochs failed"; }
for e in 1 2 3; do [ "$(rows_of "$A" $e)" = 1 ] || fail "epoch $e is not exactly once in metrics.jsonl"; done
[ "$(summary_field "$A/metrics.jsonl" epochs)" = 3 ] || fail "summary epochs != 3"
[ "$(summary_field "$A/metrics.jsonl" segments)" = 2 ] || fail "summary segments != 2"
grep -q "\"run_id\": \"$id\"" "$A/run.json" || fail "continuing changed the run id"
grep -q 'train.epochs: 2 -> 3' "$A/run.json" || fail "the epochs change is not recorded in run.json"
echo "  train.epochs 2 -> 3 with --resume auto: continued, recorded"
}

used_run_dir() {  # observed 2: a fresh run into a used run.dir mixed the two runs
local id; id=$(grep -o '"run_id": "[^"]*"' "$A/run.json" | cut -d'"' -f4) || fail "no run.json in $A"
before=$(fingerprint "$A")
if run "$A" --data.train_limit 512 --train.epochs 2; then fail "a fresh run into a used run.dir was accepted"; fi
grep -q "already holds run $id" "$A.log" || { cat "$A.log"; fail "the refusal does not name the run"; }
grep -q -- "--resume auto" "$A.log" && grep -q -- "--run.overwrite" "$A.log" || fail "no way out named"
[ "$(fingerprint "$A")" = "$before" ] || fail "the refused run changed files"
run "$A" --data.train_limit 512 --train.epochs 1 --run.overwrite || { cat "$A.log"; fail "overwrite failed"; }
[ -f "$A/archive/$id/snapshot_e0003.h5" ] && [ -f "$A/archive/$id/run.json" ] || fail "old run not archived"
grep -q "moved the previous run" "$A.log" || fail "overwrite did not say what it moved"
! grep -q "\"run_id\": \"$id\"" "$A/run.json" || fail "overwrite kept the old run id"
[ "$(rows_of "$A" 2)" = 0 ] || fail "the old run's rows survived in metrics.jsonl"
echo "  fresh run into a used run.dir: refused; --run.overwrite archived it"
}

mid_epoch_resume() {  # observed 3, 4 and defect 7: global batch, partial rows, sample position
local args=(--data.train_limit 16000 --train.epochs 2 --train.save_every 1)
mpirun_local -np 2 "$BIN" "${tiny[@]}" --run-dir "$B" "${args[@]}" > "$B.log" 2>&1 & job=$!
wait_for "$B.log" "epoch 1/2" 120 || fail "epoch 1 never finished"
sleep 0.3
kill -USR1 $(rank_pids "$B") 2> /dev/null || true
set +e; wait $job; rc=$?; set -e
[ "$rc" = 75 ] || { cat "$B.log"; fail "exit $rc after SIGUSR1, expected 75"; }
mid=$(ls "$B" | grep -E 'snapshot_e0001_s[0-9]+\.h5' || true)
[ -n "$mid" ] || fail "no mid-epoch snapshot of epoch 2: $(ls "$B")"
for change in "--train.seed 7:train.seed" "--train.global_batch 64:global batch: 128 -> 64" \
              "--data.train_limit 12000:data.train_limit"; do
  if run "$B" "${args[@]}" --resume auto ${change%%:*}; then fail "resumed mid-epoch with ${change%%:*}"; fi
  grep -q "middle of epoch 2" "$B.log" && grep -q "${change#*:}" "$B.log" ||
    { cat "$B.log"; fail "mid-epoch refusal of ${change%%:*} does not name it"; }
done
if run "$B" "${args[@]}" --resume auto --model.preset lenet; then fail "resumed with another model"; fi
grep -q "model.preset" "$B.log" || { cat "$B.log"; fail "the model change is not named"; }
run "$B" "${args[@]}" --resume auto --optim.lr 0.002 || { cat "$B.log"; fail "resume on 1 rank failed"; }
grep -q "global batch kept at 128" "$B.log" || { cat "$B.log"; fail "the run's global batch was not kept"; }
grep -q "global batch 128 (1 rank(s) x 128)" "$B.log" || fail "not trained with global batch 128"
grep -q "optim.lr: 0.001 -> 0.002" "$B.log" || fail "the lr change is not listed"
grep -q "optim.lr: 0.001 -> 0.002" "$B/run.json" || fail "the lr change is not recorded in run.json"
[ "$(rows_of "$B" 2)" = 1 ] || fail "epoch 2 is not exactly once in metrics.jsonl"
steps=$(grep '"epoch": 2,' "$B/metrics.jsonl" | grep -o '"steps": [0-9]*' | awk '{print $2}')
[ "$steps" = 125 ] || fail "epoch 2's row covers $steps steps, not the whole epoch (125)"
grep '"epoch": 2,' "$B/metrics.jsonl" | grep -q '"segment": 2' || fail "epoch 2's row is not tagged with segment 2"
sum_epochs=$(grep -o '"epoch_s": [0-9.e-]*' "$B/metrics.jsonl" | awk '{s += $2} END {print s}')
ge "$(summary_field "$B/metrics.jsonl" total_s)" "$sum_epochs" || fail "total_s does not cover all segments"
grep -q '"exit": "stopped by' "$B/run.json" || fail "run.json does not record the stop"
echo "  mid-epoch snapshot: seed/global batch/train_limit/model refused; 1 rank kept 128; one row"
}

pruning() {  # defect 1: keep_last among corrupt snapshots deleted the file just written
local C="$WORK/c"; mkdir -p "$C"
run "$WORK/c_src" --data.train_limit 512 --train.epochs 1 || { cat "$WORK/c_src.log"; fail "source run failed"; }
for e in 2 3; do
  cp "$WORK/c_src/snapshot_e0001.h5" "$C/snapshot_e000$e.h5"
  size=$(stat -c %s "$C/snapshot_e000$e.h5")
  printf '\xff\xff\xff\xff' | dd of="$C/snapshot_e000$e.h5" bs=1 seek=$((size - 64)) conv=notrunc 2> /dev/null
done
run "$C" --data.train_limit 512 --train.epochs 1 --resume auto --train.keep_last 1 ||
  { cat "$C.log"; fail "resume auto among corrupt snapshots failed"; }
for f in snapshot_e0001.h5 snapshot_e0002.h5 snapshot_e0003.h5; do [ -f "$C/$f" ] || fail "$f was deleted"; done
"$BIN" inspect "$C/snapshot_e0001.h5" > /dev/null || fail "the new snapshot is unreadable"
echo "  keep_last 1 among corrupt snapshots: kept the new file and the corrupt ones"
}

one_step_epochs() {  # defect 3: SIGTERM ignored with one step per epoch; Slurm's double SIGTERM
local D="$WORK/d"
"$BIN" "${tiny[@]}" --run-dir "$D" --data.train_limit 64 --data.test_limit 64 --train.epochs 100000 \
  > "$D.log" 2>&1 & job=$!
wait_for "$D.log" "epoch 3/" 60 || { cat "$D.log"; fail "the one-step run never reached epoch 3"; }
# Twice, 50 ms apart, as Slurm delivers a time limit (slurmstepd, then srun forwarding it): one
# request, not the "second signal" that exits at once.
kill -TERM $job; sleep 0.05; kill -TERM $job
for ((i = 0; i < 200; i++)); do kill -0 $job 2> /dev/null || break; sleep 0.1; done
kill -9 $job 2> /dev/null && fail "SIGTERM was ignored for 20 s with one step per epoch"
set +e; wait $job; rc=$?; set -e
[ "$rc" = 75 ] || { tail "$D.log"; fail "exit $rc after SIGTERM with one step per epoch, expected 75"; }
ls "$D" | grep -qE 'snapshot_e[0-9]+\.h5' || fail "no snapshot after the stop"
echo "  one step per epoch: SIGTERM (delivered twice, as by Slurm) -> snapshot, exit 75"
}

split_sizes() {  # defect 4: 14x14 test images with 28x28 training images ran to NaN
local E="$WORK/e_data"; mkdir -p "$E"
cp "$FASHION"/train-* "$E/"
python3 - "$E" << 'PY'
import gzip, struct, sys
n = 64
with gzip.open(sys.argv[1] + "/t10k-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 14, 14) + bytes(n * 14 * 14))
with gzip.open(sys.argv[1] + "/t10k-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
if run "$WORK/e" --data.root "$E" --data.train_limit 512 --train.epochs 1; then
  fail "14x14 test images with 28x28 training images were accepted"
fi
grep -q "1x14x14 in 10 classes but the training split's are 1x28x28" "$WORK/e.log" ||
  { cat "$WORK/e.log"; fail "the size mismatch is not explained"; }
echo "  14x14 test vs 28x28 training images: refused"
}

nan_loss() {  # low severity: a NaN loss exited 0 and kept writing snapshots
local F="$WORK/f"
if run "$F" --data.train_limit 512 --train.epochs 3 --optim.name sgd --optim.lr 1e9; then
  fail "a run whose loss became NaN exited 0"
fi
grep -q "training diverged: the loss of rank 0 is not finite .* epoch 1, step [0-9]" "$F.log" ||
  { cat "$F.log"; fail "the divergence is not reported with its step"; }
! ls "$F" | grep -q snapshot_ || fail "a snapshot was written after the loss became NaN"
grep -q '"status": "failed"' "$F/run.json" || fail "run.json does not record the failure"
echo "  NaN loss: stopped at its step, no snapshot, run.json failed"
}

part "finished run resumed" finished_run
part "used run.dir" used_run_dir
part "mid-epoch resume" mid_epoch_resume
part "pruning" pruning
part "one-step epochs" one_step_epochs
part "train/test sizes" split_sizes
part "NaN loss" nan_loss
[ ${#failed[@]} = 0 ] || fail "${#failed[@]} part(s) failed: $(IFS=,; echo "${failed[*]}")"
pass "run directories keep one run each and resuming never loses or mixes results"
