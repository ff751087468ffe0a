#!/usr/bin/env bash
# `ddp_train predict` on PNG files this test writes (with PIL) from the first 40 test images gives
# the classes `eval` gives for the same images, and probabilities equal to the softmax of eval's
# logits; a directory, single files, --top-k and --output all work. The model: a LeNet epoch on a
# CIFAR-10 subset (Fashion-MNIST or generated data where CIFAR-10 is absent, lib_data.sh),
# normalised with its training set's statistics (data.normalize = dataset), which predict
# recomputes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
pick_comparison_data 512 40
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL
# data.normalize = dataset: predict must recompute the statistics of the same 512 training images.
"$BIN" --config "$SRC/configs/cifar.toml" "${DATA[@]}" --data.normalize dataset --data.train_limit 512 \
  --data.test_limit 40 --data.limit_subset first --runtime.threads 1 --runtime.device cpu --train.epochs 1 \
  --train.batch_size 64 --run-dir "$WORK/run" > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "training failed"; }
snap="$WORK/run/snapshot_e0001.h5"
"$BIN" eval --snapshot "$snap" --runtime.threads 1 --dump-logits "$WORK/logits.csv" \
  > "$WORK/eval.log" 2>&1 || { cat "$WORK/eval.log"; fail "eval with only --snapshot failed"; }
mkdir -p "$WORK/png"
"$PY" - "$WORK/png" "${DATA[@]}" << 'PY'
import gzip, os, sys
from PIL import Image
out, args = sys.argv[1], sys.argv[2:]
opt = dict(zip(args[0::2], args[1::2]))
root = opt["--data.root"]
for i in range(40):
    if opt["--data.dataset"] == "cifar10":
        raw = open(os.path.join(root, "test_batch.bin"), "rb").read()
        rec = raw[i * 3073 + 1:(i + 1) * 3073]  # planar R, G, B
        planes = [Image.frombytes("L", (32, 32), rec[c * 1024:(c + 1) * 1024]) for c in range(3)]
        img = Image.merge("RGB", planes)
    else:
        p = os.path.join(root, "t10k-images-idx3-ubyte")
        raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
        img = Image.frombytes("L", (28, 28), raw[16 + i * 784:16 + (i + 1) * 784])
    img.save(os.path.join(out, "img%03d.png" % i))
PY
"$BIN" predict --snapshot "$snap" "$WORK/png" --top-k 10 --output "$WORK/pred.csv" \
  > "$WORK/predict.log" 2>&1 || { cat "$WORK/predict.log"; fail "predict failed"; }
head -12 "$WORK/predict.log"
"$PY" - "$WORK" << 'PY' || fail "predict disagrees with eval (see above)"
import csv, math, os, sys
work = sys.argv[1]
ev = list(csv.DictReader(open(os.path.join(work, "logits.csv"))))
pred = list(csv.DictReader(open(os.path.join(work, "pred.csv"))))
assert len(ev) == 40, len(ev)
assert len(pred) == 400, len(pred)
for i in range(40):
    rows = [r for r in pred if os.path.basename(r["file"]) == "img%03d.png" % i]
    assert [int(r["rank"]) for r in rows] == list(range(1, 11)), rows
    assert int(rows[0]["class_index"]) == int(ev[i]["predicted"]), (i, rows[0], ev[i]["predicted"])
    z = [float(ev[i]["logit_%d" % c]) for c in range(10)]
    m = max(z)
    s = sum(math.exp(v - m) for v in z)
    for r in rows:
        want = math.exp(z[int(r["class_index"])] - m) / s
        assert abs(float(r["probability"]) - want) < 1e-5, (i, r, want)
    probs = [float(r["probability"]) for r in rows]
    assert probs == sorted(probs, reverse=True) and abs(sum(probs) - 1) < 1e-4, probs
print("predict == eval on 40 PNG files")
PY
# Single files and the default top-k (5) on stdout.
"$BIN" predict --snapshot "$snap" "$WORK/png/img000.png" "$WORK/png/img001.png" \
  > "$WORK/two.log" 2>&1 || { cat "$WORK/two.log"; fail "predict on two files failed"; }
[ "$(grep -Ec '^ +[0-9]+\. ' "$WORK/two.log")" = 10 ] || { cat "$WORK/two.log"; fail "expected 5 classes for each of 2 files"; }
# Another size is resized as `pack --size` resizes (PIL's bilinear filter): a 48x40 version of
# each of 8 images (PIL, bicubic) classifies as PIL's own bilinear resize of it back to the model's
# size does. And a JPEG decodes (libjpeg-turbo) and classifies.
mkdir -p "$WORK/big" "$WORK/small"
"$PY" - "$WORK" << 'PY'
import os, sys
from PIL import Image
work = sys.argv[1]
for i in range(8):
    img = Image.open(os.path.join(work, "png", "img%03d.png" % i))
    side = img.size
    big = img.resize((40, 48), Image.BICUBIC)
    big.save(os.path.join(work, "big", "img%03d.png" % i))
    big.resize(side, Image.BILINEAR).save(os.path.join(work, "small", "img%03d.png" % i))
img.save(os.path.join(work, "img.jpg"), quality=90)
PY
for d in big small; do
  "$BIN" predict --snapshot "$snap" "$WORK/$d" --top-k 10 --output "$WORK/$d.csv" > /dev/null 2>&1 ||
    fail "predict on the $d images failed"
done
diff <(sed 's|.*/||' "$WORK/big.csv") <(sed 's|.*/||' "$WORK/small.csv") > /dev/null ||
  fail "48x40 images resized by predict classify unlike PIL's bilinear resize of them"
"$BIN" predict --snapshot "$snap" "$WORK/img.jpg" --top-k 1 > "$WORK/jpg.log" 2>&1 ||
  { cat "$WORK/jpg.log"; fail "predict on a JPEG failed"; }
grep -Eq '^ +1\. +[0-9.]+%' "$WORK/jpg.log" || { cat "$WORK/jpg.log"; fail "no class for the JPEG"; }
# Not an image: a clear error naming the file, non-zero exit.
echo "not an image" > "$WORK/bad.png"
if "$BIN" predict --snapshot "$snap" "$WORK/bad.png" > "$WORK/bad.log" 2>&1; then
  fail "predict accepted a file that is no image"
fi
grep -q "bad.png" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name the file"; }
pass "predict on PNG files gives eval's classes and softmax probabilities, on $DATA_NAME"
