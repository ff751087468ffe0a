#!/usr/bin/env bash
# `pack --format imagefolder` takes every format torchvision's ImageFolder takes (.jpg .jpeg .png
# .ppm .bmp .pgm .tif .tiff .webp), decodes each to PIL's pixels (convert("RGB")) bit for bit,
# converts grey images in an RGB set as ImageFolder does and says how many, and counts the files it
# leaves out (by extension) instead of skipping them silently. Training from the encoded pack
# equals training from the raw one (the loader decodes every format alike).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
source "$(dirname "$0")/pack/same_training.sh"
find_python PIL h5py numpy torchvision
T=$SRC/tests/integration/pack
"$PY" "$T/make_formats.py" "$WORK/folder"
# The three checks against torchvision/PIL run in one process after the packs (run_scripts.py): an
# `import torchvision` costs more CPU time than the checks.
pack() {  # pack NAME ARGS...
  local name=$1; shift
  "$BIN" pack --threads 2 --format imagefolder --input "$WORK/folder" --output "$WORK/$name.h5" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "pack $name failed"; }
}
"$BIN" pack --threads 2 --format imagefolder --input "$WORK/folder" --output "$WORK/raw.h5" > "$WORK/raw.log" 2>&1 || {
  grep -q "built without Leptonica" "$WORK/raw.log" && skip "this ddp_train was built without Leptonica (libleptonica-dev)"
  cat "$WORK/raw.log"; fail "pack raw failed"
}
grep -q "packed 28 samples in 2 classes (3x32x32, raw).*converted 10 grey image(s) to RGB" "$WORK/raw.log" \
  || { cat "$WORK/raw.log"; fail "the summary does not count the 28 images and the 10 grey ones converted"; }
grep -q "note: left out 4 file(s) whose names are not those of images (2 .gif, 2 .txt;" "$WORK/raw.log" \
  || { cat "$WORK/raw.log"; fail "the summary does not count the files left out by type"; }
# --channels 3 (the first image could be grey): the same pixels.
pack rgb --channels 3
pack encoded --encoding encoded

same_training_raw_encoded 7

"$PY" "$SRC/tests/integration/run_scripts.py" \
  "$WORK/check_raw.log" "$T/check_folder.py" "$WORK/folder" "$WORK/raw.h5" raw \
  -- "$WORK/check_rgb.log" "$T/check_folder.py" "$WORK/folder" "$WORK/rgb.h5" raw \
  -- "$WORK/check_encoded.log" "$T/check_folder.py" "$WORK/folder" "$WORK/encoded.h5" encoded
checked() {  # checked NAME MESSAGE: check_folder.py's verdict on NAME.h5, its output shown
  cat "$WORK/check_$1.log"
  [ "$(cat "$WORK/check_$1.log.rc")" = 0 ] || { cat "$WORK/$1.log"; fail "$2"; }
}
checked raw "raw pack differs from torchvision/PIL"
checked rgb "--channels 3 pack differs from torchvision/PIL"
checked encoded "encoded pack differs"
pass "every ImageFolder format packed as PIL decodes it; grey converted and counted; files left out counted"
