#!/usr/bin/env bash
# pack onto a full disk (a small tmpfs): a clear error naming the file and "No space left on
# device", exit 1, nothing left in the directory, and no crash (before: SIGSEGV in HDF5's
# exit-time cleanup, H5F__close_cb, rc 139). Swept over disk sizes so the disk fills at each stage
# (a chunk, the labels, the checksums, the close), raw and encoded, and with a validation split;
# where the pack fits, the file is complete.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
[ "$(id -u)" = 0 ] || skip "mounting a small tmpfs needs root"
D="$WORK/disk"; mkdir -p "$D"
mount -t tmpfs -o size=64k ddp_pack_full "$D" 2> /dev/null || skip "cannot mount a tmpfs here"
trap 'umount "$D" 2> /dev/null; [ "${DDP_KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"' EXIT
"$PY" - "$WORK/img" << 'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(1)
for c in "ab":
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(20):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
            os.path.join(sys.argv[1], c, "%d.png" % i))
PYEOF
failed=0 fitted=0
for kb in 64 180 188 192 196 256; do
  for how in raw encoded split; do
    mount -o remount,size=${kb}k "$D"
    args=(--encoding raw)
    [ $how = encoded ] && args=(--encoding encoded)
    [ $how = split ] && args=(--val-fraction 0.25 --val-output "$D/val.h5")
    rc=0
    "$BIN" pack --format imagefolder --input "$WORK/img" --output "$D/x.h5" "${args[@]}" > "$WORK/log" 2>&1 || rc=$?
    ! grep -qE "Segmentation|infinite loop|HDF5-DIAG" "$WORK/log" || { cat "$WORK/log"; fail "$kb KiB $how: HDF5 crashed or complained"; }
    if [ $rc = 1 ]; then
      grep -qE "cannot write '$D/(x|val)\.h5': .*No space left on device" "$WORK/log" \
        || { cat "$WORK/log"; fail "$kb KiB $how: the error does not name the file and the full disk"; }
      [ -z "$(ls -A "$D")" ] || fail "$kb KiB $how: left behind: $(ls -A "$D")"
      failed=$((failed + 1))
    elif [ $rc = 0 ]; then
      "$PY" -c "
import h5py, sys
n = sum(h5py.File(p, 'r')['labels'].shape[0] for p in sys.argv[1:])
assert n == 40, n" "$D"/*.h5 || fail "$kb KiB $how: the packed file is incomplete"
      rm -f "$D"/*.h5
      fitted=$((fitted + 1))
    else
      cat "$WORK/log"; fail "$kb KiB $how: exit code $rc"
    fi
  done
done
[ $failed -gt 0 ] && [ $fitted -gt 0 ] || fail "the sweep did not both fill the disk and fit ($failed failed, $fitted fitted)"
pass "full disk: $failed packs failed cleanly (exit 1, file named, nothing left), $fitted fitted and are complete"
