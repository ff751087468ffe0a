#!/usr/bin/env bash
# Class names that are not UTF-8 (a folder 'caf\xe9', a Latin-1 CSV label) are refused by pack,
# naming the folder or row with the bytes escaped, and nothing is written; a packed file that
# holds such a name (made before pack refused them) is refused when training opens it, naming the
# file and the class, not after an epoch's work (json type_error.316 writing the metrics).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
D=$WORK/in
mkdir -p "$WORK/out"
"$PY" - "$D" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
root = os.fsencode(sys.argv[1])
rng = np.random.default_rng(4)
for cls in [b"caf\xe9", b"the"]:
    os.makedirs(os.path.join(root, b"folder", cls))
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            os.path.join(root, b"folder", cls, b"%d.png" % i), format="PNG")
with open(os.path.join(root, b"list.csv"), "wb") as f:
    f.write(b"path,label\nfolder/the/0.png,tea\nfolder/the/1.png,caf\xe9\n")
PYEOF
nothing_left() { [ -z "$(ls -A "$WORK/out")" ] || fail "$1: files left behind: $(ls -A "$WORK/out")"; }
if "$BIN" pack --format imagefolder --input "$D/folder" --output "$WORK/out/x.h5" > "$WORK/log" 2>&1; then
  fail "a class folder named caf\\xe9 was packed"
fi
grep -qF "folder': class folder 'caf\\xe9' has a name that is not valid UTF-8" "$WORK/log" \
  || { cat "$WORK/log"; fail "the folder is not named"; }
nothing_left "folder"
if "$BIN" pack --format csv --input "$D/list.csv" --output "$WORK/out/x.h5" > "$WORK/log" 2>&1; then
  fail "a CSV label caf\\xe9 was packed"
fi
grep -qF "list.csv' line 3: label 'caf\\xe9' is not valid UTF-8" "$WORK/log" \
  || { cat "$WORK/log"; fail "the CSV row is not named"; }
nothing_left "csv"
echo "  pack refuses the folder and the CSV row, naming them"

# A file packed before: valid names, then the first renamed to Latin-1 bytes as an older pack
# would have stored it.
mv "$D/folder/caf"$'\xe9' "$D/folder/cafe"
"$BIN" pack --format imagefolder --input "$D/folder" --output "$WORK/old.h5" > /dev/null
"$PY" - "$WORK/old.h5" << 'PYEOF'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f["classes"]
    f.create_dataset("classes", data=[b"caf\xe9", b"the"], dtype=h5py.string_dtype("utf-8"))
PYEOF
if timeout 120 "$BIN" --data.dataset packed --data.train_file "$WORK/old.h5" --data.test_file "$WORK/old.h5" \
  --model.preset lenet --train.epochs 1 --train.batch_size 3 --runtime.threads 2 --run-dir "$WORK/run" \
  > "$WORK/log" 2>&1; then
  fail "training on a file with a non-UTF-8 class name succeeded"
fi
grep -qF "old.h5': class 0 is named 'caf\\xe9', which is not valid UTF-8" "$WORK/log" \
  || { cat "$WORK/log"; fail "the error does not name the file and the class"; }
! grep -q '"epoch"' "$WORK/run/metrics.jsonl" 2> /dev/null || fail "an epoch ran before the refusal"
pass "non-UTF-8 class names refused by pack (folder, CSV row) and when a packed file is opened"
