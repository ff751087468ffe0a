#!/usr/bin/env bash
# Smaller input cases of pack and the packed readers: a CSV saved with a UTF-8 byte-order mark (as
# spreadsheets save "CSV UTF-8") reads as without one; a packed file whose `samples` attribute is
# 2^62 is refused when streamed, naming the file and the attribute (not "cannot create
# std::vector larger than max_size()"); an IDX file that is a symbolic-link loop is called one
# (not "no such file"); pack's errors carry no "rank 0 of 1" (pack is not a ranked run).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
D=$WORK/in
"$PY" - "$D" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(6)
for name in ["a.png", "b.png", "c.png", "d.png"]:
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(os.path.join(d, name))
with open(os.path.join(d, "bom.csv"), "wb") as f:
    f.write("\ufeffpath,label\na.png,x\nb.png,y\nc.png,x\nd.png,y\n".encode("utf-8"))
PYEOF
"$BIN" pack --format csv --input "$D/bom.csv" --output "$WORK/bom.h5" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; fail "a CSV with a byte-order mark was not read"; }
grep -q "packed 4 samples in 2 classes" "$WORK/log" || { cat "$WORK/log"; fail "BOM CSV: wrong rows"; }
echo "  CSV with a byte-order mark: header and rows read"

cp "$WORK/bom.h5" "$WORK/huge.h5"
"$PY" -c "import h5py, sys; h5py.File(sys.argv[1], 'r+').attrs['samples'] = 2**62" "$WORK/huge.h5"
for mode in "--data.cache_mb 2 --data.train_limit 2" "--data.cache_mb 2" ""; do
  # shellcheck disable=SC2086
  if "$BIN" --data.dataset packed --data.train_file "$WORK/huge.h5" --data.test_file "$WORK/bom.h5" $mode \
    --model.preset lenet --train.epochs 1 --runtime.threads 2 --run-dir "$WORK/run" > "$WORK/log" 2>&1; then
    fail "training on samples = 2^62 succeeded ($mode)"
  fi
  grep -qF "huge.h5': attribute samples = 4611686018427387904, but dataset /labels holds 4 labels" "$WORK/log" \
    || { cat "$WORK/log"; fail "samples = 2^62 (${mode:-in memory}): the file and attribute are not named"; }
done
echo "  samples = 2^62: file and attribute named, streamed and in memory"

mkdir "$WORK/idx"
ln -s train-images-idx3-ubyte "$WORK/idx/train-images-idx3-ubyte"
if "$BIN" pack --format fashion_mnist --input "$WORK/idx" --output "$WORK/f.h5" > "$WORK/log" 2>&1; then
  fail "an IDX symbolic-link loop was packed"
fi
grep -qF "idx/train-images-idx3-ubyte': a symbolic link loop" "$WORK/log" \
  || { cat "$WORK/log"; fail "the IDX loop is not called one"; }
grep -q "^ddp_train pack: error: " "$WORK/log" || { cat "$WORK/log"; fail "pack's error line"; }
! grep -q "rank 0 of 1" "$WORK/log" || { cat "$WORK/log"; fail "pack's error names a rank"; }
if "$BIN" pack --format csv --input "$D/bom.csv" --output "$WORK/c.h5" --channels 2 > "$WORK/log" 2>&1; then
  fail "pack --channels 2 was accepted"
fi
grep -q "^ddp_train pack: error: command line: --channels" "$WORK/log" && ! grep -q "rank 0 of 1" "$WORK/log" \
  || { cat "$WORK/log"; fail "pack's command-line error names a rank"; }
echo "  IDX link loop named; no rank in pack's errors (nor in its command-line errors)"
pass "BOM CSV, samples = 2^62, IDX link loop, pack errors without a rank"
