#!/usr/bin/env bash
# What a short run shows (issue 33, items 8 and 13): the model in one start-up line, its layer
# table in run.dir/model.txt (and in the log with --run.verbose true); TensorBoard on by default,
# with a step curve even for a run shorter than run.log_every (read back by the independent
# reader, tensorboard_reader.py), and none with --run.tensorboard false; `eval` evaluates the
# snapshot (the same accuracy as training's last evaluation) without a `resume:` line.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

# 640 samples in batches of 64: 10 steps, fewer than run.log_every's default 50.
args=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 640
      --data.test_limit 256 --train.batch_size 64 --train.epochs 1 --runtime.threads 1)
"$BIN" "${args[@]}" --run-dir "$WORK/run" > "$WORK/run.log" 2>&1 || { cat "$WORK/run.log"; fail "training failed"; }
cat "$WORK/run.log"
grep -Eq "^model: [0-9]+ layers, [0-9,]+ parameters \([0-9]+ [KMG]iB\), activations [0-9.]+ [KMG]iB for a micro-batch of 64; layer table in $WORK/run/model.txt$" "$WORK/run.log" \
  || fail "no one-line model summary naming model.txt"
! grep -q "total trainable parameters" "$WORK/run.log" || fail "the layer table is printed without run.verbose"
grep -q "total trainable parameters" "$WORK/run/model.txt" || fail "model.txt holds no layer table"
grep -q "conv1 " "$WORK/run/model.txt" || fail "model.txt does not list conv1"
[ "$(wc -l < "$WORK/run.log")" -le 25 ] || fail "the start-up log is $(wc -l < "$WORK/run.log") lines"

"$BIN" "${args[@]}" --run-dir "$WORK/verbose" --run.verbose true > "$WORK/verbose.log" 2>&1 \
  || { cat "$WORK/verbose.log"; fail "training with --run.verbose true failed"; }
grep -q "total trainable parameters" "$WORK/verbose.log" || fail "--run.verbose true prints no layer table"
cmp -s <(sed -n '/^  layer /,/total trainable parameters/p' "$WORK/verbose.log") "$WORK/verbose/model.txt" \
  || fail "the printed table differs from model.txt"

# TensorBoard by default; 10 steps get step scalars every 2 steps (at least 5 points a run).
ls "$WORK"/run/tensorboard/events.out.tfevents.* > /dev/null 2>&1 || fail "no TensorBoard events by default"
if /usr/bin/python3 -c "import google.protobuf, crcmod" 2> /dev/null; then
  /usr/bin/python3 "$SRC/tests/integration/tensorboard_reader.py" "$WORK/run" 2 1 \
    || fail "the events of a 10-step run are wrong"
else
  echo "  (python3-protobuf or python3-crcmod missing: the events are not read back)"
fi
"$BIN" "${args[@]}" --run-dir "$WORK/off" --run.tensorboard false > "$WORK/off.log" 2>&1 \
  || { cat "$WORK/off.log"; fail "training with --run.tensorboard false failed"; }
[ ! -e "$WORK/off/tensorboard" ] || fail "--run.tensorboard false still wrote events"

# eval: no resume line, and the accuracy training's final evaluation had.
"$BIN" eval --snapshot "$WORK/run/snapshot_e0001.h5" --runtime.threads 1 > "$WORK/eval.log" 2>&1 \
  || { cat "$WORK/eval.log"; fail "eval failed"; }
cat "$WORK/eval.log"
! grep -q "resume" "$WORK/eval.log" || fail "eval prints a resume line"
acc=$(summary_field "$WORK/run/metrics.jsonl" final_test_acc)
grep -q "^test accuracy: $(awk -v a="$acc" 'BEGIN { printf "%.2f", 100 * a }')% (256 samples)" "$WORK/eval.log" \
  || fail "eval disagrees with training's final accuracy $acc"
pass "one model line (table in model.txt, --run.verbose prints it), TensorBoard by default with a step curve for 10 steps, eval without a resume line"
