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
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
# The runs read at most 16000 training and 256 test samples: a copy of the first ones
# (dataset_head.py) spares each of some 30 process start-ups decompressing and holding all 70,000
# images. Which samples they are matters to no check here.
/usr/bin/python3 "$SRC/tests/integration/dataset_head.py" fashion_mnist "$FASHION_GZ" "$WORK/fashion" 16000 256 \
  || fail "could not copy the first Fashion-MNIST samples"
tiny=(--config "$SRC/configs/fashion_mnist.toml" --data.root "$WORK/fashion"
      --model.preset lenet_mnist --data.test_limit 256
      --train.batch_size 64 --runtime.threads 1)
run() {  # run DIR ARGS...: one process; output in DIR.log; returns its exit code
  local dir=$1; shift
  "$BIN" "${tiny[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1
}
fingerprint() { (cd "$1" && find . -type f ! -name .ddp_train.lock -printf '%p %s %T@\n' | sort && cat run.json metrics.jsonl) | sha1sum; }
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
# Three epochs of 125 steps, so that a stop 0.3 s after the first epoch line lands mid-epoch in
# epoch 2 or, on a fast machine, epoch 3: the epoch is read from the snapshot's name.
local args=(--data.train_limit 16000 --train.epochs 3 --train.save_every 1)
mpirun_local -np 2 "$BIN" "${tiny[@]}" --run-dir "$B" "${args[@]}" > "$B.log" 2>&1 & job=$!
wait_for "$B.log" "epoch 1/3" 120 || fail "epoch 1 never finished"
sleep 0.3
kill -USR1 $(rank_pids "$B") 2> /dev/null || true
set +e; wait $job; rc=$?; set -e
[ "$rc" = 75 ] || { cat "$B.log"; fail "exit $rc after SIGUSR1, expected 75"; }
mid=$(ls "$B" | grep -E 'snapshot_e000[12]_s[0-9]+\.h5' || true)
[ -n "$mid" ] || fail "no mid-epoch snapshot: $(ls "$B")"
local e=$(( 10#$(echo "$mid" | sed -E 's/snapshot_e0*([0-9]+)_s.*/\1/') + 1 ))
for change in "--train.seed 7:train.seed" "--train.global_batch 64:global batch: 128 -> 64" \
              "--data.train_limit 12000:data.train_limit"; do
  if run "$B" "${args[@]}" --resume auto ${change%%:*}; then fail "resumed mid-epoch with ${change%%:*}"; fi
  grep -q "middle of epoch $e" "$B.log" && grep -q "${change#*:}" "$B.log" ||
    { cat "$B.log"; fail "mid-epoch refusal of ${change%%:*} does not name it"; }
done
if run "$B" "${args[@]}" --resume auto --model.preset lenet; then fail "resumed with another model"; fi
grep -q "model.preset" "$B.log" || { cat "$B.log"; fail "the model change is not named"; }
if run "$B" "${args[@]}" --resume auto --train.epochs $((e - 1)); then fail "resumed past train.epochs"; fi
grep -q "ask for at least $e epochs" "$B.log" || { cat "$B.log"; fail "fewer epochs than the snapshot's not refused"; }
# Only to the end of the interrupted epoch (train.epochs lowered to $e, an allowed change): the
# checks below are about that epoch; a further one is trained by the last resume.
run "$B" "${args[@]}" --resume auto --optim.lr 0.002 --train.epochs $e || { cat "$B.log"; fail "resume on 1 rank failed"; }
grep -q "global batch kept at 128" "$B.log" || { cat "$B.log"; fail "the run's global batch was not kept"; }
grep -q "global batch 128 (1 rank(s) x 128)" "$B.log" || fail "not trained with global batch 128"
grep -q "global_batch = 128" "$B/config.toml" || fail "config.toml does not show the global batch used"
grep -q "optim.lr: 0.001 -> 0.002" "$B.log" || fail "the lr change is not listed"
for what in "optim.lr: 0.001 -> 0.002" "world size: 2 -> 1" "train.global_batch: kept at 128"; do
  grep -q "$what" "$B/run.json" || fail "'$what' is not recorded in run.json"
done
for ((k = 1; k <= e; k++)); do [ "$(rows_of "$B" $k)" = 1 ] || fail "epoch $k is not exactly once"; done
steps=$(grep "\"epoch\": $e," "$B/metrics.jsonl" | grep -o '"steps": [0-9]*' | awk '{print $2}')
[ "$steps" = 125 ] || fail "epoch $e's row covers $steps steps, not the whole epoch (125)"
grep "\"epoch\": $e," "$B/metrics.jsonl" | grep -q '"segment": 2' || fail "epoch $e's row is not tagged with segment 2"
sum_epochs=$(grep -o '"epoch_s": [0-9.e-]*' "$B/metrics.jsonl" | awk '{s += $2} END {print s}')
ge "$(summary_field "$B/metrics.jsonl" total_s)" "$sum_epochs" || fail "total_s does not cover all segments"
grep -q '"exit": "stopped by' "$B/run.json" || fail "run.json does not record the stop"
# Resumed again with no change at all, the kept global batch is still the run's.
run "$B" "${args[@]}" --resume auto --train.epochs $((e + 1)) || { cat "$B.log"; fail "a further epoch failed"; }
grep -q "global batch 128 (1 rank(s) x 128)" "$B.log" || { cat "$B.log"; fail "the kept global batch was lost on the next resume"; }
for ((k = 1; k <= e + 1; k++)); do [ "$(rows_of "$B" $k)" = 1 ] || fail "epoch $k is not exactly once after a further epoch"; done
echo "  mid-epoch snapshot (epoch $e): seed/global batch/train_limit/model/epochs refused; 1 rank kept 128; one row each"
}

pruning() {  # defect 1: keep_last among corrupt snapshots deleted the file just written
local C="$WORK/c"; mkdir -p "$C"
run "$WORK/c_src" --data.train_limit 512 --train.epochs 1 || { cat "$WORK/c_src.log"; fail "source run failed"; }
for e in 2 3; do
  cp "$WORK/c_src/snapshot_e0001.h5" "$C/snapshot_e000$e.h5"
  size=$(stat -c %s "$C/snapshot_e000$e.h5")
  printf '\xff\xff\xff\xff' | dd of="$C/snapshot_e000$e.h5" bs=1 seek=$((size - 64)) conv=notrunc 2> /dev/null
done
for e in 2 3; do ! "$BIN" inspect "$C/snapshot_e000$e.h5" > /dev/null 2>&1 || fail "the corruption did not take"; done
run "$C" --data.train_limit 512 --train.epochs 1 --resume auto --train.keep_last 1 ||
  { cat "$C.log"; fail "resume auto among corrupt snapshots failed"; }
# The corrupt files are not this run's: kept, in place or moved to archive/ before the run wrote
# anything (issue 33, item 21), never deleted.
[ -f "$C/snapshot_e0001.h5" ] || fail "snapshot_e0001.h5 was deleted"
for f in snapshot_e0002.h5 snapshot_e0003.h5; do
  [ -f "$C/$f" ] || compgen -G "$C/archive/*/$f" > /dev/null || fail "$f was deleted"
done
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
grep -q "training diverged: the loss is not finite (NaN or inf) in epoch 1, step [0-9]" "$F.log" ||
  { cat "$F.log"; fail "the divergence is not reported with its step"; }
! ls "$F" | grep -q snapshot_ || fail "a snapshot was written after the loss became NaN"
grep -q '"status": "failed"' "$F/run.json" || fail "run.json does not record the failure"
echo "  NaN loss: stopped at its step, no snapshot, run.json failed"
}

foreign_files() {  # never mix runs: a second job, another run's snapshot, a rollback, an origin
local G="$WORK/g" big=(--data.train_limit 16000 --train.epochs 3)
# A second job into a directory a live job holds is refused, naming the holder.
# (TMPDIR: the kill -9 below leaves its MPI session directory behind, in $WORK then.)
TMPDIR="$WORK" "$BIN" "${tiny[@]}" --run-dir "$G" "${big[@]}" > "$G.first.log" 2>&1 & local first=$!
wait_for "$G.first.log" "^run: " 60 || { cat "$G.first.log"; fail "the first job never started"; }
if run "$G" "${big[@]}" --resume auto; then fail "a second job ran in a run.dir in use"; fi
grep -q "is in use by another ddp_train job (pid $first on" "$G.log" || { cat "$G.log"; fail "the lock holder is not named"; }
# Killed before its first snapshot, the job leaves no stale lock; a resume restarts the run.
kill -9 $first; wait $first 2> /dev/null || true
# Another run's snapshot is not continued in this run's directory.
run "$WORK/h" --data.train_limit 512 --train.epochs 1 || { cat "$WORK/h.log"; fail "source run failed"; }
if run "$G" "${big[@]}" --resume "$WORK/h/snapshot_e0001.h5"; then fail "another run's snapshot was continued here"; fi
grep -q "belongs to run" "$G.log" || { cat "$G.log"; fail "the foreign snapshot is not explained"; }
# A run that starts from another directory's snapshot and dies before its own first snapshot
# continues from that snapshot, never from scratch.
local O="$WORK/o"
"$BIN" "${tiny[@]}" --run-dir "$O" "${big[@]}" --resume "$WORK/h/snapshot_e0001.h5" > "$O.first.log" 2>&1 & first=$!
wait_for "$O.first.log" "^run: " 60 || { cat "$O.first.log"; fail "the job from a snapshot never started"; }
kill -9 $first; wait $first 2> /dev/null || true
! ls "$O" | grep -q snapshot_ || fail "the killed job wrote a snapshot (kill came too late)"
# One epoch more is enough to show where it continued from (train.epochs 3 -> 2: an allowed change).
run "$O" "${big[@]}" --resume auto --train.epochs 2 || { cat "$O.log"; fail "resuming the run started from a snapshot failed"; }
grep -q "no snapshot of its own yet; continuing from the snapshot it started from" "$O.log" ||
  { cat "$O.log"; fail "restarted from scratch instead of the snapshot it started from"; }
grep -q '"epoch": 1,' "$O/metrics.jsonl" && grep -q '"segment": 1' "$O/metrics.jsonl" ||
  fail "epoch 1's row (from the original run) is missing"
# Resuming the run from an older snapshot archives its later ones: the new branch is the run.
local R="$WORK/r"
run "$R" --data.train_limit 512 --train.epochs 3 --train.save_every 1 --train.keep_last 0 || fail "rollback source run failed"
run "$R" --data.train_limit 512 --train.epochs 3 --train.save_every 1 --train.keep_last 0 \
  --resume "$R/snapshot_e0001.h5" --optim.lr 0.002 || { cat "$R.log"; fail "rolling back failed"; }
grep -q "rolling run .* back to epoch 1" "$R.log" || { cat "$R.log"; fail "the rollback is not announced"; }
ls "$R"/archive/*-after-e1s0/snapshot_e0003.h5 > /dev/null 2>&1 || fail "the later snapshots were not archived"
for ((k = 1; k <= 3; k++)); do [ "$(rows_of "$R" $k)" = 1 ] || fail "epoch $k is not exactly once after the rollback"; done
echo "  second job refused; foreign snapshot refused; origin continued after a kill; rollback archived"
}

part "finished run resumed" finished_run
part "used run.dir" used_run_dir
part "mid-epoch resume" mid_epoch_resume
part "pruning" pruning
part "one-step epochs" one_step_epochs
part "train/test sizes" split_sizes
part "NaN loss" nan_loss
part "foreign files" foreign_files
[ ${#failed[@]} = 0 ] || fail "${#failed[@]} part(s) failed: $(IFS=,; echo "${failed[*]}")"
pass "run directories keep one run each and resuming never loses or mixes results"
