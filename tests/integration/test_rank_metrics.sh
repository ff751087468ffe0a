#!/usr/bin/env bash
# Per-rank speed: every epoch row of metrics.jsonl carries a `ranks` array (one object per rank,
# positive compute times, samples summing to the epoch's), and a rank that really computes slower is
# named by the straggler report. The slowdown is CPU contention: three ranks with --bind-to none
# through a taskset wrapper, rank 0 alone on CPU 0, ranks 1 and 2 sharing CPU 1 (so each computes
# at about half speed).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
command -v python3 > /dev/null || skip "python3 not found (it reads metrics.jsonl)"

tiny=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.test_limit 256
      --runtime.threads 1)

# Checks every epoch row of $1: $2 ranks, each with a host, threads, a positive compute time and
# samples, the samples summing to $3 (the training samples of an epoch) and the shares to $4 (the
# global batch). Prints "epoch: per-sample ms of rank 0, rank 1, ..." per row.
check_ranks() {
  python3 - "$@" << 'EOF'
import json, sys
path, world, samples, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(path) if l.strip()]
epochs = [r for r in rows if not r.get("summary")]
if not epochs: sys.exit("no epoch rows in " + path)
for row in epochs:
    e = row["epoch"]
    ranks = row.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != world:
        sys.exit(f"epoch {e}: ranks array {ranks!r} does not have {world} entries")
    for i, r in enumerate(ranks):
        if r["rank"] != i: sys.exit(f"epoch {e}: entry {i} is rank {r['rank']}")
        if not r["host"] or r["threads"] != 1: sys.exit(f"epoch {e}: rank {i} host/threads {r}")
        for key in ("compute_s", "compute_ms_per_sample", "images_per_s", "samples", "share"):
            if not r[key] > 0: sys.exit(f"epoch {e}: rank {i} has {key} = {r[key]}")
        if r["wait_s"] < 0: sys.exit(f"epoch {e}: rank {i} waited {r['wait_s']} s")
    got = sum(r["samples"] for r in ranks)
    if got != samples: sys.exit(f"epoch {e}: the ranks trained {got} samples, not {samples}")
    if sum(r["share"] for r in ranks) != batch:
        sys.exit(f"epoch {e}: shares {[r['share'] for r in ranks]} do not make {batch}")
    print(f"{e}: " + " ".join(f"{r['compute_ms_per_sample']:.4f}" for r in ranks))
EOF
}

# --- two ranks: the array is there and adds up ---------------------------------------------------
mpirun_local -np 2 "$BIN" "${tiny[@]}" --data.train_limit 640 --train.batch_size 64 \
  --train.epochs 2 --run-dir "$WORK/two" > "$WORK/two.log" 2>&1 \
  || { cat "$WORK/two.log"; fail "two ranks failed"; }
check_ranks "$WORK/two/metrics.jsonl" 2 640 128 || fail "two ranks: bad ranks array"

# --- a real straggler ----------------------------------------------------------------------------
[ "$(nproc)" -ge 2 ] || skip "the straggler case needs 2 CPUs (has $(nproc))"
command -v taskset > /dev/null || skip "taskset not found (util-linux)"
cat > "$WORK/pin.sh" << 'EOF'
#!/usr/bin/env bash
# Rank 0 alone on CPU 0, every other rank on CPU 1.
[ "${OMPI_COMM_WORLD_RANK:?not started by mpirun}" = 0 ] && cpu=0 || cpu=1
exec taskset -c "$cpu" "$@"
EOF
chmod +x "$WORK/pin.sh"

# Each epoch's straggler line (stdout) must name exactly the ranks whose per-sample compute in
# metrics.jsonl is over 1.2x the fastest's, and that fastest rank (with equal shares such a rank
# always makes auto shares pay off by more than 5%); no line when there is none. Prints each epoch,
# then "expected: N", N the epochs where ranks 1 and 2 and only they were named.
check_report() {
  python3 - "$1/metrics.jsonl" "$2" << 'EOF'
import json, re, sys
rows = {r["epoch"]: r for r in map(json.loads, open(sys.argv[1])) if "ranks" in r}
said, epoch = {}, None
for line in open(sys.argv[2]):
    m = re.match(r"epoch (\d+)/", line)
    if m: epoch = int(m.group(1))
    elif re.match(r"stragglers?: ", line): said[epoch] = line.strip()
expected = 0
for e, row in sorted(rows.items()):
    t = [r["compute_ms_per_sample"] for r in row["ranks"]]
    fastest = min(range(len(t)), key=lambda r: (t[r], r))
    slow = {r for r in range(len(t)) if t[r] > 1.2 * t[fastest]}
    line = said.get(e, "")
    named = {int(r) for r in re.findall(r"rank (\d+) \([^()]*\) (?:computes )?[0-9.]+x", line)}
    print(f"  epoch {e}: per-sample ms " + " ".join(f"{v:.4f}" for v in t) + f"; {line or 'no report'}")
    if named != slow:
        sys.exit(f"epoch {e}: the report names ranks {sorted(named)}, the metrics say {sorted(slow)}")
    if slow and f"than the fastest rank ({fastest})" not in line:
        sys.exit(f"epoch {e}: the fastest rank is {fastest}")
    expected += slow == {1, 2}
print("expected:", expected)
EOF
}

# On a quiet machine ranks 1 and 2 compute at about half speed (a step of 256 samples is long
# against the scheduler's time slice, so the two interleave within it). Other work on the machine (a
# busy CI host, parallel builds) migrates to the CPU with fewer pinned ranks, and Open MPI, seeing
# 3 ranks on 2 CPUs, yields the CPU in every MPI_Test of the overlapped backward: that can even the
# ranks out, or turn them around, for an epoch or a whole run. So: the report must match the
# measurements (always), and ranks 1 and 2 must be the ones named in at least one epoch of one of
# two runs, unless the machine was busy (load average >= CPUs), which is reported as a skip.
attempt=0 named=0
while [ "$attempt" -lt 2 ] && [ "$named" = 0 ]; do
  attempt=$((attempt + 1))
  load=$(cut -d' ' -f1 /proc/loadavg)
  dir="$WORK/slow$attempt"
  mpirun_local -np 3 --bind-to none "$WORK/pin.sh" "$BIN" "${tiny[@]}" --data.train_limit 6144 \
    --train.batch_size 256 --train.epochs 4 --train.eval_every 100 --run-dir "$dir" \
    > "$dir.log" 2>&1 || { cat "$dir.log"; fail "three pinned ranks failed"; }
  check_ranks "$dir/metrics.jsonl" 3 6144 768 > /dev/null || fail "three ranks: bad ranks array"
  echo "run $attempt (load average $load before it):"
  report=$(check_report "$dir" "$dir.log") \
    || { echo "$report"; fail "the straggler report does not match the measured speeds"; }
  echo "$report" | grep -v '^expected:'
  named=$(echo "$report" | sed -n 's/^expected: //p')
done
if [ "$named" = 0 ]; then
  ge "$load" "$(nproc)" && skip "ranks array and report checked, but this machine is too busy" \
    "(load average $load on $(nproc) CPUs) for CPU pinning to make ranks 1 and 2 the slow ones"
  fail "ranks 1 and 2, sharing CPU 1, were never named as the stragglers"
fi
pass "ranks arrays add up; the straggler report matches the measurements; ranks 1 and 2 sharing" \
  "a CPU were named in $named of 4 epochs (run $attempt)"
