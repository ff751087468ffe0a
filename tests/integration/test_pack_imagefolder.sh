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
"$PY" "$T/make_folder.py" "$WORK/folder"
pack() {  # pack NAME ARGS...
  local name=$1; shift
  "$BIN" pack --threads 2 --output "$WORK/$name.h5" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "pack $name failed"; }
}
pack raw --format imagefolder --input "$WORK/folder"
"$PY" "$T/check_folder.py" "$WORK/folder" "$WORK/raw.h5" raw || fail "raw pack differs from torchvision/PIL"
pack encoded --format imagefolder --input "$WORK/folder" --encoding encoded
"$PY" "$T/check_folder.py" "$WORK/folder" "$WORK/encoded.h5" encoded \
  || fail "encoded pack differs from torchvision's order or the files' bytes"

same_training_raw_encoded 8

"$PY" "$T/make_folder.py" "$WORK/mixed" mixed
pack resized --format imagefolder --input "$WORK/mixed" --size 24x28
"$PY" "$T/check_folder.py" "$WORK/mixed" "$WORK/resized.h5" raw 24x28 \
  || fail "--size differs from PIL's bilinear resize"
pass "imagefolder: torchvision's order and classes, PIL's pixels (decode and resize), encoded == raw"
