#!/usr/bin/env bash
# Packing is exact: the first N samples of CIFAR-10 (or Fashion-MNIST when CIFAR-10 is absent)
# exported to PNG files plus a CSV list in the original order (python3-pil), packed with
# `ddp_train pack --format csv`, train to bitwise the same final weights as the original files
# with the same seed. data.train_limit with data.limit_subset = "first" takes the first N samples,
# so the original run uses it and the packed files hold exactly those N.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL h5py numpy
if [ -f "$CIFAR/test_batch.bin" ]; then
  kind=cifar10 root=$CIFAR model=lenet orig=(--data.dataset cifar10 --data.root "$CIFAR")
elif [ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ]; then
  kind=fashion root=$FASHION model=lenet_mnist orig=(--data.dataset fashion_mnist --data.root "$FASHION")
else
  skip "neither CIFAR-10 ($CIFAR) nor Fashion-MNIST ($FASHION) is present"
fi
"$PY" "$SRC/tests/integration/pack/export_subset.py" $kind "$root" train 512 "$WORK/png"
"$PY" "$SRC/tests/integration/pack/export_subset.py" $kind "$root" test 256 "$WORK/png"
for split in train test; do
  "$BIN" pack --format csv --input "$WORK/png/$split.csv" --output "$WORK/$split.h5" --threads 2 \
    > "$WORK/pack_$split.log" 2>&1 || { cat "$WORK/pack_$split.log"; fail "pack $split failed"; }
done
grep -q "packed 512 samples in 10 classes" "$WORK/pack_train.log" \
  || { cat "$WORK/pack_train.log"; fail "no summary line for 512 samples in 10 classes"; }
common=(--train.epochs 1 --train.batch_size 64 --runtime.threads 2 --data.augment true
        --train.seed 11 --model.preset $model)
"$BIN" "${common[@]}" "${orig[@]}" --data.train_limit 512 --data.test_limit 256 \
  --data.limit_subset first --run-dir "$WORK/orig" > "$WORK/orig.log" 2>&1 || { cat "$WORK/orig.log"; fail "original run failed"; }
"$BIN" "${common[@]}" --data.dataset packed --data.train_file "$WORK/train.h5" \
  --data.test_file "$WORK/test.h5" --run-dir "$WORK/packed" > "$WORK/packed.log" 2>&1 \
  || { cat "$WORK/packed.log"; fail "packed run failed"; }
"$PY" "$SRC/tests/integration/pack/same_weights.py" "$WORK/orig/snapshot_e0001.h5" \
  "$WORK/packed/snapshot_e0001.h5" || fail "training from the packed file gave other weights"
pass "$kind: 512 samples via PNG + CSV + pack train to bitwise the original weights"
