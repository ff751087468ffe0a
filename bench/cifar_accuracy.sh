#!/usr/bin/env bash
# ResNet-20 on real CIFAR-10, trained with the same recipe by ddp_train (configs/cifar_resnet20.toml)
# and by PyTorch 1.13 (bench/torch_cifar_recipe.py), side by side: each epoch's test accuracy and
# the difference at the end. Slow (each side trains EPOCHS full epochs on the CPU): a benchmark, not
# a test. The runs are sequential, so run it on a quiet machine or under `nice` when only the
# accuracies matter.
#
#   bench/cifar_accuracy.sh BUILD_DIR            # EPOCHS=5 THREADS=2 SEED=42 by default
#
# AGAINST=reproducible compares ddp_train's default mode with train.reproducible = true (chunks of
# CHUNK=32 samples, ghost batch norm, exact sums; issue 30) instead of PyTorch: the same recipe,
# seed and data, the second side's test accuracy should be within 0.5 points. LIMIT=N trains on
# the first N samples only (a shorter check; 0 = all 50,000).
set -euo pipefail
BUILD=${1:?usage: bench/cifar_accuracy.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
DATA=${DATA:-$SRC/../shared/data/cifar-10-batches-bin}
EPOCHS=${EPOCHS:-5}
THREADS=${THREADS:-2}
SEED=${SEED:-42}
AGAINST=${AGAINST:-torch}
CHUNK=${CHUNK:-32}
LIMIT=${LIMIT:-0}
[[ -f "$DATA/data_batch_1.bin" ]] || { echo "no CIFAR-10 at $DATA (set DATA=)"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# ddp RUN_NAME ARGS...: trains the recipe, prints each epoch's figures as JSON lines
ddp() {
  local name=$1; shift
  "$BUILD/ddp_train" --config "$SRC/configs/cifar_resnet20.toml" --data.root "$DATA" \
    --run.dir "$WORK/$name" --train.epochs "$EPOCHS" --train.seed "$SEED" \
    --data.train_limit "$LIMIT" --runtime.threads "$THREADS" --train.save_every 0 "$@" \
    >"$WORK/$name.log"
  python3 - "$WORK/$name/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "epoch" in r and "test_acc" in r:
        print(json.dumps({"epoch": r["epoch"], "train_loss": r["train_loss"],
                          "test_acc": r["test_acc"], "epoch_s": r["epoch_s"]}))
PY
}

echo "== ddp_train: configs/cifar_resnet20.toml, $EPOCHS epochs, 1 rank x $THREADS threads" \
  "(train_limit $LIMIT)"
ddp run | tee "$WORK/ddp.jsonl"

if [[ $AGAINST == reproducible ]]; then
  other="reproducible"
  echo "== ddp_train, train.reproducible = true, train.chunk = $CHUNK: the same recipe"
  ddp repro --train.reproducible true --train.chunk "$CHUNK" | tee "$WORK/torch.jsonl"
else
  other="torch"
  [[ $LIMIT == 0 ]] || { echo "LIMIT applies to AGAINST=reproducible only"; exit 2; }
  echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'): the same recipe"
  (cd "$HERE" && /usr/bin/python3 torch_cifar_recipe.py --data "$DATA" --epochs "$EPOCHS" \
    --threads "$THREADS" --seed "$SEED") | tee "$WORK/torch.jsonl"
fi

python3 - "$WORK/ddp.jsonl" "$WORK/torch.jsonl" "$other" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
t = [json.loads(l) for l in open(sys.argv[2])]
o = sys.argv[3]
print(f"{'epoch':>5} {'ddp_train acc':>14} {o + ' acc':>16} {'ddp loss':>9} {o + ' loss':>17}")
for a, b in zip(d, t):
    print(f"{a['epoch']:>5} {100*a['test_acc']:>13.2f}% {100*b['test_acc']:>15.2f}% "
          f"{a['train_loss']:>9.4f} {b['train_loss']:>17.4f}")
diff = 100 * (d[-1]["test_acc"] - t[-1]["test_acc"])
print(f"final test accuracy: ddp_train {100*d[-1]['test_acc']:.2f}% vs {o} "
      f"{100*t[-1]['test_acc']:.2f}% ({diff:+.2f} points)")
PY
