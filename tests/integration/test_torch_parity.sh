#!/usr/bin/env bash
# PyTorch parity of the torchvision presets (needs python3-torch, python3-torchvision, python3-h5py):
#  - resnet20 (32x32, label smoothing 0.1), resnet18 (16x16) and mobilenet_v2 (32x32), cifar stem, batch 4:
#    torchvision's weights written into a snapshot, one training forward/backward in ddp_train
#    (tests/tools/torch_parity_step) and in torch: logits, loss, every parameter gradient and the
#    batch-norm running statistics within 1e-4, as ||ours - torch||_2 / ||torch||_2 per tensor
#    (torch_parity.py, the three presets in one process);
#  - a resnet20 trained briefly on real CIFAR-10: scripts/snapshot_to_torch.py's test accuracy and
#    loss equal `ddp_train eval`'s (the same correct count of 500).
source "$(dirname "$0")/lib.sh"
TOOL="$(dirname "$BIN")/tests/torch_parity_step"
[ -x "$TOOL" ] || skip "tests/torch_parity_step is not built next to $BIN (DDP_BUILD_TESTS=ON builds it)"
# python3 may be another installation (pyenv) than Debian's, which has the packages. The modules
# are looked up, not imported (an `import torch` costs seconds; torch_parity.py imports them).
PY=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, sys.argv[1:])))" \
    torch torchvision h5py 2> /dev/null; then PY=$candidate; break; fi
done
[ -n "$PY" ] || skip "no python3 with torch, torchvision and h5py (apt install python3-torchvision python3-h5py)"

# The trained snapshot first (when CIFAR-10 is here), so that one python process (one `import
# torch` costs ~2.5 CPU-seconds) checks the three presets and then runs scripts/snapshot_to_torch.py
# on it. One thread everywhere: what is compared is arithmetic, not threading (OpenMP's spinning
# doubled the C++ tool's CPU time), and ddp_train's figures here are those of 2 threads.
have_cifar=0
[ -f "$CIFAR/test_batch.bin" ] && have_cifar=1
args=(--config "$SRC/configs/cifar_resnet20.toml" --data.root "$CIFAR" --data.train_limit 1024
      --data.test_limit 500 --train.epochs 1 --train.batch_size 64 --optim.lr 0.1 --runtime.threads 1)
snap="$WORK/run/snapshot_e0001.h5"
jobs=("$WORK/parity.log" "$SRC/tests/integration/torch_parity.py" "$TOOL" "$WORK" resnet20 32 4 0.1
      resnet18 16 4 0 mobilenet_v2 32 4 0)
if [ "$have_cifar" = 1 ]; then
  "$BIN" "${args[@]}" --run-dir "$WORK/run" > "$WORK/train.log" 2>&1 ||
    { cat "$WORK/train.log"; fail "training resnet20 failed"; }
  ours=$("$BIN" eval --snapshot "$snap" "${args[@]}" | grep "^test accuracy") || fail "ddp_train eval failed"
  jobs+=(-- "$WORK/theirs.log" "$SRC/scripts/snapshot_to_torch.py" "$snap" --data-root "$CIFAR")
fi
# (run_scripts.py: each script as its own process would run it, its output in LOG, status in LOG.rc)
OMP_NUM_THREADS=1 "$PY" "$SRC/tests/integration/run_scripts.py" "${jobs[@]}"
[ "$(cat "$WORK/parity.log.rc")" = 0 ] ||
  { cat "$WORK/parity.log"; fail "ddp_train and torch disagree (or the comparison could not run)"; }
reported='^(resnet20|resnet18|mobilenet_v2) [(]'
grep -E "$reported" "$WORK/parity.log"
[ "$(grep -cE "$reported" "$WORK/parity.log")" = 3 ] ||
  { cat "$WORK/parity.log"; fail "torch_parity.py did not report the three presets"; }

[ "$have_cifar" = 1 ] || skip "parity passed; the trained-snapshot check needs real CIFAR-10 at $CIFAR"
theirs=$(grep "^test accuracy" "$WORK/theirs.log" || true)
[ "$(cat "$WORK/theirs.log.rc")" = 0 ] && [ -n "$theirs" ] ||
  fail "snapshot_to_torch.py failed: $(cat "$WORK/theirs.log")"
echo "  ddp_train eval:       $ours"
echo "  snapshot_to_torch.py: $theirs"
# "test accuracy: 20.20% (500 samples), loss 2.1106" vs "test accuracy: 20.20% (101 of 500 correct),
# loss 2.1106": the percentage of 500 samples is the correct count.
acc() { sed -E 's/^test accuracy: ([0-9.]+)%.*/\1/' <<< "$1"; }
loss() { sed -E 's/.*loss ([0-9.]+)$/\1/' <<< "$1"; }
grep -q "(500 samples)" <<< "$ours" || fail "ddp_train eval did not evaluate 500 samples: $ours"
grep -q "of 500 correct" <<< "$theirs" || fail "snapshot_to_torch.py did not evaluate 500 samples"
[ "$(acc "$ours")" = "$(acc "$theirs")" ] || fail "test accuracy differs: $(acc "$ours")% vs $(acc "$theirs")%"
[ "$(loss "$ours")" = "$(loss "$theirs")" ] || fail "test loss differs: $(loss "$ours") vs $(loss "$theirs")"
# A model that predicts one class for everything would agree trivially.
ge "$(acc "$ours")" 15 || fail "the trained resnet20 is at $(acc "$ours")%: too close to chance to compare"
pass "resnet20, resnet18, mobilenet_v2 match torch within 1e-4; snapshot_to_torch.py reproduces ddp_train eval"
