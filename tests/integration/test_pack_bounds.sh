#!/usr/bin/env bash
# Sizes bounded up front, naming what is too large: a CSV label of 999999999 or 20000000 (a billion
# or 20 million classes; a packed file holds at most 2^24), NumPy labels of 2e8, `--size
# 65535x65535` (2^28 pixels at most). Each is refused at once with a message naming the row, index
# or option, within a memory limit the old behaviour (16 GB for a billion class names, an 800 MB
# file our reader refuses) exceeds, and nothing is left under the output name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL numpy
D=$WORK/in
mkdir -p "$WORK/out"
"$PY" - "$D" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(2)
for name in ["a.png", "b.png"]:
    Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(os.path.join(d, name))
for label in [999999999, 20000000]:
    with open(os.path.join(d, "list_%d.csv" % label), "w") as f:
        f.write("a.png,0\nb.png,%d\n" % label)
np.save(os.path.join(d, "images.npy"), rng.integers(0, 256, (3, 8, 8), dtype=np.uint8))
np.save(os.path.join(d, "labels.npy"), np.array([0, 200000000, 1], dtype=np.int64))
PYEOF
refused() {  # refused WHAT PATTERN ARGS...: fails in bounded memory and time, names the culprit
  local what=$1 pattern=$2; shift 2
  local rc=0
  (ulimit -v 6000000; timeout -k 5 60 "$BIN" pack --output "$WORK/out/x.h5" "$@") > "$WORK/log" 2>&1 || rc=$?
  [ $rc != 0 ] || fail "$what: pack succeeded"
  grep -qE -- "$pattern" "$WORK/log" || { cat "$WORK/log"; fail "$what: rc $rc, message does not match '$pattern'"; }
  [ -z "$(ls -A "$WORK/out")" ] || fail "$what: files left behind: $(ls -A "$WORK/out")"
  echo "  $what: $(grep -m1 error "$WORK/log" | cut -c1-200)"
}
refused "CSV label 999999999" "list_999999999.csv' line 2: label 999999999 would make 1000000000 classes .*at most 16777216" \
  --format csv --input "$D/list_999999999.csv"
refused "CSV label 20000000" "list_20000000.csv' line 2: label 20000000 would make 20000001 classes" \
  --format csv --input "$D/list_20000000.csv"
refused "NumPy label 2e8" "labels.npy': label 200000000 at index 1 would make 200000001 classes" \
  --format npy --input "$D/images.npy,$D/labels.npy"
refused "--size 65535x65535" "pack --size 65535x65535: 4294836225 pixels per image, more than the 268435456" \
  --format csv --input "$D/list_20000000.csv" --size 65535x65535
pass "class counts and image sizes bounded up front, naming the row, index or option"
