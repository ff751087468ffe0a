#!/usr/bin/env bash
# Messages that misled and inputs that were silently taken (issue 33, items 6, 7, 9, 13 and 24; each
# part fails against the previous version):
#  - doctor reports a configuration error as a [FAIL] line and goes on with its other checks;
#  - --help: no "BOOL=true", no layer list (nor in `pack --help`), data.augment describes
#    RandomResizedCrop, the rrc keys are there; configs/imagefolder_resnet18.toml is current;
#  - a changed float prints as "0.2 -> 0.1", not 0.20000000000000001;
#  - a CPU start says "no GPU (...)" once and briefly; the bf16 refusal does not nest it;
#  - the transforms are printed at start (crop, flip, normalisation);
#  - refused, naming the key or word: --data.workers 100, --data.crop_padding 100000 (and 20 on
#    28-pixel images), `inspect G diff G G`, `eval --resume X`, report of a run whose metrics.jsonl
#    is a directory; report --snapshot of another run's model warns;
#  - --config FIFO with no writer: one SIGTERM ends it, with a message.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
tiny=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 256
      --data.test_limit 64 --train.batch_size 64 --runtime.threads 1)
failed=()
part() { local name=$1; shift; if ! ("$@"); then failed+=("$name"); fi; }
expect_error() {  # expect_error PATTERN ARGS...: non-zero exit, PATTERN in the output
  local pattern=$1; shift
  if "$BIN" "$@" > "$WORK/out" 2>&1; then fail "succeeded: $*"; fi
  grep -qF -- "$pattern" "$WORK/out" || { cat "$WORK/out"; fail "no '$pattern' for: $*"; }
}

doctor_config() {
  mkdir -p "$WORK/sizes/a" "$WORK/sizes/b"
  /usr/bin/python3 - "$WORK/sizes" << 'PY' || exit 0
import sys
from PIL import Image
for i, (w, h) in enumerate([(40, 30), (50, 60), (33, 41)]):
    for c in "ab":
        Image.new("RGB", (w, h), (i * 40, 100, 200)).save(f"{sys.argv[1]}/{c}/{i}.jpg")
PY
  "$BIN" pack --format imagefolder --input "$WORK/sizes" --encoding encoded --output "$WORK/sizes.h5" \
    > "$WORK/pack.log" 2>&1 || { cat "$WORK/pack.log"; fail "pack failed"; }
  local rc=0
  "$BIN" doctor --no-sweep --model.preset lenet --data.dataset packed --data.train_file "$WORK/sizes.h5" \
    --data.test_file "$WORK/sizes.h5" > "$WORK/doctor.log" 2>&1 || rc=$?
  [ $rc = 1 ] || { cat "$WORK/doctor.log"; fail "doctor exited $rc, not 1"; }
  grep -q "^\[FAIL\] config  *data.train_file = '$WORK/sizes.h5' holds images of varying sizes: set data.train_size" \
    "$WORK/doctor.log" || { cat "$WORK/doctor.log"; fail "no [FAIL] config line"; }
  grep -q "^\[PASS\] collectives" "$WORK/doctor.log" || { cat "$WORK/doctor.log"; fail "doctor did not go on with its checks"; }
  grep -q "^doctor: 1 check(s) failed" "$WORK/doctor.log" || { cat "$WORK/doctor.log"; fail "no summary"; }
  ! grep -q "ddp_train: error" "$WORK/doctor.log" || fail "doctor still aborts with an error"
  echo "  doctor: a configuration error is a [FAIL] line, the other checks run"
}

help_text() {
  "$BIN" --help > "$WORK/help" || fail "--help failed"
  ! grep -q "BOOL=true" "$WORK/help" || fail "--help shows BOOL=true: $(grep -m1 'BOOL=true' "$WORK/help")"
  ! grep -q "conv2d" "$WORK/help" || fail "--help still lists the layer types"
  grep -q "ddp_train layers" "$WORK/help" || fail "--help does not point to ddp_train layers"
  tr -s ' \n' ' ' < "$WORK/help" | grep -q "with data.train_size, RandomResizedCrop(data.rrc_scale, data.rrc_ratio)" \
    || fail "--help does not describe data.augment with data.train_size"
  grep -q -- "--data.rrc_scale" "$WORK/help" && grep -q -- "--data.rrc_ratio" "$WORK/help" || fail "no rrc keys in --help"
  "$BIN" pack --help > "$WORK/pack_help" || fail "pack --help failed"
  ! grep -q "conv2d" "$WORK/pack_help" || fail "pack --help appends the layer list"
  ! grep -q "not there yet" "$SRC/configs/imagefolder_resnet18.toml" || fail "imagefolder_resnet18.toml says 'not there yet'"
  echo "  --help: $(wc -l < "$WORK/help") lines, no BOOL=true, no layer list; pack --help $(wc -l < "$WORK/pack_help") lines"
}

start_lines() {
  "$BIN" "${tiny[@]}" --train.epochs 1 --optim.lr 0.2 --data.augment true --run-dir "$WORK/s" > "$WORK/s.log" 2>&1 \
    || { cat "$WORK/s.log"; fail "training failed"; }
  grep -q "^transforms: train RandomCrop(padding=4), RandomHorizontalFlip(), Normalize(mean=(0.2860), std=(0.3530)); eval Normalize(mean=(0.2860), std=(0.3530))" "$WORK/s.log" \
    || grep -q "^transforms: train RandomCrop(padding=4), RandomHorizontalFlip(), Normalize(" "$WORK/s.log" \
    || { grep -n "transforms" "$WORK/s.log"; fail "no transforms line"; }
  if grep -q "^device: no GPU" "$WORK/s.log"; then
    [ "$(grep -c "no GPU" "$WORK/s.log")" = 1 ] || fail "'no GPU' said more than once"
    local line
    line=$(grep "^device: no GPU" "$WORK/s.log")
    [ ${#line} -le 100 ] || fail "the no-GPU line is long: $line"
  fi
  "$BIN" "${tiny[@]}" --train.epochs 2 --optim.lr 0.1 --resume auto --run-dir "$WORK/s" > "$WORK/s2.log" 2>&1 \
    || { cat "$WORK/s2.log"; fail "resume failed"; }
  grep -q "optim.lr: 0.2 -> 0.1$" "$WORK/s2.log" || { grep "optim.lr" "$WORK/s2.log"; fail "the change does not print as 0.2 -> 0.1"; }
  grep -q '"optim.lr: 0.2 -> 0.1"' "$WORK/s/run.json" || fail "run.json does not record 0.2 -> 0.1"
  if "$BIN" "${tiny[@]}" --runtime.precision bf16 --run-dir "$WORK/bf16" > "$WORK/bf16.log" 2>&1; then
    : # a GPU took it
  else
    grep -q 'runtime.precision = "bf16" needs GPUs' "$WORK/bf16.log" || { cat "$WORK/bf16.log"; fail "no bf16 refusal"; }
    ! grep -q "trains on the CPU)" "$WORK/bf16.log" || fail "the bf16 refusal nests the device note: $(cat "$WORK/bf16.log")"
    ! grep -q "libcuda.so could not be loaded" "$WORK/bf16.log" || fail "the bf16 refusal repeats the long reason"
  fi
  echo "  start: transforms printed, device note short, 0.2 -> 0.1, bf16 refusal plain"
}

refusals() {
  expect_error "data.workers" "${tiny[@]}" --data.workers 100 --run-dir "$WORK/w"
  expect_error "data.crop_padding" "${tiny[@]}" --data.crop_padding 100000 --data.augment true --run-dir "$WORK/c"
  expect_error "data.crop_padding" "${tiny[@]}" --data.crop_padding 20 --data.augment true --run-dir "$WORK/c2"
  grep -q "at most half the image side (28 px" "$WORK/out" || { cat "$WORK/out"; fail "crop_padding 20: no bound named"; }
  expect_error "data.rrc_scale" "${tiny[@]}" --data.rrc_scale 0.9,0.1 --run-dir "$WORK/rrc"
  "$BIN" "${tiny[@]}" --train.epochs 1 --run-dir "$WORK/g" > "$WORK/g.log" 2>&1 || { cat "$WORK/g.log"; fail "training failed"; }
  local g="$WORK/g/snapshot_e0001.h5"
  expect_error "give one command at a time" inspect "$g" diff "$g" "$g"
  expect_error "--train.resume" eval --snapshot "$g" --resume "$g"
  expect_error "does not apply to \`eval\`" eval --snapshot "$g" --resume auto
  mkdir -p "$WORK/m" && cp "$WORK/g/run.json" "$WORK/m/" && mkdir "$WORK/m/metrics.jsonl"
  expect_error "metrics.jsonl is not a regular file" report "$WORK/m"
  "$BIN" "${tiny[@]}" --train.epochs 1 --train.seed 5 --run-dir "$WORK/other" > "$WORK/other.log" 2>&1 || fail "second run failed"
  "$BIN" report "$WORK/g" --snapshot "$WORK/other/snapshot_e0001.h5" --images 4 > "$WORK/rep.log" 2>&1 \
    || { cat "$WORK/rep.log"; fail "report --snapshot of another run failed"; }
  grep -q "warning: report: .*belongs to run .*, not to run" "$WORK/rep.log" || { cat "$WORK/rep.log"; fail "no warning for another run's snapshot"; }
  echo "  refused: workers 100, crop_padding 100000/20, rrc_scale 0.9,0.1, inspect+diff, eval --resume, metrics.jsonl dir; warned: report --snapshot of another run"
}

config_fifo() {
  mkfifo "$WORK/cfg.fifo"
  "$BIN" --config "$WORK/cfg.fifo" --run-dir "$WORK/f" > "$WORK/fifo.log" 2>&1 &
  local job=$! rc=0
  sleep 2
  kill -TERM $job
  for _ in $(seq 50); do kill -0 $job 2> /dev/null || break; sleep 0.1; done
  if kill -0 $job 2> /dev/null; then kill -9 $job; fail "--config FIFO: one SIGTERM did not stop it"; fi
  wait $job || rc=$?
  [ $rc -ne 0 ] || fail "--config FIFO stopped with exit 0"
  grep -q "cfg.fifo" "$WORK/fifo.log" || { cat "$WORK/fifo.log"; fail "--config FIFO: the message does not name the file"; }
  # A FIFO with a writer is read (as --config <(...) is).
  "$BIN" --config <(cat "$FASHION_CONFIG") --model.preset lenet_mnist --data.train_limit 256 \
    --data.test_limit 64 --train.epochs 1 --runtime.threads 1 --run-dir "$WORK/p" > "$WORK/p.log" 2>&1 \
    || { cat "$WORK/p.log"; fail "--config <(...) failed"; }
  echo "  --config FIFO: SIGTERM ends the wait (exit $rc); a pipe with a writer is read"
}

part "doctor" doctor_config
part "help" help_text
part "start-up lines" start_lines
part "refusals" refusals
part "config FIFO" config_fifo
[ ${#failed[@]} -eq 0 ] || fail "failed: ${failed[*]}"
pass "doctor reports config errors; --help and start-up text current and short; bad values refused; FIFO config stoppable"
