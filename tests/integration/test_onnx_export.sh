#!/usr/bin/env bash
# `ddp_train export --format onnx`: onnxruntime (npm onnxruntime-node, CPU library as shipped) runs
# the exported file and its logits equal ddp_train's (`eval --dump-logits`) within 1e-4 (relative
# for logits above 1), for LeNet, the VGG net with batch norm, every preset, and a graph with every
# layer type (onnx/all_layers.toml, which must hold every type `ddp_train layers` lists:
# grouped/dilated convolutions, every activation, padded max and average pooling, add, concat,
# batch norm over features, dropout). Each model trains a few steps
# first (at a small learning rate, so that the logits stay of order 1), so that its weights and
# batch-norm statistics are not the initial ones; the large presets train on fewer samples (they
# run on 2 CPU cores in CI). 256 test images for every model, the first 256 (limit_subset first,
# as the inputs given to onnxruntime are the file's first images). The data: small generated CIFAR-10-format
# files (lib_data.sh), so that no launch reads the 180 MB of the real set; the arithmetic compared
# is the same on any pixels. The npm package is installed once into the build directory and reused.
# Each model's training evaluates one batch of test images (its evaluation is not compared); eval
# dumps the 256. onnxruntime runs all the exports in one node process and one python process
# compares them all, after the last model is trained (each start-up costs a second or more).
# ddp_train computes on one thread, as onnxruntime does: at 16 images a step, a second thread
# costs more CPU-seconds in synchronisation than it saves (92 against 66 for the test).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
DDP_TEST_CIFAR=/nonexistent DDP_TEST_FASHION=/nonexistent pick_comparison_data 64 256
# onnx/all_layers.toml holds every layer type ddp_train registers: a new type joins it, and so its
# export is checked below.
registered=$("$BIN" layers | sed -nE 's/^  ([a-z0-9_]+): .*/\1/p' | sort -u)
in_graph=$(sed -nE 's/^type = "([a-z0-9_]+)"/\1/p' "$SRC/tests/integration/onnx/all_layers.toml" | sort -u)
[ -n "$registered" ] || fail "ddp_train layers lists no layer type"
[ "$registered" = "$in_graph" ] || fail "onnx/all_layers.toml must hold every registered layer type; \
only registered: $(comm -23 <(echo "$registered") <(echo "$in_graph") | tr '\n' ' ')\
only in the graph: $(comm -13 <(echo "$registered") <(echo "$in_graph") | tr '\n' ' ')"
command -v node > /dev/null || skip "node is absent: onnxruntime-node is the ONNX oracle"
source "$(dirname "$0")/pack/find_python.sh"
find_python csv
ORT="$(dirname "$BIN")/onnxruntime-node"
if [ ! -d "$ORT/node_modules/onnxruntime-node" ]; then
  command -v npm > /dev/null || skip "npm is absent: cannot install onnxruntime-node"
  mkdir -p "$WORK/ort"
  (cd "$WORK/ort" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node) \
    > "$WORK/npm.log" 2>&1 || { cat "$WORK/npm.log"; skip "npm install onnxruntime-node failed (offline?)"; }
  # Moved into place whole, so that a concurrent run never sees half an install.
  mv -T "$WORK/ort" "$ORT" 2> /dev/null || true
fi
echo "onnxruntime-node $(node -p "require('$ORT/node_modules/onnxruntime-node/package.json').version")"

# The first N test images normalised as every run below normalises them: (p/255 - 0.5) / 0.25.
norm=(--data.normalize config --data.mean 0.5 --data.std 0.25)
"$PY" - "$WORK/inputs.f32" "${DATA[@]}" << 'PY'
import gzip, os, struct, sys
out, args = sys.argv[1], sys.argv[2:]
opt = dict(zip(args[0::2], args[1::2]))
root, n = opt["--data.root"], 256
if opt["--data.dataset"] == "cifar10":
    raw = open(os.path.join(root, "test_batch.bin"), "rb").read()
    pixels = b"".join(raw[i * 3073 + 1:(i + 1) * 3073] for i in range(n))
else:
    p = os.path.join(root, "t10k-images-idx3-ubyte")
    raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
    pixels = raw[16:16 + n * 784]
open(out, "wb").write(struct.pack("<%df" % len(pixels), *[(p / 255.0 - 0.5) / 0.25 for p in pixels]))
PY
case "${DATA[1]}" in cifar10) shape=(3 32 32) ;; *) shape=(1 28 28) ;; esac
per=$((shape[0] * shape[1] * shape[2]))

# check NAME IMAGES TRAIN_SAMPLES CONFIG_ARGS...: trains, exports and evaluates (ddp_train's logits of
# the first IMAGES test images); the model joins the lists that onnxruntime and the comparison
# below go through.
ort_args=()
names=()
check() {
  local name=$1 n=$2 train=$3
  shift 3
  local t0=$SECONDS
  # The training's own end-of-epoch evaluation is not compared (eval's below is): one batch of
  # test images (--data.test_limit 16) instead of the N that eval dumps; the weights and the
  # batch-norm statistics come from the training set alone, so they are the same either way.
  "$BIN" "$@" "${DATA[@]}" "${norm[@]}" --data.train_limit "$train" --data.test_limit 16 \
    --data.limit_subset first \
    --runtime.threads 1 --runtime.device cpu --train.epochs 1 --train.batch_size 16 \
    --optim.lr 0.01 --schedule.name constant --schedule.warmup_epochs 0 \
    --run-dir "$WORK/$name" > "$WORK/$name.train.log" 2>&1 ||
    { cat "$WORK/$name.train.log"; fail "$name: training failed"; }
  local snap="$WORK/$name/snapshot_e0001.h5"
  "$BIN" export --snapshot "$snap" --format onnx --output "$WORK/$name.onnx" \
    > "$WORK/$name.export.log" 2>&1 || { cat "$WORK/$name.export.log"; fail "$name: export failed"; }
  "$BIN" eval --snapshot "$snap" --runtime.threads 1 --output-dir "$WORK/$name" \
    --data.test_limit "$n" --data.limit_subset first \
    --dump-logits "$WORK/$name.logits.csv" > "$WORK/$name.eval.log" 2>&1 ||
    { cat "$WORK/$name.eval.log"; fail "$name: eval failed"; }
  grep -q "($n samples)" "$WORK/$name.eval.log" || { cat "$WORK/$name.eval.log"; fail "$name: eval did not evaluate $n images"; }
  head -c $((n * per * 4)) "$WORK/inputs.f32" > "$WORK/$name.f32"
  ort_args+=("$WORK/$name.onnx" "$WORK/$name.f32" "$n" "${shape[@]}" "$WORK/$name.ort.json")
  names+=("$name")
  echo "  $name: trained, exported, evaluated ($((SECONDS - t0)) s)"
}

check lenet 256 64 --config "$SRC/configs/cifar.toml"
check vgg_small_bn 256 64 --config "$SRC/configs/cifar_vgg_bn.toml"
check all_layers 256 64 --config "$SRC/tests/integration/onnx/all_layers.toml"
check resnet20 256 32 --config "$SRC/configs/cifar_resnet20.toml"
check resnet56 256 32 --config "$SRC/configs/cifar_resnet20.toml" --model.preset resnet56
# The torchvision presets with their ImageNet stem (a strided 7x7 convolution and a padded max pool).
for p in resnet18 resnet34 resnet50 mobilenet_v2; do
  check "$p" 256 16 --config "$SRC/configs/cifar_resnet20.toml" --model.preset "$p" --model.stem imagenet
done

# onnxruntime runs every export in one node process (a session per model), and one python process
# compares each model's logits with ddp_train's: every model is compared, each line printed, and
# the test fails naming every model whose logits differ.
node "$SRC/tests/integration/onnx/run_onnx.js" "$ORT" "${ort_args[@]}" || fail "onnxruntime could not run an export"
"$PY" - "$WORK" "${names[@]}" << 'PY' || fail "logits differ"
import csv, json, os, sys
work, differ = sys.argv[1], []
for name in sys.argv[2:]:
    ours = list(csv.DictReader(open(os.path.join(work, name + ".logits.csv"))))
    theirs = json.load(open(os.path.join(work, name + ".ort.json")))
    assert len(ours) == len(theirs), (name, len(ours), len(theirs))
    worst = 0.0
    for row, ort in zip(ours, theirs):
        mine = [float(row["logit_%d" % c]) for c in range(len(ort))]
        assert "logit_%d" % len(ort) not in row, name + ": class count differs"
        for a, b in zip(mine, ort):
            worst = max(worst, abs(a - b) / max(1.0, abs(a)))
    print("%-13s %4d images: largest logit difference %.2e" % (name, len(ours), worst))
    if not worst <= 1e-4:
        differ.append(name)
sys.exit("logits differ by more than 1e-4: " + ", ".join(differ) if differ else 0)
PY
pass "onnxruntime's logits equal ddp_train's for LeNet, VGG-BN, every preset and every layer type"
