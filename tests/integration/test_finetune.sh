#!/usr/bin/env bash
# Fine-tuning end to end (issue 31; docs/finetuning.md's worked example, scaled down to 32x32 CIFAR
# images and the cifar stem), over 2 MPI ranks:
#  - a torchvision resnet18 of 10 classes (random weights, seeded; running statistics of real
#    images) saved with torch.save(state_dict), imported with scripts/torch_to_snapshot.py;
#  - 5 classes of real CIFAR-10 images (12 train, 4 test images each) as an image folder, packed
#    (pack --format imagefolder);
#  - run A: configs/finetune_resnet18.toml with train.init = the import and train.freeze = all but
#    fc, 1 epoch: the start-up line names the re-initialised head and the file's head left out;
#    the freeze line says that only fc's gradients travel (1 bucket of fc's 2576 floats, of the
#    model's 11 million); after the epoch every frozen tensor and its running statistics are
#    bitwise the import's; run.json and the snapshot record init_from;
#  - run B: train.init = run A's snapshot (same classes: every tensor loaded), 2 epochs: every
#    frozen tensor still bitwise the import's, fc changed after 1 epoch; [[optim.groups]] in play;
#  - run C: run B's first snapshot resumed for epoch 2 gives run B's final weights bitwise (a run
#    with frozen parameters resumes exactly);
#  - the fine-tuned model evaluates and exports (export --snapshot ... --format onnx);
#  - bad input: a freeze pattern that matches nothing, a frozen batch norm in eval mode above a
#    trained layer, a train.init whose tensors differ outside the head (the imagenet stem), a
#    group that matches nothing - each a clear error naming the pattern or tensor.
# The comparisons of snapshots (torch_import.py same) read them with h5py and import no torch;
# torch is imported once, to save the model and import it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python torch torchvision h5py numpy PIL
[ -f "$CIFAR/test_batch.bin" ] || skip "no CIFAR-10 at $CIFAR"
command -v mpirun > /dev/null || skip "no mpirun"
HELP="$SRC/tests/integration/torch_import.py"
cd "$WORK"
mkdir -p weights data

# --- the weights: torchvision's resnet18, 10 classes, imported ---
# One python process (an `import torch` costs seconds): the model saved, then imported by
# torch_to_snapshot.py's main() with that command line (torch_import.py cli; test_torch_import.sh
# runs the same command as a process of its own).
"$PY" "$HELP" save resnet18 10 cifar "$CIFAR" resnet18.pth \
  -- cli import.log resnet18.pth weights/resnet18.h5 --preset resnet18 || fail "saving the torch model"
[ "$(tail -n 1 import.log)" = "exit 0" ] || { cat import.log; fail "torch_to_snapshot.py failed"; }

# --- the photos: 5 classes of CIFAR-10 as PNG folders (12 train, 4 test images each) ---
# 60 training images: 3 steps of 2 ranks x 10 per epoch. What is checked (the frozen tensors
# bitwise the import's, fc changed, the exact resume) holds after any number of steps: more images
# only cost forwards through the frozen resnet18 (they were 24 and 10 per class: the trainings'
# CPU-seconds were mostly those forwards).
"$PY" - "$CIFAR" << 'EOF' || fail "writing the image folders"
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
names = ["airplane", "automobile", "bird", "cat", "deer"]
for split, file, per_class in (("train", "data_batch_1.bin", 12), ("test", "test_batch.bin", 4)):
    rec = np.frombuffer(open(os.path.join(root, file), "rb").read(), np.uint8).reshape(-1, 3073)
    for c, name in enumerate(names):
        os.makedirs(f"photos/{split}/{name}", exist_ok=True)
        for i, r in enumerate(rec[rec[:, 0] == c][:per_class]):
            Image.fromarray(r[1:].reshape(3, 32, 32).transpose(1, 2, 0)).save(f"photos/{split}/{name}/{i:03d}.png")
EOF
for split in train test; do
  "$BIN" pack --format imagefolder --input photos/$split --output data/$split.h5 --size 32x32 > pack.log 2>&1 ||
    { cat pack.log; fail "pack --format imagefolder $split"; }
done

# --- run A: the 10-class import, a new 5-class head, everything but fc frozen ---
FREEZE='conv1,bn1,layer1,layer2,layer3,layer4'
SMALL=(--model.stem cifar --data.train_size 0 --train.batch_size 10 --train.freeze "$FREEZE"
       --data.mean 0.5 --data.std 0.5 --run.tensorboard false)
mpirun_local -np 2 "$BIN" --config "$SRC/configs/finetune_resnet18.toml" "${SMALL[@]}" --train.epochs 1 \
  --run-dir runA > runA.log 2>&1 || { cat runA.log; fail "run A (fine-tune from the import) failed"; }
grep -q "^init: 100 tensors loaded from weights/resnet18.h5 (weights imported from $WORK/resnet18.pth); re-initialised (the classes differ): fc.weight \[5, 512\], fc.bias \[5\]; left out of the file: fc.weight \[10, 512\], fc.bias \[10\]$" runA.log ||
  { cat runA.log; fail "run A: no start-up line naming the re-initialised head"; }
grep "^init:" runA.log
# fc.weight 5 x 512 = 2560 floats, fc.bias 5 floats padded to 16: 2576 travel, nothing frozen does.
grep -q "^freeze: 60 of 62 parameter tensors frozen (11168832 values; 20 batch norms in eval mode); 2565 values train; all-reduced per step: 2576 floats in 1 bucket (of " runA.log ||
  { cat runA.log; fail "run A: the freeze line does not say that only fc's gradients travel"; }
grep "^freeze:" runA.log
"$PY" "$HELP" same weights/resnet18.h5 runA/snapshot_e0001.h5 fc. ||
  fail "run A: a frozen tensor changed (or the head did not)"
grep -q "\"init_from\": \"weights/resnet18.h5\"" runA/run.json || { cat runA/run.json; fail "run.json does not record init_from"; }
"$BIN" inspect runA/snapshot_e0001.h5 > inspect.log || fail "inspect of run A's snapshot failed"
grep -q '/meta/init_from *"weights/resnet18.h5"' inspect.log || { cat inspect.log; fail "the snapshot does not record init_from"; }

# --- run B: from run A's snapshot (5 classes: every tensor loaded), 2 epochs, fc at 10x lr ---
mpirun_local -np 2 "$BIN" --config "$SRC/configs/finetune_resnet18.toml" "${SMALL[@]}" --train.epochs 2 \
  --train.save_every 1 --train.init runA/snapshot_e0001.h5 --run-dir runB > runB.log 2>&1 ||
  { cat runB.log; fail "run B (from a ddp_train snapshot) failed"; }
grep -q "^init: 102 tensors loaded from runA/snapshot_e0001.h5 (a ddp_train snapshot): every tensor of the model$" runB.log ||
  { cat runB.log; fail "run B: the start-up line does not say every tensor was loaded"; }
"$PY" "$HELP" same runA/snapshot_e0001.h5 runB/snapshot_e0001.h5 fc. ||
  fail "run B: after 1 epoch a frozen tensor changed, or fc did not"
"$PY" "$HELP" same weights/resnet18.h5 runB/snapshot_e0002.h5 fc. > /dev/null ||
  fail "run B: after 2 epochs a frozen tensor is not the import's"

# --- run C: run B's first snapshot resumed for the second epoch: run B's weights, bitwise ---
mpirun_local -np 2 "$BIN" --config "$SRC/configs/finetune_resnet18.toml" "${SMALL[@]}" --train.epochs 2 \
  --train.save_every 1 --train.init runA/snapshot_e0001.h5 --run-dir runC --train.resume runB/snapshot_e0001.h5 \
  > runC.log 2>&1 || { cat runC.log; fail "run C (resuming a run with frozen parameters) failed"; }
grep -q "^init:" runC.log && fail "run C: a resume loaded train.init"
digest() { grep -o 'weights digest [0-9a-f]*' "$1"; }
[ "$(max_rel_diff runB/snapshot_e0002.h5 runC/snapshot_e0002.h5)" = 0.000e+00 ] && [ "$(digest runB.log)" = "$(digest runC.log)" ] ||
  { "$BIN" diff runB/snapshot_e0002.h5 runC/snapshot_e0002.h5; fail "run C: the resumed run's weights differ from run B's"; }
"$BIN" inspect runC/snapshot_e0002.h5 > inspect.log || fail "inspect of run C's snapshot failed"
grep -q '/meta/init_from *"runA/snapshot_e0001.h5"' inspect.log || { cat inspect.log; fail "run C: the resumed run lost init_from"; }
echo "run C: resumed from epoch 1, the same weights as run B bitwise"

# --- the fine-tuned model: eval and export ---
"$BIN" eval --snapshot runB/snapshot_e0002.h5 --data.test_file data/test.h5 > eval.log 2>&1 ||
  { cat eval.log; fail "eval of the fine-tuned snapshot failed"; }
grep -q "(20 samples)" eval.log || { cat eval.log; fail "eval did not evaluate the 20 test images"; }
"$BIN" export --snapshot runB/snapshot_e0002.h5 --format onnx --output model.onnx > export.log 2>&1 ||
  { cat export.log; fail "export of the fine-tuned snapshot failed"; }
[ -s model.onnx ] || fail "no model.onnx"

# --- bad input ---
expect_error() {  # expect_error WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  if "$BIN" --config "$SRC/configs/finetune_resnet18.toml" "${SMALL[@]}" --train.epochs 1 --run-dir bad \
    --run.overwrite true "$@" > bad.log 2>&1; then cat bad.log; fail "$what: it trained"; fi
  grep -q -- "$pattern" bad.log || { cat bad.log; fail "$what: the error does not say '$pattern'"; }
  echo "  $what: $(grep -m1 -- "$pattern" bad.log)"
}
expect_error "a freeze pattern that matches nothing" "train.freeze: 'layer9' matches no parameter" --train.freeze layer9,fc.bias
expect_error "everything frozen" "train.freeze freezes every parameter" --train.freeze "conv,linear,bn"
expect_error "eval-mode batch norm above a trained layer" \
  "batch norm 'bn1' is frozen and so normalises with its running statistics (eval mode), but 'conv1' below it trains" --train.freeze bn
expect_error "init tensors that differ outside the head" \
  "conv1.weight: the file has \[64, 3, 3, 3\], the model needs \[64, 3, 7, 7\]" --model.stem imagenet --data.train_size 64
sed 's/^match = \["fc.\*"\]/match = ["head.*"]/' "$SRC/configs/finetune_resnet18.toml" > bad_groups.toml
if "$BIN" --config bad_groups.toml "${SMALL[@]}" --train.epochs 1 --run-dir bad2 > bad.log 2>&1; then
  fail "a group that matches nothing: it trained"
fi
grep -q "optim.groups\[.\] (line [0-9]*): 'head.\*' matches no parameter" bad.log || { cat bad.log; fail "a group that matches nothing: no clear error"; }
pass "fine-tune from a 10-class import: head re-initialised, frozen tensors bitwise unchanged over 2 ranks, only fc's gradients all-reduced, exact resume, eval and export"
