#!/usr/bin/env bash
# run.trace: a 3-rank run writes each rank's timeline and rank 0 merges them into
# run.dir/trace.json: valid JSON in Chrome's trace-event format, events from every rank (pid =
# rank), the phases of every step, and each gradient bucket's all-reduce inside its step.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || [ -f "$FASHION/train-images-idx3-ubyte" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
command -v python3 > /dev/null || skip "python3 not found (it reads the trace)"

run=$WORK/run
# 384 samples in global batches of 96: 4 steps per epoch; small buckets, so that LeNet's gradient
# travels in several.
mpirun_local -np 3 "$BIN" --config "$FASHION_CONFIG" --model.preset lenet_mnist \
  --data.train_limit 384 --data.test_limit 96 --train.batch_size 32 --train.epochs 2 \
  --train.save_every 1 --runtime.threads 1 --comm.bucket_mb 0.02 --comm.first_bucket_mb 0.01 \
  --run.trace true --run-dir "$run" > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; fail "training failed"; }
grep -q "^trace: $run/trace.json (3 of 3 rank(s))" "$WORK/train.log" || { cat "$WORK/train.log"; fail "no trace line"; }
for r in 0 1 2; do
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$run/trace/rank_000$r.json" ||
    fail "rank $r's own trace file is not valid JSON"
done
python3 - "$run/trace.json" << 'EOF2' || fail "the merged trace is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"]
for e in events:
    if e["ph"] == "X":
        for k in ("name", "pid", "tid", "ts", "dur", "args"):
            if k not in e: sys.exit(f"event without {k}: {e}")
        if e["dur"] < 0: sys.exit(f"negative duration: {e}")
    elif e["ph"] != "M":
        sys.exit(f"unexpected phase type: {e}")
x = [e for e in events if e["ph"] == "X"]
names = {e["pid"]: {m["args"]["name"] for m in events if m["ph"] == "M" and m["name"] == "process_name" and m["pid"] == e["pid"]} for e in x}
if sorted(names) != [0, 1, 2]: sys.exit(f"events from ranks {sorted(names)}, expected 0, 1, 2")
buckets_seen = set()
for r in range(3):
    mine = [e for e in x if e["pid"] == r]
    steps = {e["args"]["step"]: e for e in mine if e["name"] == "step"}
    if sorted(steps) != list(range(8)): sys.exit(f"rank {r}: steps {sorted(steps)}, expected 0..7")
    for phase in ("data wait", "forward", "backward", "gradient wait", "optimizer"):
        got = sorted({e["args"]["step"] for e in mine if e["name"] == phase})
        if got != list(range(8)): sys.exit(f"rank {r}: {phase} in steps {got}")
    for e in mine:
        if e["name"] == "step": continue
        s = steps.get(e["args"]["step"])
        if e["name"] in ("data wait", "forward", "backward", "gradient wait", "optimizer", "all-reduce"):
            if e["ts"] < s["ts"] - 1e-3 or e["ts"] + e["dur"] > s["ts"] + s["dur"] + 1e-3:
                sys.exit(f"rank {r}: {e} is not inside its step {s}")
    ar = [e for e in mine if e["name"] == "all-reduce"]
    # each bucket on a thread of its own (they overlap without nesting)
    if any(e["tid"] != 1 + e["args"]["bucket"] for e in ar): sys.exit(f"rank {r}: bucket threads {ar}")
    per_step = {}
    for e in ar:
        per_step.setdefault(e["args"]["step"], []).append(e["args"]["bucket"])
    counts = {len(v) for v in per_step.values()}
    if sorted(per_step) != list(range(8)) or len(counts) != 1 or min(counts) < 2:
        sys.exit(f"rank {r}: all-reduce buckets per step {per_step}")
    buckets_seen |= {b for v in per_step.values() for b in v}
    if len([e for e in mine if e["name"] == "evaluate"]) != 2: sys.exit(f"rank {r}: not 2 evaluations")
snaps = [e for e in x if e["name"] == "snapshot"]
if len(snaps) != 2 or any(e["pid"] != 0 for e in snaps): sys.exit(f"snapshot events {snaps}")
print(f"{len(x)} events from 3 ranks, {len(buckets_seen)} buckets per step, all inside their steps")
EOF2
pass "trace: valid trace-event JSON from 3 ranks, every bucket's all-reduce inside its step"
