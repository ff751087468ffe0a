#!/usr/bin/env bash
# scripts/snapshot_to_torch.py beyond CIFAR-10 (issue 33, item 12):
#  - started by a python3 without h5py/torch (a venv, pyenv or conda python that
#    `#!/usr/bin/env python3` finds first), it says what to install, without a traceback;
#  - its command-line evaluation reads the datasets ddp_train reads: Fashion-MNIST (IDX, gzipped)
#    and a packed file, and scores what `ddp_train eval` scores (the same number of correct test
#    images; the previous version refused every dataset but CIFAR-10).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
SCRIPT="$SRC/scripts/snapshot_to_torch.py"
# A python3 without h5py, if this machine has one.
bare=""
for candidate in python3 python3.11 python3.12 python3.13; do
  p=$(command -v "$candidate" 2> /dev/null) || continue
  "$p" -c "import h5py" 2> /dev/null || { bare=$p; break; }
done
if [ -n "$bare" ]; then
  if "$bare" "$SCRIPT" /nonexistent.h5 > "$WORK/bare.log" 2>&1; then fail "$bare ran the script without h5py"; fi
  grep -q "cannot import" "$WORK/bare.log" && grep -q "pip install h5py" "$WORK/bare.log" \
    || { cat "$WORK/bare.log"; fail "no message saying what to install"; }
  ! grep -q "Traceback" "$WORK/bare.log" || { cat "$WORK/bare.log"; fail "a traceback instead of a message"; }
  echo "  $bare (no h5py): $(head -c 100 "$WORK/bare.log")..."
else
  echo "  every python3 here has h5py: the install message is not checked"
fi
source "$(dirname "$0")/pack/find_python.sh"
find_python h5py torch torchvision PIL numpy
"$PY" -c "import tomllib" 2> /dev/null || skip "$PY has no tomllib (Python < 3.11)"

# correct_of LOG: the number of correct test images in a line "... (K of N correct)" or eval's.
# (eval_every 2: the training evaluates the test set once, after its last epoch; epoch 1's
# evaluation was not looked at.)
score() {  # score NAME ARGS...: train resnet20 two epochs, then compare eval and the script
  local name=$1; shift
  "$BIN" --model.preset resnet20 --train.epochs 2 --train.eval_every 2 --train.batch_size 32 --runtime.threads 2 \
    --optim.lr 0.003 --run-dir "$WORK/$name" "$@" > "$WORK/$name.train.log" 2>&1 \
    || { cat "$WORK/$name.train.log"; fail "$name: training failed"; }
  local snap="$WORK/$name/snapshot_e0002.h5"
  "$BIN" eval --snapshot "$snap" --runtime.threads 2 --output-dir "$WORK/$name" > "$WORK/$name.eval.log" 2>&1 \
    || { cat "$WORK/$name.eval.log"; fail "$name: eval failed"; }
  local ours theirs
  ours=$(sed -n 's/^test accuracy: \([0-9.]*\)% (\([0-9]*\) samples), loss \([0-9.]*\).*/\1 \2 \3/p' "$WORK/$name.eval.log")
  theirs=$("$PY" "$SCRIPT" "$snap" --threads 2 2>&1) || fail "$name: snapshot_to_torch.py failed: $theirs"
  local got
  got=$(sed -n 's/^test accuracy: \([0-9.]*\)% (\([0-9]*\) of \([0-9]*\) correct), loss \([0-9.]*\).*/\1 \3 \4/p' <<< "$theirs")
  # The same images, the same count correct, the same mean loss (to its 4 printed decimals, 1e-4).
  read -r a1 n1 l1 <<< "$ours"
  read -r a2 n2 l2 <<< "$got"
  [ -n "$got" ] && [ "$a1 $n1" = "$a2 $n2" ] && awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; exit !(d < 2e-4 && d > -2e-4) }' \
    || fail "$name: ddp_train eval: $ours; snapshot_to_torch.py: $theirs"
  echo "  $name: ddp_train eval and snapshot_to_torch.py agree: accuracy $a1% of $n1, loss $l1 / $l2"
}
score fashion --config "$FASHION_CONFIG" --data.train_limit 512 --data.test_limit 128 \
  --data.limit_subset random
# A packed file of fixed-size images (pack --size), normalised with its own statistics.
mkdir -p "$WORK/imgs"
"$PY" "$SRC/tests/integration/pack/make_sizes.py" "$WORK/imgs" 8 3
"$BIN" pack --format imagefolder --input "$WORK/imgs" --size 32x32 --output "$WORK/p.h5" > "$WORK/pack.log" 2>&1 \
  || { cat "$WORK/pack.log"; fail "pack failed"; }
score packed --data.dataset packed --data.train_file "$WORK/p.h5" --data.test_file "$WORK/p.h5" \
  --data.normalize dataset
pass "snapshot_to_torch.py says what to install, and evaluates Fashion-MNIST and packed runs as ddp_train eval does"
