#!/usr/bin/env bash
# bench/time_to_accuracy.sh without a GPU: what of it can run here does run.
#  - airbench's side (bench/time_to_accuracy.py airbench) against a stand-in that prints a
#    recorded airbench94_compiled table (a warm-up run, then runs forever, as the real script
#    trains 25): the time is taken at the first real run's 'eval' row, its tta_val_acc and
#    total_time_seconds are kept, the warm-up run's row is passed over, the script is stopped;
#  - the CIFAR-10 tensors airbench loads (cifar10/train.pt, test.pt) made from the binaries,
#    compared with the binary records;
#  - our side with a stand-in ddp_train: timed to its "final test accuracy" line; a run that
#    fails or prints no accuracy is an error naming its log;
#  - the whole script (ddp_train only, 2 seeds) and the table on recorded results: means, sample
#    standard deviations, min-max and ratios checked against values computed here with awk.
# Needs /usr/bin/python3 with torch and numpy (Debian's python3-torch) and real CIFAR-10.
source "$(dirname "$0")/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, numpy' 2> /dev/null || skip "no torch/numpy for $PY"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"
T2A=("$PY" "$SRC/bench/time_to_accuracy.py")

# --- a small copy of CIFAR-10: 30 records per file ----------------------------------------------
mini=$WORK/cifar_mini
mkdir -p "$mini"
cp "$CIFAR/batches.meta.txt" "$mini/"
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  head -c $((30 * 3073)) "$CIFAR/$f.bin" > "$mini/$f.bin"
done

# --- airbench's side ------------------------------------------------------------------------------
# A recorded table (the output of airbench94_compiled.py, shortened to 3 epochs), replayed line by
# line with pauses, then more runs without end.
cat > "$WORK/fake_airbench.py" << 'EOF'
import itertools, sys, time
head = "|  run     |  epoch  |  train_loss  |  train_acc  |  val_acc  |  tta_val_acc  |  total_time_seconds  |"
print("-" * len(head)); print(head); print("-" * len(head))
def run(name, accs, total):
    for epoch, acc in enumerate(accs):
        cells = [name if epoch == 0 else "", str(epoch), "1.2345", "0.5000", f"{acc:.4f}", "", f"{total * (epoch + 1) / 4:.4f}"]
        print("|  " + "  |  ".join(cells) + "  |"); time.sleep(0.05)
    print("|  " + "  |  ".join(["", "eval", "1.0000", "0.9000", f"{accs[-1]:.4f}", "0.9412", f"{total:.4f}"]) + "  |")
    print("-" * len(head))
run("warmup", [0.1, 0.1, 0.1], 9.5)      # the warm-up run on random labels
time.sleep(0.3)
for r in itertools.count():              # the 25 runs, and more: the driver must stop it
    run(str(r), [0.8, 0.9, 0.93], 3.2)
    time.sleep(0.2)
EOF
"${T2A[@]}" airbench --tool airbench94_compiled --seed 1 --out "$WORK/air.jsonl" \
  --workdir "$WORK/air" --cifar "$mini" -- "$PY" "$WORK/fake_airbench.py" ||
  fail "the airbench driver failed"
cat "$WORK/air.jsonl"
"$PY" - "$WORK/air.jsonl" << 'EOF' || fail "the airbench record is wrong"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 1, r
r = r[0]
assert r["tool"] == "airbench94_compiled" and r["seed"] == 1, r
assert r["accuracy"] == 0.9412 and r["airbench_s"] == 3.2, r  # the real run's row, not warm-up's
assert 0.5 < r["wall_s"] < 20, r  # past the warm-up run's pauses
EOF
pgrep -f "$WORK/fake_airbench.py" > /dev/null && fail "the airbench stand-in was left running"

# The tensors airbench's CifarLoader loads: uint8 [N, 32, 32, 3] HWC images and int64 labels.
"$PY" - "$WORK/air/cifar10" "$mini" << 'EOF' || fail "cifar10/*.pt do not hold the binaries' records"
import sys, numpy as np, torch
d, cifar = sys.argv[1], sys.argv[2]
for name, files in (("train", 5), ("test", 1)):
    t = torch.load(f"{d}/{name}.pt")
    assert t["images"].dtype == torch.uint8 and t["labels"].dtype == torch.int64
    assert tuple(t["images"].shape) == (30 * files, 32, 32, 3), t["images"].shape
    assert t["classes"][0] == "airplane" and len(t["classes"]) == 10, t["classes"]
    first = np.fromfile(f"{cifar}/{'data_batch_1' if name == 'train' else 'test_batch'}.bin",
                        dtype=np.uint8)[:3073]
    assert t["labels"][0].item() == first[0]
    # Pixel (row 5, column 7) of the first image, channels R, G, B.
    want = [first[1 + c * 1024 + 5 * 32 + 7] for c in range(3)]
    assert t["images"][0, 5, 7].tolist() == want, (t["images"][0, 5, 7], want)
EOF

# An airbench that dies before its evaluation.
echo 'print("| run | epoch | tta_val_acc |"); raise SystemExit(1)' > "$WORK/dead_airbench.py"
if "${T2A[@]}" airbench --tool airbench94 --seed 2 --out "$WORK/air.jsonl" --workdir "$WORK/air" \
  --cifar "$mini" -- "$PY" "$WORK/dead_airbench.py" 2> "$WORK/dead.err"; then
  fail "an airbench run without an evaluation row was accepted"
fi
grep -q "ended without a final evaluation row; see .*airbench94.2.log" "$WORK/dead.err" ||
  { cat "$WORK/dead.err"; fail "the error does not name the log"; }

# --- our side, with a stand-in ddp_train ----------------------------------------------------------
cat > "$WORK/fake_ddp_train" << 'EOF'
#!/usr/bin/env bash
# Records its arguments, then trains for a moment.
echo "$@" >> "$(dirname "$0")/fake_args"
echo "epoch 1/1 | train loss 1.0"
sleep 0.4
seed=0; prev=""
for a in "$@"; do [ "$prev" = --train.seed ] && seed=$a; prev=$a; done
echo "final test accuracy: 9$seed.25% (10000 samples), test loss 0.3000, weights digest 0123456789abcdef"
EOF
chmod +x "$WORK/fake_ddp_train"
"${T2A[@]}" ours --seed 3 --out "$WORK/ours.jsonl" -- "$WORK/fake_ddp_train" --train.seed 3 ||
  fail "the ddp_train driver failed"
"$PY" - "$WORK/ours.jsonl" << 'EOF' || fail "the ddp_train record is wrong"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["tool"] == "ddp_train" and r["seed"] == 3 and abs(r["accuracy"] - 0.9325) < 1e-12, r
assert 0.4 <= r["wall_s"] < 10, r
EOF
printf '#!/usr/bin/env bash\necho "epoch 1/1"\nexit 3\n' > "$WORK/failing_ddp_train"
chmod +x "$WORK/failing_ddp_train"
if "${T2A[@]}" ours --seed 4 --out "$WORK/ours.jsonl" -- "$WORK/failing_ddp_train" 2> "$WORK/fail.err"; then
  fail "a failing ddp_train run was accepted"
fi
grep -q "exited 3 without a final accuracy; see .*ours.4.log" "$WORK/fail.err" ||
  { cat "$WORK/fail.err"; fail "the error does not say why"; }

# --- the whole script, ddp_train only -------------------------------------------------------------
PYTHON=$PY bash "$SRC/bench/time_to_accuracy.sh" --seeds 2 --bin "$WORK/fake_ddp_train" \
  --data "$CIFAR" --out "$WORK/t2a" --precision fp32 -- --train.epochs 1 > "$WORK/t2a.out" ||
  { cat "$WORK/t2a.out"; fail "bench/time_to_accuracy.sh failed"; }
cat "$WORK/t2a.out"
[ "$(wc -l < "$WORK/t2a/results.jsonl")" = 2 ] || fail "not one result per seed"
grep -q -- "--config $SRC/configs/cifar10_speedrun.toml --data.root $(cd "$CIFAR" && pwd) --train.seed 1 " "$WORK/fake_args" ||
  { cat "$WORK/fake_args"; fail "ddp_train was not given the recipe, the data and the seed"; }
grep -q -- "--train.seed 2 .* --train.epochs 1$" "$WORK/fake_args" || fail "the extra arguments were not passed"
grep -q "| ddp_train | 2 | " "$WORK/t2a/table.md" || fail "no table row for ddp_train"

# --- the table on recorded results ------------------------------------------------------------
cat > "$WORK/recorded.jsonl" << 'EOF'
{"tool": "ddp_train", "seed": 1, "wall_s": 3.10, "accuracy": 0.9405}
{"tool": "airbench94", "seed": 1, "wall_s": 9.50, "accuracy": 0.9401, "airbench_s": 3.9}
{"tool": "ddp_train", "seed": 2, "wall_s": 3.30, "accuracy": 0.9411}
{"tool": "airbench94", "seed": 2, "wall_s": 9.10, "accuracy": 0.9398, "airbench_s": 3.8}
{"tool": "ddp_train", "seed": 3, "wall_s": 2.90, "accuracy": 0.9390}
{"tool": "airbench94", "seed": 3, "wall_s": 9.30, "accuracy": 0.9407, "airbench_s": 3.85}
EOF
"${T2A[@]}" table "$WORK/recorded.jsonl" > "$WORK/table.md"
cat "$WORK/table.md"
# mean and sample sd with awk: ddp_train wall 3.10 ± 0.20, accuracy 94.02 ± 0.11;
# airbench94 wall 9.30 ± 0.20, ratio 9.30 / 3.10 = 3.00.
row() { grep "^| $1 |" "$WORK/table.md"; }
want=$(printf '3.10 2.90 3.30\n' | awk '{ m = ($1 + $2 + $3) / 3; s = sqrt((($1-m)^2 + ($2-m)^2 + ($3-m)^2) / 2); printf "%.2f ± %.2f [%.2f, %.2f]", m, s, $2, $3 }')
row ddp_train | grep -qF "| 3 | $want |" || fail "ddp_train's wall-time cell is not '$want'"
row ddp_train | grep -qF "| 94.02 ± 0.11 [93.90, 94.11] | 1.00x |" || fail "ddp_train's accuracy cell is wrong"
row airbench94 | grep -qF "| 9.30 ± 0.20 [9.10, 9.50] |" || fail "airbench94's wall-time cell is wrong"
row airbench94 | grep -qF "| 3.00x |" || fail "airbench94's ratio to ddp_train is wrong"
pass "time_to_accuracy: airbench and ddp_train timed to their final accuracy, the data, the table"
