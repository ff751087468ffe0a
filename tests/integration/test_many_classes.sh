#!/usr/bin/env bash
# More classes than a byte holds (ImageNet has 1,000): a packed set of 300 classes trains, held in
# memory, streamed (bitwise the same weights) and shared per node (data.distribute = "broadcast",
# 2 ranks: the same weights as each rank reading); the metrics name all 300 classes per class and
# leave out the 300x300 confusion matrix; `eval` writes per_class.csv whose per-class sample
# counts are the test set's label counts (read here with numpy). The streamed run's cache holds the
# whole file (3 chunks): the labels are read at open, whatever the cache; streaming through a cache
# that re-reads chunks is test_pack_stream.sh's (here it cost 40% of the test's CPU time). The
# python checks run in one process at the end (numpy and h5py start-ups cost more than the checks).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
source "$(dirname "$0")/pack/pack_npy.sh"
find_python numpy h5py
classes=300
"$PY" - "$WORK" "$classes" << 'PYEOF'
import sys
import numpy as np
out, classes = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(11)
for split, n in (("train", 1800), ("test", 900)):
    labels = rng.integers(0, classes, size=n)
    labels[:classes] = np.arange(classes)  # every class present, the last (299) included
    x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    np.save("%s/%s_x.npy" % (out, split), x)
    np.save("%s/%s_y.npy" % (out, split), labels)
PYEOF
pack_npy_splits "$WORK"
common=(--model.preset lenet --data.dataset packed --data.train_file "$WORK/train.h5"
        --data.test_file "$WORK/test.h5" --train.epochs 1 --train.batch_size 60
        --runtime.threads 1 --train.seed 5)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun_local -np "$np" "$BIN" "${common[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { cat "$WORK/$name.log"; fail "$name failed"; }
}
pairs=()
same() { pairs+=("$1" "$2"); }  # same A B: bitwise-equal final weights (checked at the end)
run mem 1
grep -q "fc3 .* $classes " "$WORK/mem/model.txt" || { cat "$WORK/mem/model.txt"; fail "the output layer does not have $classes logits"; }
run stream 1 --data.cache_mb 6 --data.workers 2
same mem stream
run each2 2
run bcast2 2 --data.distribute broadcast
same each2 bcast2

"$BIN" eval --snapshot "$WORK/mem/snapshot_e0001.h5" --runtime.threads 1 --output-dir "$WORK/eval" \
  > "$WORK/eval.log" 2>&1 || { cat "$WORK/eval.log"; fail "eval failed"; }
grep -q "no confusion matrix" "$WORK/eval.log" || { cat "$WORK/eval.log"; fail "eval does not say why there is no confusion matrix"; }
[ ! -e "$WORK/eval/confusion.csv" ] || fail "eval wrote a 300x300 confusion.csv"
# One python process: the weights of each pair given to same (same_weights.py), the metrics'
# per-class fields, and per_class.csv against the test set's labels.
"$PY" - "$SRC/tests/integration/pack/same_weights.py" "$WORK" "$classes" "${pairs[@]}" << 'PYEOF' ||
import contextlib, csv, io, json, runpy, sys
import numpy as np
script, work, classes, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
bad = []
for a, b in zip(pairs[::2], pairs[1::2]):
    sys.argv = [script] + ["%s/%s/snapshot_e0001.h5" % (work, r) for r in (a, b)]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code:
            bad.append("%s trained other weights than %s" % (b, a))
rows = [json.loads(l) for l in open(work + "/mem/metrics.jsonl") if '"per_class"' in l]
if not rows:
    bad.append("the metrics' per-class fields are wrong: no row with per_class")
else:
    r = rows[-1]
    if len(r["per_class"]) != classes:
        bad.append("the metrics name %d classes, not %d" % (len(r["per_class"]), classes))
    if "confusion" in r:
        bad.append("a 300x300 confusion matrix in every metrics line")
    if sum(c["samples"] for c in r["per_class"]) != 900:
        bad.append("the metrics' per-class samples do not add up to 900")
rows = list(csv.DictReader(open(work + "/eval/per_class.csv")))
want = np.bincount(np.load(work + "/test_y.npy"), minlength=classes)
if len(rows) != classes:
    bad.append("per_class.csv is wrong: %d rows" % len(rows))
for k, r in enumerate(rows):
    if int(r["samples"]) != want[k] or not 0 <= int(r["correct"]) <= int(r["samples"]):
        bad.append("per_class.csv is wrong: row %d %s, %d test samples of that class" % (k, r, want[k]))
        break
print("\n".join(bad))
sys.exit(1 if bad else 0)
PYEOF
  fail "the weights, metrics or per_class.csv checks failed: see above"
pass "300 classes: in memory, streamed and broadcast alike; per-class metrics and per_class.csv"
