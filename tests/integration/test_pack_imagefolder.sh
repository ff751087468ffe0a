#!/usr/bin/env bash
# `ddp_train pack --format imagefolder` against the outside references on a folder of ordering
# traps (make_folder.py): class indices and sample order equal torchvision's ImageFolder, decoded
# JPEG/PNG pixels equal PIL's bit for bit (libjpeg-turbo with PIL's defaults: accurate integer
# IDCT, fancy upsampling), `--size` equals PIL's Image.resize(BILINEAR) bit for bit, an encoded
# pack holds each file's bytes, and training from the encoded pack equals training from the raw
# one (the reader decodes to the same pixels).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
source "$(dirname "$0")/pack/same_training.sh"
find_python PIL h5py numpy torchvision
T=$SRC/tests/integration/pack
# The python scripts run in one process each time (run_scripts.py): an `import torchvision` costs
# more CPU time than the checks, so the three checks against torchvision/PIL come after the packs.
"$PY" "$SRC/tests/integration/run_scripts.py" "$WORK/make.log" "$T/make_folder.py" "$WORK/folder" \
  -- "$WORK/make_mixed.log" "$T/make_folder.py" "$WORK/mixed" mixed
for m in make make_mixed; do
  [ "$(cat "$WORK/$m.log.rc")" = 0 ] || { cat "$WORK/$m.log"; fail "make_folder.py failed"; }
done
pack() {  # pack NAME ARGS...
  local name=$1; shift
  "$BIN" pack --threads 2 --output "$WORK/$name.h5" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "pack $name failed"; }
}
pack raw --format imagefolder --input "$WORK/folder"
pack encoded --format imagefolder --input "$WORK/folder" --encoding encoded
pack resized --format imagefolder --input "$WORK/mixed" --size 24x28

same_training_raw_encoded 8

"$PY" "$SRC/tests/integration/run_scripts.py" \
  "$WORK/check_raw.log" "$T/check_folder.py" "$WORK/folder" "$WORK/raw.h5" raw \
  -- "$WORK/check_encoded.log" "$T/check_folder.py" "$WORK/folder" "$WORK/encoded.h5" encoded \
  -- "$WORK/check_resized.log" "$T/check_folder.py" "$WORK/mixed" "$WORK/resized.h5" raw 24x28
checked() {  # checked NAME MESSAGE: check_folder.py's verdict on NAME.h5, its output shown
  cat "$WORK/check_$1.log"
  [ "$(cat "$WORK/check_$1.log.rc")" = 0 ] || fail "$2"
}
checked raw "raw pack differs from torchvision/PIL"
checked encoded "encoded pack differs from torchvision's order or the files' bytes"
checked resized "--size differs from PIL's bilinear resize"
pass "imagefolder: torchvision's order and classes, PIL's pixels (decode and resize), encoded == raw"
