#!/usr/bin/env bash
# Symbolic links in an image folder: followed as ImageFolder follows them (os.walk followlinks),
# but a link back to a directory being walked (a loop) is named and not followed, so the pack
# ends and holds each image once (before: two loops hung the walk, exponentially; one packed every
# image 41 times). A long walk (a deep lattice of links, no loop) still stops on SIGTERM or one
# SIGINT with a clear message, a non-zero exit and nothing written.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL numpy
R=$WORK/tree/img
"$PY" - "$R" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(3)
for cls in ["cat", "dog"]:
    os.makedirs(os.path.join(sys.argv[1], cls, "sub"))
    for name in ["1.png", "sub/2.png"]:
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
            os.path.join(sys.argv[1], cls, name))
PYEOF
ln -s . "$R/cat/a"           # two loops to the class folder itself
ln -s .. "$R/cat/sub/b"      # ... one from below
ln -s ../.. "$R/dog/up"      # out of the image folder and back into it
mkdir -p "$WORK/out"
rc=0
timeout -k 5 60 "$BIN" pack --format imagefolder --input "$R" --output "$WORK/out/x.h5" > "$WORK/log" 2>&1 || rc=$?
[ $rc = 0 ] || { cat "$WORK/log"; fail "pack of a folder with symbolic-link loops failed or hung (rc $rc)"; }
grep -q "packed 4 samples in 2 classes" "$WORK/log" || { cat "$WORK/log"; fail "not each image once"; }
for loop in "cat/a' leads back to '$R/cat'" "cat/sub/b' leads back to '$R/cat'" \
  "dog/up/img' leads back to '$R'"; do
  grep -qF "note: '$R/$loop (a symbolic-link loop): not followed" "$WORK/log" \
    || { cat "$WORK/log"; fail "the loop $loop is not named"; }
done
echo "  loops named, each image packed once"

# A lattice of links 26 levels deep (2^26 paths, no loop): the walk takes minutes; a signal stops it.
L=$WORK/lattice
mkdir -p "$L/d26"
for ((i = 25; i >= 0; i--)); do
  mkdir -p "$L/d$i"; ln -s "../d$((i + 1))" "$L/d$i/x"; ln -s "../d$((i + 1))" "$L/d$i/y"
done
ln -s "$L/d0" "$R/cat/deep"
for sig in TERM INT; do
  "$BIN" pack --format imagefolder --input "$R" --output "$WORK/out/y.h5" > "$WORK/log_$sig" 2>&1 &
  pid=$!
  # Signalled once the walk is well under way: after 1 s of CPU time (start-up takes 0.1-0.2 s;
  # the depth-first walk is deep in the lattice within milliseconds of starting it).
  for ((i = 0; i < 600; i++)); do
    ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2> /dev/null || echo 0)
    [ "${ticks:-0}" -lt 100 ] || break
    sleep 0.1
  done
  kill -s "$sig" $pid
  for ((i = 0; i < 100; i++)); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done
  if kill -0 $pid 2> /dev/null; then kill -9 $pid; fail "SIG$sig did not stop the walk within 10 s"; fi
  rc=0; wait $pid || rc=$?
  [ $rc != 0 ] || fail "a pack stopped by SIG$sig exited 0"
  grep -q "pack interrupted by a signal while listing '$R/cat/deep/[xy]/[xy]/.*no file was written" "$WORK/log_$sig" \
    || { cat "$WORK/log_$sig"; fail "SIG$sig: no clear message"; }
  [ ! -e "$WORK/out/y.h5" ] || fail "SIG$sig: an output file was written"
  echo "  SIG$sig during the walk: stopped, rc $rc"
done
pass "symbolic-link loops named and not followed; signals stop a long walk"
