#!/usr/bin/env bash
# The README's "images of any size" recipe, end to end, and everything a user then does with the
# model (issue 33, items 1, 9, 11, 19): a folder of JPEGs of varying sizes (40..260 px a side) is
# packed as it is (--encoding encoded), trained with data.train_size, and then
#  - eval scores the test pack; the start-up lines print the train and eval transforms;
#  - predict on the very same JPEG files gives eval's classes, and probabilities = softmax(eval's
#    logits): it applies the evaluation transform (Resize + CenterCrop), as eval does;
#  - export writes an ONNX file whose logits under onnxruntime equal ours within 1e-4 (on PNGs of
#    the eval-resize side, whose centre crop Python takes exactly), with the class names, input
#    shape, transform and normalisation as metadata properties;
#  - report renders its page with the image grid (headless Chromium's DOM holds the images);
#  - a uniform-size test pack next to the varying-size training pack is accepted with
#    data.train_size (the size is then irrelevant), and a mismatch says "varying sizes", not 3x0x0.
# The previous version refused predict, export and report ("pack it with --size HxW"), rendered
# "No test images", and refused the uniform test pack.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL numpy
T=$SRC/tests/integration/pack
S=40                       # data.train_size
R=$(((S * 8 + 6) / 7))     # the default data.eval_resize: 46
"$PY" "$T/make_sizes.py" "$WORK/train" 12 1
"$PY" "$T/make_sizes.py" "$WORK/test" 4 2
for split in train test; do
  "$BIN" pack --threads 2 --format imagefolder --input "$WORK/$split" --encoding encoded \
    --output "$WORK/$split.h5" > "$WORK/pack_$split.log" 2>&1 \
    || { cat "$WORK/pack_$split.log"; fail "pack $split failed"; }
done
run="$WORK/run"
"$BIN" --model.preset lenet --data.dataset packed --data.train_file "$WORK/train.h5" \
  --data.test_file "$WORK/test.h5" --data.train_size $S --data.augment true \
  --data.rrc_scale 0.25,1 --data.mean 0.5 --data.std 0.25 --train.epochs 2 --train.batch_size 8 \
  --runtime.threads 2 --run-dir "$run" > "$WORK/train.log" 2>&1 \
  || { cat "$WORK/train.log"; fail "training with data.train_size failed"; }
snap="$run/snapshot_e0002.h5"
[ -f "$snap" ] || fail "no snapshot"
# The transforms are printed at start, with the key given (rrc_scale) and the note on crop_padding.
grep -q "^transforms: train RandomResizedCrop($S, scale=(0.25, 1), ratio=(0.75, 1.3333334)), RandomHorizontalFlip(), Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)); eval Resize($R), CenterCrop($S), Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))" \
  "$WORK/train.log" || { grep -i "transform" "$WORK/train.log"; fail "the start-up does not print the transforms"; }
grep -q "^note: data.crop_padding (4) is not used: with data.train_size" "$WORK/train.log" \
  || fail "no note that crop_padding is not used with data.train_size"

# eval on the test pack, with its logits.
"$BIN" eval --snapshot "$snap" --runtime.threads 2 --dump-logits "$WORK/logits.csv" \
  > "$WORK/eval.log" 2>&1 || { cat "$WORK/eval.log"; fail "eval failed"; }
grep -q "^test accuracy: .* (12 samples)" "$WORK/eval.log" || { cat "$WORK/eval.log"; fail "eval did not score 12 samples"; }

# predict on the same JPEG files (the pack's order: class folders sorted, files sorted).
"$BIN" predict --snapshot "$snap" "$WORK/test/ant" "$WORK/test/bee" "$WORK/test/cow" --top-k 3 \
  --output "$WORK/pred.csv" > "$WORK/predict.log" 2>&1 \
  || { cat "$WORK/predict.log"; fail "predict failed on the model of the recipe"; }
"$PY" - "$WORK/logits.csv" "$WORK/pred.csv" << 'PY' || fail "predict disagrees with eval on the same images"
import csv, math, sys
ev = list(csv.DictReader(open(sys.argv[1])))
pred = list(csv.DictReader(open(sys.argv[2])))
files = []
for r in pred:
    if r["file"] not in files: files.append(r["file"])
assert len(files) == len(ev) == 12, (len(files), len(ev))
for i, f in enumerate(files):
    rows = [r for r in pred if r["file"] == f]
    assert int(rows[0]["class_index"]) == int(ev[i]["predicted"]), (f, rows[0], ev[i])
    z = [float(ev[i]["logit_%d" % c]) for c in range(3)]
    m = max(z); s = sum(math.exp(v - m) for v in z)
    for r in rows:
        want = math.exp(z[int(r["class_index"])] - m) / s
        assert abs(float(r["probability"]) - want) < 1e-5, (f, r, want)
print("predict == eval on the 12 JPEG files of the test pack")
PY

# A uniform-size test pack beside the varying-size training pack: PNGs of the eval-resize side.
"$PY" - "$WORK/square" $R << 'PY'
import os, sys
import numpy as np
from PIL import Image
out, side = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
for c, name in enumerate(["ant", "bee", "cow"]):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for i in range(3):
        a = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)
        a[..., c] = 200
        Image.fromarray(a).save(os.path.join(out, name, "%d.png" % i))
PY
"$BIN" pack --format imagefolder --input "$WORK/square" --size ${R}x${R} --output "$WORK/square.h5" \
  > "$WORK/pack_square.log" 2>&1 || { cat "$WORK/pack_square.log"; fail "pack of the square PNGs failed"; }
"$BIN" eval --snapshot "$snap" --runtime.threads 2 --data.test_file "$WORK/square.h5" \
  --output-dir "$WORK/sq" --dump-logits "$WORK/sq_logits.csv" > "$WORK/sq_eval.log" 2>&1 \
  || { cat "$WORK/sq_eval.log"; fail "a uniform-size test pack with data.train_size was refused"; }
# Without data.train_size, the mismatch names the sizes in words.
if "$BIN" --model.preset lenet --data.dataset packed --data.train_file "$WORK/square.h5" \
  --data.test_file "$WORK/test.h5" --run-dir "$WORK/mixed" > "$WORK/mixed.log" 2>&1; then
  fail "a uniform training pack with a varying-size test pack trained without data.train_size"
fi
grep -q "holds images 3 channel(s) of varying sizes in 3 classes, data.train_file = '$WORK/square.h5' holds 3x${R}x${R} in 3 classes" \
  "$WORK/mixed.log" || { cat "$WORK/mixed.log"; fail "the mismatch does not read 'varying sizes'"; }
! grep -q "3x0x0" "$WORK/mixed.log" || fail "the message still says 3x0x0"

# export, and onnxruntime on the same square PNGs, centre-cropped and normalised in Python.
"$BIN" export --snapshot "$snap" --output "$WORK/model.onnx" > "$WORK/export.log" 2>&1 \
  || { cat "$WORK/export.log"; fail "export failed on the model of the recipe"; }
grep -q "input 'input' \[N, 3, $S, $S\]" "$WORK/export.log" || { cat "$WORK/export.log"; fail "the export's input is not 3x${S}x${S}"; }
"$PY" - "$WORK/model.onnx" $S $R << 'PY' || fail "the ONNX metadata is missing or wrong"
import json, sys
data = open(sys.argv[1], "rb").read()
S, R = int(sys.argv[2]), int(sys.argv[3])
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
        if c < 0x80: return v, i
def fields(b):  # (field number, wire type, value) of one protobuf message
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0: v, i = varint(b, i)
        elif t == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        elif t == 1: v = b[i:i + 8]; i += 8
        elif t == 5: v = b[i:i + 4]; i += 4
        else: raise ValueError(t)
        yield f, t, v
meta = {}
for f, t, v in fields(data):
    if f == 14:  # ModelProto.metadata_props: StringStringEntryProto {key = 1, value = 2}
        kv = {k: val.decode() for k, _, val in fields(v)}
        meta[kv[1]] = kv[2]
assert json.loads(meta["class_names"]) == ["ant", "bee", "cow"], meta
assert json.loads(meta["input_shape"]) == [3, S, S], meta
assert meta["transform"] == "Resize(%d), CenterCrop(%d)" % (R, S), meta
assert json.loads(meta["mean"]) == [0.5] * 3 and json.loads(meta["std"]) == [0.25] * 3, meta
assert "pixel / 255 - mean[c]" in meta["preprocessing"], meta
print("ONNX metadata:", ", ".join(sorted(meta)))
PY
"$PY" - "$WORK/square" $S $R "$WORK/inputs.f32" << 'PY'
import os, struct, sys
import numpy as np
from PIL import Image
root, S, R, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
top = int(round((R - S) / 2.0))  # torchvision's CenterCrop offset (Python's round)
xs = []
for name in ["ant", "bee", "cow"]:
    for f in sorted(os.listdir(os.path.join(root, name))):
        a = np.asarray(Image.open(os.path.join(root, name, f)).convert("RGB"), dtype=np.float32)
        a = a[top:top + S, top:top + S].transpose(2, 0, 1)
        xs.append((a / 255.0 - 0.5) / 0.25)
np.stack(xs).astype("<f4").tofile(out)
PY
if command -v node > /dev/null; then
  ORT="$(dirname "$BIN")/onnxruntime-node"
  if [ ! -d "$ORT/node_modules/onnxruntime-node" ] && command -v npm > /dev/null; then
    mkdir -p "$WORK/ort"
    (cd "$WORK/ort" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node) \
      > "$WORK/npm.log" 2>&1 && mv -T "$WORK/ort" "$ORT" 2> /dev/null || true
  fi
  if [ -d "$ORT/node_modules/onnxruntime-node" ]; then
    node "$SRC/tests/integration/onnx/run_onnx.js" "$ORT" "$WORK/model.onnx" "$WORK/inputs.f32" \
      9 3 $S $S "$WORK/ort.json" || fail "onnxruntime could not run the export"
    "$PY" - "$WORK/sq_logits.csv" "$WORK/ort.json" << 'PY' || fail "onnxruntime's logits differ from ours"
import csv, json, sys
ours, theirs = list(csv.DictReader(open(sys.argv[1]))), json.load(open(sys.argv[2]))
assert len(ours) == len(theirs) == 9, (len(ours), len(theirs))
worst = max(abs(float(r["logit_%d" % c]) - t[c]) / max(1.0, abs(t[c]))
            for r, t in zip(ours, theirs) for c in range(3))
print("onnxruntime vs eval on 9 square PNGs: largest logit difference %.2e" % worst)
sys.exit(0 if worst <= 1e-4 else 1)
PY
  else
    echo "onnxruntime-node not available (npm offline?): the ONNX run is not compared"
  fi
else
  echo "node not found: the ONNX run is not compared"
fi

# report, with its image grid.
"$BIN" report "$run" --images 12 > "$WORK/report.log" 2>&1 || { cat "$WORK/report.log"; fail "report failed"; }
grep -q "report: $run/report.html (2 epoch(s), a confusion matrix, 12 test image(s))" "$WORK/report.log" \
  || { cat "$WORK/report.log"; fail "report has no image grid"; }
! grep -q "warning" "$WORK/report.log" || { cat "$WORK/report.log"; fail "report warned"; }
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ]; then
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$WORK/chrome" --dump-dom "file://$run/report.html" > "$WORK/dom.html" 2> "$WORK/chrome.log" \
    || { tail -20 "$WORK/chrome.log"; fail "chromium could not render the page"; }
  n=$(grep -o '<img[^>]*src="data:image/png;base64,' "$WORK/dom.html" | wc -l)
  [ "$n" = 12 ] || fail "the rendered page shows $n images, not 12"
  ! grep -q "No test images" "$WORK/dom.html" || fail "the page says 'No test images'"
else
  echo "chromium not found: the page is not rendered"
fi
pass "varying-size JPEGs -> pack encoded -> train with data.train_size -> eval, predict (= eval), export (ONNX Runtime = ours, metadata), report with its grid"
