# pack_npy_splits DIR: packs DIR/train_x.npy + DIR/train_y.npy and the test pair (as the tests'
# generators write them) into DIR/train.h5 and DIR/test.h5; a failed pack prints its log and fails.
# Sourced after lib.sh (BIN, fail).
pack_npy_splits() {
  local dir=$1 split
  for split in train test; do
    "$BIN" pack --format npy --input "$dir/${split}_x.npy,$dir/${split}_y.npy" \
      --output "$dir/$split.h5" > "$dir/pack_$split.log" 2>&1 ||
      { cat "$dir/pack_$split.log"; fail "pack $split failed"; }
  done
}
