#!/usr/bin/env bash
# bench/gpu_compare.sh without a GPU: what of it can run here does run.
#  - the PyTorch side (bench/torch_gpu_step.py) trains its step on the CPU (--device cpu --tiny);
#  - its resnet20, resnet56 and resnet18 (cifar stem) have exactly the parameter count that
#    ddp_train prints for its presets;
#  - the orchestration (bench/gpu_compare.py): the real PyTorch server on the CPU against a
#    stand-in for gpu_bench (which exits 77 without a GPU) that speaks gpu_bench's --gate protocol
#    and records what it is asked: the rounds interleave (ours, eager, ours, eager), gpu_bench gets
#    the row's flags (TF32 for fp32 only, batches resident, JSON), torch.compile's absence from
#    PyTorch 1.13 is said in the table, every answer lands in raw.jsonl;
#  - ddp_train in two variants (--ours-variant NAME:"gpu_bench args"): each variant's gpu_bench gets
#    its arguments, the variants and eager interleave in the same rounds, the table has a row per
#    variant with its own figures and ratio and names each variant's arguments;
#  - the torch.compile part (timeout, process killed, fallback mode, not retried) with a stand-in
#    for a PyTorch 2 server, since Debian's PyTorch 1.13 has no torch.compile;
#  - the table (--from-raw) on recorded numbers: medians (odd and even counts), min-max and
#    ratios checked against values computed here with awk;
#  - scripts/gpu_check.sh --dry-run lists the gpu_compare step, and --only leaves the others out.
# Needs /usr/bin/python3 with torch and torchvision (Debian's python3-torch), and CIFAR-10 for the
# parameter counts ddp_train prints.
source "$(dirname "$0")/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
# Looked up, not imported (an `import torch` costs seconds; the PyTorch steps below import it).
"$PY" -c "import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, sys.argv[1:])))" torch torchvision \
  2> /dev/null || skip "no torch/torchvision for $PY"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"

# --- the PyTorch step on the CPU, and PyTorch's parameter counts ---------------------------------
# One python process (each `import torch` costs seconds): torch_gpu_step.py's main() with the
# command line `--model resnet20 --precision bf16 --device cpu --tiny`, its output into tiny.json;
# then the parameter counts of its models into torch_params.
"$PY" - "$SRC/bench" "$WORK/tiny.json" > "$WORK/torch_params" 2> "$WORK/tiny.err" << 'EOF' ||
import contextlib, sys
sys.path.insert(0, sys.argv[1])
import torch_gpu_step
with open(sys.argv[2], "w") as out, contextlib.redirect_stdout(out):
    rc = torch_gpu_step.main(["--model", "resnet20", "--precision", "bf16", "--device", "cpu", "--tiny"])
if rc:
    sys.exit("torch_gpu_step.py --tiny exited %s" % rc)
for m in ("resnet20", "resnet56", "resnet18"):
    print(m, sum(p.numel() for p in torch_gpu_step.build_model(m, 32, 10).parameters()))
EOF
  { cat "$WORK/tiny.err"; fail "torch_gpu_step.py --tiny (or its parameter counts) failed"; }
cat "$WORK/tiny.json"
"$PY" - "$WORK/tiny.json" << 'EOF' || fail "the self-test's answer is wrong"
import json, math, sys
r = json.loads(open(sys.argv[1]).read())
assert r["event"] == "run" and r["side"] == "eager" and r["batch"] == 2 and r["steps"] == 2, r
assert r["autocast"] == "bfloat16" and r["channels_last"] and r["images_per_s"] > 0, r
assert math.isfinite(r["loss_last"]) and r["loss_last"] > 0, r
assert r["optimizer"] in ("fused", "foreach"), r
EOF

# --- parameter counts: PyTorch's models (above) against ddp_train's presets ----------------------
# model.txt is written at start-up: one step of 2 images is enough (the count does not depend on it).
for m in resnet20 resnet56 resnet18; do
  "$BIN" --config "$SRC/configs/cifar_resnet20.toml" --model.preset "$m" --data.root "$CIFAR" \
    --run-dir "$WORK/run_$m" --data.train_limit 2 --data.test_limit 2 --train.epochs 1 \
    --train.batch_size 2 > "$WORK/$m.log" 2>&1 || { cat "$WORK/$m.log"; fail "ddp_train $m failed"; }
  ours=$(grep -o 'total trainable parameters: [0-9]*' "$WORK/run_$m/model.txt" | awk '{ print $4 }')
  theirs=$(awk -v m="$m" '$1 == m { print $2 }' "$WORK/torch_params")
  echo "$m: ddp_train $ours parameters, PyTorch $theirs"
  [ -n "$ours" ] && [ "$ours" = "$theirs" ] || fail "$m: ddp_train has '$ours' parameters, PyTorch '$theirs'"
done

# --- the orchestration: real PyTorch server (CPU), a stand-in for gpu_bench ----------------------
# gpu_bench exits 77 here; this stands in for it with its --gate protocol: a {"event": "ready"}
# line per round, "go" on standard input runs it ({"event": "run"}), anything else ends.
cat > "$WORK/fake_gpu_bench" << 'EOF'
#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
opt = lambda k: args[args.index(k) + 1]
log = open(os.environ["FAKE_LOG"], "a")
log.write("argv " + " ".join(args) + "\n")
print("gpu_bench: 1 rank(s); a stand-in", flush=True)
rounds = int(opt("--rounds"))
for r in range(rounds):
    print(json.dumps({"event": "ready", "model": opt("--model"), "round": r}), flush=True)
    line = sys.stdin.readline().strip()
    log.write(f"got {line!r} round {r} {opt('--precision')}\n")
    log.flush()
    if line != "go":
        sys.exit(0)
    ips = 1000.0 * (r + 1) + (100 if opt("--precision") == "bf16" else 0)
    if "--bn" in args and opt("--bn") == "cudnn":  # the "before" variant of the A/B: slower
        ips -= 600
    print(json.dumps({"event": "run", "side": "ours", "model": opt("--model"),
                      "precision": opt("--precision"), "round": r, "steps": 10,
                      "seconds": 10 * int(opt("--batch")) / ips, "images_per_s": ips,
                      "ms_per_step": 1e3 * int(opt("--batch")) / ips, "gpu": "Stand-in GPU",
                      "versions": "stand-in versions", "algorithms": "heuristics"}), flush=True)
EOF
chmod +x "$WORK/fake_gpu_bench"
FAKE_LOG="$WORK/fake.log" PYTHON="$PY" bash "$SRC/bench/gpu_compare.sh" --gpu-bench "$WORK/fake_gpu_bench" \
  --out "$WORK/out" --device cpu --tiny --models resnet20 --precisions bf16,fp32 --rounds 2 \
  --seconds 0.1 --budget 900 --profile none > "$WORK/compare.out" 2>&1 ||
  { cat "$WORK/compare.out" "$WORK/out/log.txt"; fail "gpu_compare.sh failed"; }
cat "$WORK/compare.out"
for f in raw.jsonl table.md log.txt; do [ -s "$WORK/out/$f" ] || fail "gpu_compare wrote no $f"; done
# The order of the runs: per row, round by round, ours then eager.
order=$(grep '"kind": "run"' "$WORK/out/raw.jsonl" | "$PY" -c '
import json, sys
print(" ".join("%s:%s:%s" % (r["precision"], r["round"], r["side"]) for r in map(json.loads, sys.stdin)))')
want="bf16:0:ours bf16:0:eager bf16:1:ours bf16:1:eager fp32:0:ours fp32:0:eager fp32:1:ours fp32:1:eager"
[ "$order" = "$want" ] || fail "runs in the order '$order', expected '$want'"
# What gpu_bench was asked: TF32 for fp32 only, resident batches, JSON, the gate, the geometry.
grep -c '^got .go. round' "$WORK/fake.log" | grep -qx 4 || fail "the stand-in did not get 4 go's: $(cat "$WORK/fake.log")"
grep '^argv' "$WORK/fake.log" | grep -- '--precision bf16' | grep -q -- '--tf32' && fail "bf16 row asked for --tf32"
grep '^argv' "$WORK/fake.log" | grep -- '--precision fp32' | grep -q -- '--tf32' || fail "fp32 row without --tf32"
for flag in '--no-upload' '--json' '--gate' '--rounds 2' '--batch 512' '--image 32' '--classes 10'; do
  [ "$(grep '^argv' "$WORK/fake.log" | grep -c -- "$flag")" = 2 ] || fail "gpu_bench was not given $flag: $(grep '^argv' "$WORK/fake.log")"
done
# The PyTorch side ran for real (CPU, tiny): its runs carry its step count and settings.
grep '"kind": "run"' "$WORK/out/raw.jsonl" | grep '"side": "eager"' | grep -q '"steps": 2' ||
  fail "no eager run with 2 steps in raw.jsonl"
grep -q '"kind": "peer".*"matmul_tf32": true' "$WORK/out/raw.jsonl" || fail "fp32 row without matmul TF32 on the PyTorch side"
grep -q "torch.compile: not in PyTorch 1" "$WORK/out/table.md" || fail "the table does not say torch.compile is missing"
grep -q '^| resnet20 | 32x32, 512 | bf16 | 1,600 (1,100-2,100) | ' "$WORK/out/table.md" ||
  fail "the bf16 row does not show the stand-in's numbers: $(grep '^| resnet20' "$WORK/out/table.md")"

# --- two variants of ddp_train in the same rounds (the before/after A/B) --------------------------
FAKE_LOG="$WORK/fake3.log" PYTHON="$PY" bash "$SRC/bench/gpu_compare.sh" --gpu-bench "$WORK/fake_gpu_bench" \
  --out "$WORK/out3" --device cpu --tiny --models resnet20 --precisions bf16 --rounds 2 \
  --seconds 0.1 --budget 900 --profile none --ours-variant 'before:--bn cudnn,--algos heuristic' \
  --ours-variant after: > "$WORK/compare3.out" 2>&1 ||
  { cat "$WORK/compare3.out" "$WORK/out3/log.txt"; fail "gpu_compare.sh with two variants failed"; }
cat "$WORK/compare3.out"
order=$(grep '"kind": "run"' "$WORK/out3/raw.jsonl" | "$PY" -c '
import json, sys
print(" ".join("%s:%s:%s" % (r["round"], r["side"], r.get("variant", "-")) for r in map(json.loads, sys.stdin)))')
want="0:ours:before 0:ours:after 0:eager:- 1:ours:before 1:ours:after 1:eager:-"
[ "$order" = "$want" ] || fail "variant runs in the order '$order', expected '$want'"
[ "$(grep -c '^argv' "$WORK/fake3.log")" = 2 ] || fail "expected one gpu_bench per variant: $(cat "$WORK/fake3.log")"
grep '^argv' "$WORK/fake3.log" | grep -q -- '--bn cudnn --algos heuristic$' ||
  fail "the before variant did not get its arguments: $(grep '^argv' "$WORK/fake3.log")"
[ "$(grep '^argv' "$WORK/fake3.log" | grep -c -- '--bn')" = 1 ] || fail "the after variant got the before's arguments"
grep '^argv' "$WORK/fake3.log" | grep -v -- '--bn' | grep -q -- '--gate.*--rewarm 3$' ||
  fail "the after variant's gpu_bench is not run with the defaults: $(grep '^argv' "$WORK/fake3.log")"
# before: 1100 - 600, 2100 - 600 -> median 1000; after: 1600; the eager side is real (CPU, tiny).
before=$(grep '^| resnet20 | 32x32, 512 | bf16 | before | ' "$WORK/out3/table.md")
after=$(grep '^| resnet20 | 32x32, 512 | bf16 | after | ' "$WORK/out3/table.md")
echo "$before"
echo "$after"
case $before in "| resnet20 | 32x32, 512 | bf16 | before | 1,000 (500-1,500) | "*) ;; *) fail "the before row is not as expected" ;; esac
case $after in "| resnet20 | 32x32, 512 | bf16 | after | 1,600 (1,100-2,100) | "*) ;; *) fail "the after row is not as expected" ;; esac
eager_before=$(echo "$before" | cut -d'|' -f7) eager_after=$(echo "$after" | cut -d'|' -f7)
[ "$eager_before" = "$eager_after" ] && [ -n "$eager_before" ] || fail "the rows' eager figures differ"
grep -q '| model | input, batch | precision | ddp_train variant | ddp_train images/s |' "$WORK/out3/table.md" ||
  fail "the table has no variant column"
grep -qF '**before** (`--bn cudnn --algos heuristic`)' "$WORK/out3/table.md" || fail "the table does not name the before variant's arguments"
grep -qF '**after** (defaults)' "$WORK/out3/table.md" || fail "the table does not say the after variant runs the defaults"
grep -q '^| resnet20 | bf16 | eager | 1 | ours after | ' "$WORK/out3/table.md" || fail "'Every run' does not name the variant"
grep -q '^| model | input, batch | precision | ddp_train images/s |' "$WORK/out/table.md" ||
  fail "without variants the table changed its columns"

# --- the torch.compile part: PyTorch 1.13 has none, so a stand-in for a PyTorch 2 server ---------
# (the protocol of torch_gpu_step.py --serve) whose max-autotune never finishes and whose
# reduce-overhead compiles at once: the first row's max-autotune is stopped at --compile-cap (its
# process killed), the row compiles with the fallback in a fresh process and runs its rounds with
# three sides; the second row does not try max-autotune again.
cat > "$WORK/fake_python" << 'EOF'
#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[2:]  # [0]: torch_gpu_step.py
opt = lambda k: args[args.index(k) + 1]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(f"peer {os.getpid()} {opt('--precision')}\n")
row = {"model": opt("--model"), "precision": opt("--precision"), "batch": 2, "image": 32}
say = lambda obj: print(json.dumps(obj), flush=True)
say({"event": "loaded", **row, "torch": "2.99-stand-in", "compile_available": True,
     "optimizer": "fused", "matmul_tf32": "--matmul-tf32" in args})
for line in sys.stdin:
    w = line.split()
    if w[0] == "warm":
        say({"event": "ready", **row})
    elif w[0] == "compile" and w[1] == "max-autotune":
        time.sleep(600)
    elif w[0] == "compile":
        say({"event": "compiled", **row, "mode": w[1], "seconds": 0.5, "graphs": 1,
             "cudagraph_skips": 0})
    elif w[0] == "run":
        ips = {"eager": 500.0, "compiled": 800.0}[w[1]]
        say({"event": "run", "side": w[1], **row, "round": int(w[3]), "steps": 5,
             "seconds": 0.01, "ms_per_step": 2.0, "images_per_s": ips})
EOF
chmod +x "$WORK/fake_python"
FAKE_LOG="$WORK/fake2.log" PYTHON="$PY" bash "$SRC/bench/gpu_compare.sh" --gpu-bench "$WORK/fake_gpu_bench" \
  --python "$WORK/fake_python" --out "$WORK/out2" --models resnet20 --precisions bf16,fp32 \
  --rounds 2 --seconds 0.1 --budget 900 --profile none --compile-cap 4 --compile-min 1 \
  > "$WORK/compare2.out" 2>&1 || { cat "$WORK/compare2.out" "$WORK/out2/log.txt"; fail "gpu_compare.sh with the stand-ins failed"; }
cat "$WORK/compare2.out"
compiles=$(grep '"kind": "compile"' "$WORK/out2/raw.jsonl" | "$PY" -c '
import json, sys
print(" ".join("%s:%s:%s" % (r["precision"], r["mode"], r["status"]) for r in map(json.loads, sys.stdin)))')
want="bf16:max-autotune:timeout bf16:reduce-overhead:ok fp32:max-autotune:skipped fp32:reduce-overhead:ok"
[ "$compiles" = "$want" ] || fail "compile attempts '$compiles', expected '$want'"
order=$(grep '"phase": "compile"' "$WORK/out2/raw.jsonl" | "$PY" -c '
import json, sys
print(" ".join("%s:%s:%s" % (r["precision"], r["round"], r["side"]) for r in map(json.loads, sys.stdin)))')
want="bf16:0:ours bf16:0:eager bf16:0:compiled bf16:1:ours bf16:1:eager bf16:1:compiled"
want="$want fp32:0:ours fp32:0:eager fp32:0:compiled fp32:1:ours fp32:1:eager fp32:1:compiled"
[ "$order" = "$want" ] || fail "compile-phase runs in the order '$order', expected '$want'"
# The stopped PyTorch server is gone (its process group was killed), and so is every other.
for pid in $(awk '$1 == "peer" { print $2 }' "$WORK/fake2.log"); do
  kill -0 "$pid" 2> /dev/null && fail "PyTorch stand-in $pid still runs"
done
[ "$(grep -c '^peer' "$WORK/fake2.log")" = 5 ] ||
  fail "expected 5 PyTorch processes (2 in each phase and a fresh one after the stop): $(cat "$WORK/fake2.log")"
row=$(grep '^| resnet20 | 32x32, 512 | bf16 |' "$WORK/out2/table.md")
echo "$row"
# ours: 1100, 2100 in both phases -> median 1600; eager 500; compiled 800.
[ "$row" = "| resnet20 | 32x32, 512 | bf16 | 1,600 (1,100-2,100) | 500 (500-500) | 3.20 | 800 (800-800) | 2.00 | reduce-overhead, 0 s |" ] ||
  fail "the compiled row is not as expected"
grep -q 'resnet20 bf16: torch.compile(mode=max-autotune) did not finish within [4-9] s; stopped' "$WORK/out2/table.md" ||
  fail "the table does not say that max-autotune was stopped"
grep -q 'resnet20 fp32: torch.compile(mode=max-autotune) not run: it did not finish for resnet20 bf16' "$WORK/out2/table.md" ||
  fail "the table does not say why the fp32 row did not try max-autotune"

# --- the table of recorded numbers, checked against awk ------------------------------------------
sample="$WORK/sample.jsonl"
{
  echo '{"kind": "header", "date": "2026-12-01 10:00 UTC", "host": "gpu-node", "source": "abc1234", "budget": 300, "rounds": 3, "seconds": 0.8, "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04"}'
  echo '{"kind": "peer", "model": "resnet20", "precision": "bf16", "torch": "2.11.0+cu130", "torch_cuda": "13.0", "torch_cudnn": 91400, "torchvision": "0.26.0", "python": "3.12.3", "optimizer": "fused", "matmul_tf32": false, "compile_available": true}'
  echo '{"kind": "peer", "model": "resnet50", "precision": "fp32", "torch": "2.11.0+cu130", "torch_cuda": "13.0", "torch_cudnn": 91400, "torchvision": "0.26.0", "python": "3.12.3", "optimizer": "fused", "matmul_tf32": true, "compile_available": true}'
} > "$sample"
run() {  # run MODEL PRECISION IMAGE BATCH SIDE IMAGES_PER_S [PHASE]
  printf '{"kind": "run", "model": "%s", "precision": "%s", "image": %s, "batch": %s, "side": "%s", "images_per_s": %s, "ms_per_step": 1.0, "steps": 100, "seconds": 1.0, "round": 0, "phase": "%s", "gpu": "NVIDIA H100 80GB HBM3", "versions": "CUDA runtime 13.0, cuDNN 9.14.0"}\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "${7:-eager}" >> "$sample"
}
# resnet20 bf16: 3 rounds of each side; resnet50 fp32: 4 of ours and eager (an even count), none
# compiled (its compile timed out).
for v in 31000 29500 30200; do run resnet20 bf16 32 512 ours $v; done
for v in 15100 14000 16500; do run resnet20 bf16 32 512 eager $v; done
for v in 25000 26050 24000; do run resnet20 bf16 32 512 compiled $v compile; done
for v in 2000 2100 2300 2250; do run resnet50 fp32 224 128 ours $v; done
for v in 1800 1700 1900 1750; do run resnet50 fp32 224 128 eager $v; done
echo '{"kind": "compile", "model": "resnet20", "precision": "bf16", "mode": "max-autotune", "status": "ok", "seconds": 84.6, "graphs": 1, "cudagraph_skips": 0}' >> "$sample"
echo '{"kind": "compile", "model": "resnet50", "precision": "fp32", "mode": "max-autotune", "status": "timeout", "seconds": 150.2}' >> "$sample"
echo '{"kind": "end", "elapsed_s": 297.4}' >> "$sample"
bash "$SRC/bench/gpu_compare.sh" --from-raw "$sample" > "$WORK/table.md" 2> "$WORK/table.err" ||
  { cat "$WORK/table.err"; fail "--from-raw failed"; }
cat "$WORK/table.md"
# Expected cells, computed here: median (mean of the middle two for an even count), min, max,
# thousands separated; ratio of the medians to 2 decimals.
stats() {  # stats MODEL PRECISION SIDE -> "median min max"
  grep "\"model\": \"$1\", \"precision\": \"$2\"" "$sample" | grep '"kind": "run"' |
    grep "\"side\": \"$3\"" | grep -o '"images_per_s": [0-9.]*' | awk '{ print $2 }' | sort -g |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
commas() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o }'; }
cellof() { read -r m lo hi <<< "$(stats "$@")"; echo "$(commas "$m") ($(commas "$lo")-$(commas "$hi"))"; }
ratioof() { awk -v a="$(stats "$1" "$2" ours | cut -d' ' -f1)" -v b="$(stats "$1" "$2" "$3" | cut -d' ' -f1)" 'BEGIN { printf "%.2f", a / b }'; }
want20="| resnet20 | 32x32, 512 | bf16 | $(cellof resnet20 bf16 ours) | $(cellof resnet20 bf16 eager) | $(ratioof resnet20 bf16 eager) | $(cellof resnet20 bf16 compiled) | $(ratioof resnet20 bf16 compiled) | max-autotune, 85 s |"
want50="| resnet50 | 224x224, 128 | fp32 | $(cellof resnet50 fp32 ours) | $(cellof resnet50 fp32 eager) | $(ratioof resnet50 fp32 eager) | - | - | - |"
echo "expected: $want20"
echo "expected: $want50"
grep -qxF "$want20" "$WORK/table.md" || fail "resnet20 row differs from the expected one"
grep -qxF "$want50" "$WORK/table.md" || fail "resnet50 row differs from the expected one"
# By hand, as a check of the check: resnet50's medians are 2175 and 1775 (even counts).
[ "$want50" = "| resnet50 | 224x224, 128 | fp32 | 2,175 (2,000-2,300) | 1,775 (1,700-1,900) | 1.23 | - | - | - |" ] ||
  fail "the awk oracle is off: $want50"
grep -q 'resnet50 fp32: torch.compile(mode=max-autotune) did not finish within 150 s' "$WORK/table.md" ||
  fail "the compile timeout is not in the notes"
grep -q 'NVIDIA H100 80GB HBM3; driver 580.159.04; ddp_train: CUDA runtime 13.0, cuDNN 9.14.0; PyTorch 2.11.0+cu130 (CUDA 13.0, cuDNN 9.14.0), torchvision 0.26.0' "$WORK/table.md" ||
  fail "the header does not name the GPU, driver and versions"
grep -q 'matmul TF32 on (set)' "$WORK/table.md" || fail "the header does not say matmul TF32 is on for fp32"
[ "$(grep -c '^| resnet[25]0 | [a-z0-9]* | [-a-z0-9]* | [0-9]' "$WORK/table.md")" = 17 ] ||
  fail "not every run is listed under 'Every run'"

# --- gpu_check.sh: the step is listed; --only leaves the others out ------------------------------
bash "$SRC/scripts/gpu_check.sh" --dry-run --only gpu_compare --work "$WORK/dry" > "$WORK/dry.log" 2>&1 ||
  { cat "$WORK/dry.log"; fail "gpu_check.sh --dry-run --only gpu_compare failed"; }
cat "$WORK/dry.log"
grep -q '^  gpu_compare  .*bench/gpu_compare.sh' "$WORK/dry.log" || fail "the dry run does not list gpu_compare"
grep -q '^  build  .*gpu_bench' "$WORK/dry.log" || fail "--only dropped the build"
grep -q '^  unit_gpu  *(skipped: --only)' "$WORK/dry.log" || fail "--only did not leave unit_gpu out"
bash "$SRC/scripts/gpu_check.sh" --dry-run --only gpu_comapre > /dev/null 2>&1 && fail "a misspelt --only step was accepted"
[ ! -e "$WORK/dry" ] || fail "--dry-run created its work tree"
pass "PyTorch step on the CPU, parameter counts equal ddp_train's, interleaved orchestration, two ddp_train variants side by side, compile timeout and fallback, table checked against awk, gpu_check step listed"
