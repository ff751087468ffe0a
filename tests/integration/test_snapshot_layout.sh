#!/usr/bin/env bash
# A snapshot's HDF5 layout is the documented one (docs/snapshot_format.md), as h5ls/h5dump see it;
# inspect and eval read it back.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
command -v h5ls >/dev/null || skip "h5ls not installed (apt-get install hdf5-tools)"
"$BIN" --config "$FASHION_CONFIG" --data.train_limit 1000 --data.test_limit 300 \
  --train.epochs 2 --train.save_every 1 --optim.name sgd --optim.momentum 0.9 \
  --run-dir "$WORK/run" > "$WORK/log"
f="$WORK/run/snapshot_e0002.h5"
[ -f "$WORK/run/snapshot_e0001.h5" ] && [ -f "$f" ] || fail "snapshots per epoch missing: $(ls "$WORK/run")"
h5ls -r "$f" > "$WORK/ls"
cat "$WORK/ls"
for want in "/model/conv1/weight .*{6, 1, 5, 5}" "/model/conv1/bias .*{6}" "/model/fc3/weight .*{10, 84}" \
            "/optimizer/momentum/conv1/weight .*{6, 1, 5, 5}" "/meta/config_toml" "/meta/metrics_jsonl"; do
  grep -Eq "^$want" "$WORK/ls" || fail "h5ls -r lacks '$want'"
done
h5dump -a /meta/epoch "$f" | grep "(0): 2" > /dev/null || fail "/meta epoch attribute is not 2"
"$BIN" inspect "$f" > "$WORK/inspect"
grep -q "conv1.weight  *6x1x5x5" "$WORK/inspect" || fail "inspect does not list conv1.weight"
"$BIN" eval --snapshot "$f" --config "$FASHION_CONFIG" --data.test_limit 300 > "$WORK/eval"
acc=$(summary_field "$WORK/run/metrics.jsonl" final_test_acc)
grep -q "test accuracy: $(awk -v a="$acc" 'BEGIN { printf "%.2f", 100 * a }')%" "$WORK/eval" \
  || { cat "$WORK/eval"; fail "eval of the final snapshot disagrees with training's final accuracy $acc"; }
pass "snapshot layout, inspect and eval"
