# Sourced by the test_pack_*.sh scripts after lib.sh and find_python: training one epoch from
# $WORK/raw.h5 and from $WORK/encoded.h5 gives bitwise the same weights (the loader decodes the
# encoded files to the raw pack's pixels).
same_training_raw_encoded() {  # same_training_raw_encoded BATCH_SIZE
  local enc common=(--model.preset lenet --train.epochs 1 --train.batch_size "$1" --runtime.threads 2
                    --data.dataset packed --train.seed 3)
  for enc in raw encoded; do
    "$BIN" "${common[@]}" --data.train_file "$WORK/$enc.h5" --data.test_file "$WORK/$enc.h5" \
      --run-dir "$WORK/run_$enc" > "$WORK/run_$enc.log" 2>&1 || { cat "$WORK/run_$enc.log"; fail "training from $enc failed"; }
  done
  "$PY" "$SRC/tests/integration/pack/same_weights.py" "$WORK/run_raw/snapshot_e0001.h5" \
    "$WORK/run_encoded/snapshot_e0001.h5" || fail "training from the encoded pack differs from training from the raw pack"
}
