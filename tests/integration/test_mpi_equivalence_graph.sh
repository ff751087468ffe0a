#!/usr/bin/env bash
# Data parallelism stays exact for layer graphs: a residual net without batch norm (skip
# connections through add, a concat, global average pooling) trained on 3 ranks x batch 64 equals
# 1 rank x 192 (losses to 5 significant digits, weights within 1e-5 relative), as LeNet does in
# test_mpi_equivalence.sh; see there why the run is short.
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
cat > "$WORK/residual.toml" <<'TOML'
[[model.layers]]
type = "conv2d"
name = "stem"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "relu"
name = "stem_relu"
[[model.layers]]
type = "conv2d"
name = "b1_conv1"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "relu"
[[model.layers]]
type = "conv2d"
name = "b1_conv2"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "add"
name = "b1_add"
inputs = ["b1_conv2", "stem_relu"]
[[model.layers]]
type = "relu"
name = "b1_out"
[[model.layers]]
type = "conv2d"
name = "down"
out_channels = 16
kernel = 3
stride = 2
padding = 1
[[model.layers]]
type = "conv2d"
name = "shortcut"
input = "b1_out"
out_channels = 8
kernel = 1
stride = 2
[[model.layers]]
type = "concat"
inputs = ["down", "shortcut"]
[[model.layers]]
type = "relu"
[[model.layers]]
type = "global_avgpool"
[[model.layers]]
type = "linear"
out_features = 10
TOML
common=(--config "$SRC/configs/cifar.toml" --data.root "$CIFAR" --data.train_limit 1920
        --data.test_limit 500 --train.epochs 2 --runtime.threads 1 --schedule.warmup_epochs 0
        --optim.lr 0.05)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "$name failed"; }
}
# cifar.toml's settings with the residual model in place of its LeNet layers (they end the file).
awk '/^\[\[model.layers\]\]/ { exit } { print }' "$SRC/configs/cifar.toml" > "$WORK/cifar_residual.toml"
cat "$WORK/residual.toml" >> "$WORK/cifar_residual.toml"
grep -q '^type = "add"' "$WORK/cifar_residual.toml" || fail "could not build the residual config"
common[1]="$WORK/cifar_residual.toml"
run np1_b192 1 --train.batch_size 192
run np3_b64 3 --train.batch_size 64
diff <(losses_5sig "$WORK/np1_b192/metrics.jsonl") <(losses_5sig "$WORK/np3_b64/metrics.jsonl") \
  || fail "1 rank x 192 and 3 ranks x 64 differ in training loss"
d=$(max_rel_diff "$WORK/np1_b192/snapshot_e0002.h5" "$WORK/np3_b64/snapshot_e0002.h5")
ge 1e-5 "$d" || fail "final weights differ by $d (relative) > 1e-5"
grep -q "b1_add" "$WORK/np1_b192/config.toml" || fail "the resolved config lost the graph"
echo "  losses $(losses_5sig "$WORK/np1_b192/metrics.jsonl" | tr '\n' ' ')max rel weight diff $d"
pass "residual graph: 3 ranks x 64 == 1 rank x 192"
