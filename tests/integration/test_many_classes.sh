#!/usr/bin/env bash
# More classes than a byte holds (ImageNet has 1,000): a packed set of 300 classes trains, held in
# memory, streamed (bitwise the same weights) and shared per node (data.distribute = "broadcast",
# 2 ranks: the same weights as each rank reading); the metrics name all 300 classes per class and
# leave out the 300x300 confusion matrix; `eval` writes per_class.csv whose per-class sample
# counts are the test set's label counts (read here with numpy).
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
same() {  # same A B: bitwise-equal final weights
  "$PY" "$SRC/tests/integration/pack/same_weights.py" "$WORK/$1/snapshot_e0001.h5" \
    "$WORK/$2/snapshot_e0001.h5" > /dev/null || fail "$2 trained other weights than $1"
}
run mem 1
grep -q "fc3 .* $classes " "$WORK/mem/model.txt" || { cat "$WORK/mem/model.txt"; fail "the output layer does not have $classes logits"; }
run stream 1 --data.cache_mb 2 --data.workers 2
same mem stream
run each2 2
run bcast2 2 --data.distribute broadcast
same each2 bcast2

"$PY" - "$WORK/mem/metrics.jsonl" "$classes" << 'PYEOF' || fail "the metrics' per-class fields are wrong"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"per_class"' in l]
assert rows, "no row with per_class"
r = rows[-1]
assert len(r["per_class"]) == int(sys.argv[2]), len(r["per_class"])
assert "confusion" not in r, "a 300x300 confusion matrix in every metrics line"
assert sum(c["samples"] for c in r["per_class"]) == 900
PYEOF

"$BIN" eval --snapshot "$WORK/mem/snapshot_e0001.h5" --runtime.threads 1 --output-dir "$WORK/eval" \
  > "$WORK/eval.log" 2>&1 || { cat "$WORK/eval.log"; fail "eval failed"; }
grep -q "no confusion matrix" "$WORK/eval.log" || { cat "$WORK/eval.log"; fail "eval does not say why there is no confusion matrix"; }
[ ! -e "$WORK/eval/confusion.csv" ] || fail "eval wrote a 300x300 confusion.csv"
"$PY" - "$WORK/eval/per_class.csv" "$WORK/test_y.npy" << 'PYEOF' || fail "per_class.csv is wrong"
import csv, sys
import numpy as np
rows = list(csv.DictReader(open(sys.argv[1])))
want = np.bincount(np.load(sys.argv[2]), minlength=300)
assert len(rows) == 300, len(rows)
for k, r in enumerate(rows):
    assert int(r["samples"]) == want[k], (k, r, want[k])
    assert 0 <= int(r["correct"]) <= int(r["samples"])
PYEOF
pass "300 classes: in memory, streamed and broadcast alike; per-class metrics and per_class.csv"
