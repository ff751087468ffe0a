#!/usr/bin/env bash
# run.tensorboard: TensorBoard event files, read back by an independent reader (python3-protobuf,
# python3-crcmod; tensorboard_reader.py): every record's CRCs, every epoch field equal to
# metrics.jsonl, the step scalars every run.log_every steps. Two ranks train two epochs; the run is
# then resumed for two more (train.epochs grew): a second events file, and no step written twice.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || [ -f "$FASHION/train-images-idx3-ubyte" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
/usr/bin/python3 -c "import google.protobuf, crcmod" 2> /dev/null ||
  skip "the independent reader needs python3-protobuf and python3-crcmod (apt-get install them)"

run=$WORK/run
# 640 samples in global batches of 128: 5 steps per epoch; step scalars every 2 steps.
args=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 640
      --data.test_limit 256 --train.batch_size 64 --train.save_every 1 --runtime.threads 1
      --run.tensorboard true --run.log_every 2 --run-dir "$run")
mpirun_local -np 2 "$BIN" "${args[@]}" --train.epochs 2 > "$WORK/first.log" 2>&1 ||
  { cat "$WORK/first.log"; fail "the first run failed"; }
/usr/bin/python3 "$SRC/tests/integration/tensorboard_reader.py" "$run" 2 1 ||
  fail "the events file of the first run is wrong"

# A second segment in the same second must not overwrite the first one's file.
mpirun_local -np 2 "$BIN" "${args[@]}" --train.epochs 4 --resume auto > "$WORK/second.log" 2>&1 ||
  { cat "$WORK/second.log"; fail "the resumed run failed"; }
grep -q '^resume: .*snapshot_e0002' "$WORK/second.log" || { cat "$WORK/second.log"; fail "did not resume from epoch 2"; }
/usr/bin/python3 "$SRC/tests/integration/tensorboard_reader.py" "$run" 2 2 ||
  fail "the events files after the resume are wrong"

# The reader must fail on a damaged file (one flipped byte in the last record's data).
bad=$WORK/bad
mkdir -p "$bad/tensorboard"
cp "$run/metrics.jsonl" "$bad/"
first=$(ls "$run"/tensorboard/events.out.tfevents.* | head -1)
cp "$first" "$bad/tensorboard/"
f=$(ls "$bad"/tensorboard/*)
size=$(stat -c %s "$f")
printf '\xff' | dd of="$f" bs=1 seek=$((size - 10)) conv=notrunc status=none
! /usr/bin/python3 "$SRC/tests/integration/tensorboard_reader.py" "$bad" 2 1 > "$WORK/bad.log" 2>&1 ||
  fail "the reader accepted a damaged events file"
grep -q "bad data CRC" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the damage was not found by the CRC"; }
pass "TensorBoard events: CRCs valid, scalars equal metrics.jsonl, resumed run appends a new file without repeating steps"
