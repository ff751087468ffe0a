#!/usr/bin/env bash
# Bad input to `ddp_train pack` and to training from packed files: each a clear error naming the
# file and the sample, chunk or line, a non-zero exit, and no file left under the output name (nor
# a temporary one). Also an interrupted pack (SIGINT) leaves nothing behind.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
T=$SRC/tests/integration/pack
D=$WORK/in
"$PY" "$T/make_bad.py" "$D"
mkdir "$WORK/out"

nothing_left() {  # no output file and no temporary file in $WORK/out
  [ -z "$(ls -A "$WORK/out")" ] || fail "$1: files left behind: $(ls -A "$WORK/out")"
}
pack_fails() {  # pack_fails WHAT PATTERN ARGS...: fails, the message matches, nothing left
  local what=$1 pattern=$2; shift 2
  if "$BIN" pack --threads 2 --output "$WORK/out/x.h5" "$@" > "$WORK/log" 2>&1; then
    fail "$what: pack succeeded"
  fi
  grep -qE -- "$pattern" "$WORK/log" || { cat "$WORK/log"; fail "$what: message does not match '$pattern'"; }
  nothing_left "$what"
  echo "  $what: $(grep -m1 error "$WORK/log" | cut -c1-220)"
}
train_fails() {  # train_fails WHAT PATTERN TRAIN_FILE [ARGS...]
  local what=$1 pattern=$2 file=$3; shift 3
  if "$BIN" --data.dataset packed --data.train_file "$file" --data.test_file "$file" \
    --model.preset lenet --train.epochs 1 --runtime.threads 2 --run-dir "$WORK/run" "$@" > "$WORK/log" 2>&1; then
    fail "$what: training succeeded"
  fi
  grep -qE -- "$pattern" "$WORK/log" || { cat "$WORK/log"; fail "$what: message does not match '$pattern'"; }
  echo "  $what: $(grep -m1 error "$WORK/log" | cut -c1-220)"
}

pack_fails "corrupt JPEG" "corrupt/b/2.jpg': corrupt JPEG" --format imagefolder --input "$D/corrupt"
pack_fails "colour image in a grey set" "good/a/0.png': a colour image in a grey set.*--channels 3" \
  --format imagefolder --input "$D/good" --channels 1
pack_fails "empty class folder" "empty/c'.*class folder 'c' holds no" --format imagefolder --input "$D/empty"
pack_fails "size mismatch under raw" "sizes/b/3.png': image size 40x40.*--size" \
  --format imagefolder --input "$D/sizes"
pack_fails "CSV: missing file" "good/b/nothing.png': no such file.*line 4 of '.*list_missing.csv'" \
  --format csv --input "$D/list_missing.csv"
pack_fails "CSV: bad label" "list_label.csv' line 4: the label is empty" --format csv --input "$D/list_label.csv"
pack_fails "CSV: wrong column count" "list_columns.csv' line 4: expected 2 columns \(path,label\), found 3" \
  --format csv --input "$D/list_columns.csv"

# A grey image in an RGB set is converted (as torchvision's ImageFolder converts it) and counted.
"$BIN" pack --format imagefolder --input "$D/grey" --output "$WORK/grey.h5" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; fail "a grey image in an RGB set was not converted"; }
grep -q "packed 8 samples.*converted 1 grey image(s) to RGB" "$WORK/log" \
  || { cat "$WORK/log"; fail "the conversion is not counted"; }

# --skip-bad: the corrupt file is listed, the rest packed.
"$BIN" pack --format imagefolder --input "$D/corrupt" --output "$WORK/skipped.h5" --skip-bad > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; fail "--skip-bad failed"; }
grep -q "packed 8 samples.*skipped 1" "$WORK/log" && grep -q "skipped: .*2.jpg" "$WORK/log" \
  || { cat "$WORK/log"; fail "--skip-bad did not list the skipped file"; }

# Damaged packed files.
"$BIN" pack --format imagefolder --input "$D/good" --output "$WORK/good.h5" > /dev/null
"$BIN" pack --format imagefolder --input "$D/good" --output "$WORK/enc.h5" --encoding encoded > /dev/null
cp "$WORK/enc.h5" "$WORK/flipped.h5"
"$PY" "$T/tamper.py" "$WORK/flipped.h5" flip encoded 5000
train_fails "flipped byte in an encoded pack" "flipped.h5': chunk 0 of 1 \(samples 0\.\.7\) has CRC32 .* but the file records" "$WORK/flipped.h5"
cp "$WORK/good.h5" "$WORK/flipped_raw.h5"
"$PY" "$T/tamper.py" "$WORK/flipped_raw.h5" flip images 3
train_fails "flipped byte in a raw pack" "flipped_raw.h5': chunk 0 of 1 \(samples 0\.\.7\) has CRC32" "$WORK/flipped_raw.h5"
head -c $(($(stat -c %s "$WORK/good.h5") / 2)) "$WORK/good.h5" > "$WORK/truncated.h5"
train_fails "truncated .h5" "truncated.h5': cannot open it as HDF5 \(truncated" "$WORK/truncated.h5"
cp "$WORK/good.h5" "$WORK/v2.h5"
"$PY" "$T/tamper.py" "$WORK/v2.h5" version 2
train_fails "unknown format_version" "v2.h5': packed format_version 2, but this ddp_train reads format_version 1" "$WORK/v2.h5"
"$BIN" pack --format imagefolder --input "$D/small" --output "$WORK/small.h5" > /dev/null
train_fails "image size that does not fit the model" "small.h5' holds 3x8x8 images, which the model does not take.*conv2" "$WORK/small.h5"
train_fails "test split of another size" "data.test_file = '.*small.h5' holds images 3x8x8 in 2 classes, data.train_file = '.*good.h5' holds 3x32x32" \
  "$WORK/good.h5" --data.test_file "$WORK/small.h5"

# SIGINT while packing: nothing under the output name, no temporary file.
"$PY" "$T/make_folder.py" "$WORK/many" 2> /dev/null || true
for i in $(seq 1 40); do cp -r "$WORK/many/cat" "$WORK/many/cat$i"; done
"$BIN" pack --format imagefolder --input "$WORK/many" --output "$WORK/out/x.h5" --size 512x512 \
  --threads 1 > "$WORK/log" 2>&1 &
pid=$!
wait_for_file "$WORK/out/.x.h5.tmp.$pid" 30 || { kill $pid; fail "the pack never started writing"; }
kill -INT $pid
if wait $pid; then fail "an interrupted pack exited 0"; fi
grep -q "interrupted" "$WORK/log" || { cat "$WORK/log"; fail "no word of the interruption"; }
nothing_left "SIGINT"
pass "bad inputs name the file and the sample, chunk or line; nothing half-written"
