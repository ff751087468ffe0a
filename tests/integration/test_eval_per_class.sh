#!/usr/bin/env bash
# Per-class results. A 2-rank LeNet epoch on a CIFAR-10 subset (Fashion-MNIST or generated data
# where CIFAR-10 is absent, lib_data.sh) writes per_class and confusion into its metrics.jsonl
# row; then `eval` with nothing but --snapshot (the configuration comes from the snapshot) on 3
# ranks prints per-class accuracy and writes confusion.csv. Checked against the dataset's own
# labels read here by Python (every test sample counted once: each class' row sums to its label
# count) and against the argmax of the logits a 1-rank eval dumps (the same matrix whatever the
# sharding).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_data.sh"
pick_comparison_data 512 301
source "$(dirname "$0")/pack/find_python.sh"
find_python csv
# 301 test samples: 3 ranks get uneven shards.
mpirun_local -np 2 "$BIN" --config "$SRC/configs/cifar.toml" "${DATA[@]}" --data.train_limit 512 \
  --data.test_limit 301 --data.limit_subset first --runtime.threads 1 --runtime.device cpu --train.epochs 1 \
  --train.batch_size 64 --run-dir "$WORK/run" > "$WORK/train.log" 2>&1 ||
  { cat "$WORK/train.log"; fail "training failed"; }
snap="$WORK/run/snapshot_e0001.h5"
[ -f "$snap" ] || fail "no snapshot $snap"
# Only --snapshot: the stored configuration (data root, limits, model) is used.
mpirun_local -np 3 "$BIN" eval --snapshot "$snap" --runtime.threads 1 > "$WORK/eval.log" 2>&1 ||
  { cat "$WORK/eval.log"; fail "eval with only --snapshot failed"; }
cat "$WORK/eval.log"
[ -f "$WORK/run/confusion.csv" ] || fail "eval wrote no confusion.csv next to the snapshot"
"$BIN" eval --snapshot "$snap" --runtime.threads 1 --output-dir "$WORK/one" \
  --dump-logits "$WORK/logits.csv" > "$WORK/eval1.log" 2>&1 ||
  { cat "$WORK/eval1.log"; fail "1-rank eval with --dump-logits failed"; }
"$PY" - "$WORK" "${DATA[@]}" << 'PY' || fail "per-class results are wrong (see above)"
import csv, gzip, json, os, sys
work, args = sys.argv[1], sys.argv[2:]
opt = dict(zip(args[0::2], args[1::2]))
root, dataset, n = opt["--data.root"], opt["--data.dataset"], 301
if dataset == "cifar10":
    raw = open(os.path.join(root, "test_batch.bin"), "rb").read()
    labels = [raw[i * 3073] for i in range(n)]
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
             "truck"]
else:
    p = os.path.join(root, "t10k-labels-idx1-ubyte")
    raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
    labels = list(raw[8:8 + n])
    names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
             "Bag", "Ankle boot"]
rows = [json.loads(l) for l in open(os.path.join(work, "run", "metrics.jsonl"))]
epoch = [r for r in rows if r.get("epoch") == 1][0]
conf, per = epoch["confusion"], epoch["per_class"]
def check(ok, what):
    if not ok:
        print("FAIL:", what); sys.exit(1)
check([p["class"] for p in per] == names, "class names %s" % [p["class"] for p in per])
check(epoch["test_samples"] == n and sum(map(sum, conf)) == n, "samples counted %d" % sum(map(sum, conf)))
for c in range(10):
    check(sum(conf[c]) == labels.count(c) == per[c]["samples"],
          "class %d: row sum %d, per_class samples %d, labels %d" %
          (c, sum(conf[c]), per[c]["samples"], labels.count(c)))
    want = conf[c][c] / labels.count(c) if labels.count(c) else 0.0
    check(abs(per[c]["accuracy"] - want) < 1e-12, "class %d accuracy" % c)
check(abs(sum(conf[c][c] for c in range(10)) / n - epoch["test_acc"]) < 1e-12, "test_acc vs diagonal")
# confusion.csv of the 3-rank eval (written next to the snapshot) and of the 1-rank one.
for path in (os.path.join(work, "run", "confusion.csv"), os.path.join(work, "one", "confusion.csv")):
    table = list(csv.reader(open(path)))
    check(table[0][1:] == names and [r[0] for r in table[1:]] == names, path + ": header/rows")
    check([[int(v) for v in r[1:]] for r in table[1:]] == conf, path + ": counts differ from metrics.jsonl")
# The dumped logits: one row per test sample in order, their argmax gives the same matrix.
dump = list(csv.DictReader(open(os.path.join(work, "logits.csv"))))
check(len(dump) == n and [int(r["label"]) for r in dump] == labels, "logits.csv rows/labels")
mine = [[0] * 10 for _ in range(10)]
for r in dump:
    z = [float(r["logit_%d" % c]) for c in range(10)]
    mine[int(r["label"])][z.index(max(z))] += 1
check(mine == conf, "confusion from the dumped logits %s" % mine)
print("per-class results check out:", [round(p["accuracy"], 3) for p in per])
PY
grep -q "^per-class accuracy:" "$WORK/eval.log" || fail "eval printed no per-class accuracy"
grep -Eq "^  (airplane|T-shirt/top) +[0-9.]+%" "$WORK/eval.log" || fail "no per-class line with a class name"
pass "confusion matrix exact over 2 and 3 ranks, per-class accuracy in metrics.jsonl and eval, on $DATA_NAME"
