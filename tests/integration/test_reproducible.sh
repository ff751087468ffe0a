#!/usr/bin/env bash
# train.reproducible (issue 30): the summary's weights_digest is equal, bit for bit, for
#   1 rank x 2 threads, 1 rank x 1 thread, 2 ranks x 1 thread, 3 ranks with rank_shares [3, 1, 2],
#   and a 2-rank run killed with kill -9 mid-epoch, resumed on 3 ranks
# for ResNet-20 with batch norm (real CIFAR-10, 1 epoch of 2,560 samples, global batch 128,
# augmentation on), LeNet, and a graph with add and concat whose batch norms are synced over the
# global batch (model.sync_batchnorm) and whose dropout masks follow the samples. The exact sums
# make the loss and accuracy equal too. A mid-epoch snapshot is what a killed run resumes from:
# the 2-rank run is stopped once by SIGUSR1 (a snapshot mid-epoch), resumed on 2 ranks and killed
# there with kill -9 mid-epoch, then resumed on 3 ranks from the newest snapshot. A gradient that
# turns inf is named (tensor, step, chunk), and settings that contradict chunks are refused.
# The samples are real CIFAR-10 ones, taken from a copy of the first 1,024 records of each training
# file and the first 1,000 of the test file (dataset_head.py: ddp_train reads every record of its
# files before it takes the subset, and this test starts 45 ranks); which real samples make up the
# 2,560 matters to none of the equalities. The test figures come from 128 of the test samples (an
# evaluation of 500 took a tenth of each ResNet-20 run; the exact sums are the same code for both).
source "$(dirname "$0")/lib.sh"
[ -f "$CIFAR/test_batch.bin" ] || skip "real CIFAR-10 not found at $CIFAR"

/usr/bin/python3 "$SRC/tests/integration/dataset_head.py" cifar10 "$CIFAR" "$WORK/cifar" 1024 1000 \
  || fail "could not copy the first CIFAR-10 samples"

cat > "$WORK/graph.toml" <<'TOML'
[data]
dataset = "cifar10"
augment = true
crop_padding = 4
normalize = "config"
mean = [0.5]
std = [0.5]
[model]
sync_batchnorm = true
[[model.layers]]
type = "conv2d"
name = "stem"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "batchnorm"
[[model.layers]]
type = "relu"
name = "stem_relu"
[[model.layers]]
type = "conv2d"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "batchnorm"
[[model.layers]]
type = "relu"
[[model.layers]]
type = "conv2d"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "batchnorm"
name = "b1_bn2"
[[model.layers]]
type = "add"
inputs = ["b1_bn2", "stem_relu"]
[[model.layers]]
type = "relu"
name = "b1_out"
[[model.layers]]
type = "conv2d"
name = "down"
out_channels = 16
kernel = 3
stride = 2
padding = 1
[[model.layers]]
type = "conv2d"
name = "shortcut"
input = "b1_out"
out_channels = 8
kernel = 1
stride = 2
[[model.layers]]
type = "concat"
inputs = ["down", "shortcut"]
[[model.layers]]
type = "batchnorm"
[[model.layers]]
type = "relu"
[[model.layers]]
type = "dropout"
p = 0.1
[[model.layers]]
type = "global_avgpool"
[[model.layers]]
type = "linear"
out_features = 10
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
TOML

base=(--data.root "$WORK/cifar" --data.train_limit 2560 --data.test_limit 128 --train.epochs 1
      --train.global_batch 128 --train.reproducible true --run.tensorboard false --run.log_every 1)
declare -A model_args=(
  [resnet20]="--config $SRC/configs/cifar_resnet20.toml"
  [lenet]="--config $SRC/configs/cifar.toml"
  [graph]="--config $WORK/graph.toml")

# run NAME MODEL NP THREADS ARGS...: trains in $WORK/NAME (log: $WORK/NAME.log).
run() {
  local name=$1 model=$2 np=$3 threads=$4; shift 4
  # shellcheck disable=SC2086 # model_args holds words
  mpirun_local -np "$np" "$BIN" ${model_args[$model]} "${base[@]}" --runtime.threads "$threads" \
    --run-dir "$WORK/$name" "$@" >> "$WORK/$name.log" 2>&1
}
digest() { summary_field "$WORK/$1/metrics.jsonl" weights_digest; }
# The epoch's figures that exact sums make independent of the ranks (the test loss is reduced in
# double, not exactly: left out).
figures() { grep '"epoch"' "$WORK/$1/metrics.jsonl" | grep -o '"\(train_loss\|train_acc\|test_acc\)": [^,]*'; }

source "$SRC/tests/integration/lib_cpu_quota.sh"
quota_cg=$(cpu_quota_group 0.3) && cpu_quota_add "$quota_cg" || quota_cg=""
in_quota() { (cpu_quota_add "$quota_cg" "$BASHPID" && "$@"); }

for model in resnet20 lenet graph; do
  run "$model.1x2" $model 1 2 || { cat "$WORK/$model.1x2.log"; fail "$model: 1 rank x 2 threads failed"; }
  ref=$(digest "$model.1x2")
  [ -n "$ref" ] || fail "$model: no weights digest in the summary"
  grep -q "^reproducible: " "$WORK/$model.1x2.log" || fail "$model: no reproducible line at start-up"
  for case in "1x1 1 1" "2x1 2 1" "3x1-shares 3 1 --train.rank_shares 3,1,2"; do
    set -- $case
    name="$model.$1" np=$2 threads=$3; shift 3
    run "$name" $model "$np" "$threads" "$@" || { cat "$WORK/$name.log"; fail "$name failed"; }
    d=$(digest "$name")
    [ "$d" = "$ref" ] || fail "$name: weights digest $d, 1 rank x 2 threads gave $ref"
    diff <(figures "$model.1x2") <(figures "$name") > /dev/null \
      || fail "$name: loss or accuracy differ from 1 rank x 2 threads: $(figures "$name" | tr '\n' ' ')"
  done

  k="$model.kill"
  # The stopped and killed runs of the small models train at a CPU quota (0.3 CPU for both ranks,
  # where this machine can set one): their 20 steps then take a second or more, not the ~0.1 s
  # that a busy machine's test shell could miss three times running (what they compute is the
  # same). resnet20's steps are slow enough as they are.
  quota=()
  [ "$model" = resnet20 ] || [ -z "$quota_cg" ] || quota=(in_quota)
  for attempt in 1 2 3; do
    rm -rf "$WORK/$k" && : > "$WORK/$k.log"
    # 2 ranks: a stop request mid-epoch leaves a mid-epoch snapshot (exit 75).
    "${quota[@]}" run "$k" $model 2 1 & job=$!
    seen_now "$WORK/$k.log" "^\[.*\] step [1-9]/20 " || { cat "$WORK/$k.log"; fail "$k: no progress"; }
    # Held at once, signalled, let go: the request is taken at the next step, mid-epoch.
    pids=$(rank_pids "$WORK/$k")
    kill -STOP $pids 2> /dev/null || true
    kill -USR1 $pids 2> /dev/null || true
    kill -CONT $pids 2> /dev/null || true
    set +e; wait $job; rc=$?; set -e
    # (On a busy machine the hold, here or below, may land after the epoch's last step: a small
    # model's steps take milliseconds. That is no stop mid-epoch: the whole sequence again.)
    if [ "$rc" = 0 ] && ls "$WORK/$k" | grep -q '^snapshot_e0001'; then
      [ "$attempt" -lt 3 ] || fail "$k: the run finished before SIGUSR1, 3 times"
      echo "  $k: the hold came after the epoch's end (attempt $attempt); again"
      continue
    fi
    [ "$rc" = 75 ] || { cat "$WORK/$k.log"; fail "$k: exit code $rc after SIGUSR1, expected 75"; }
    mid=$(ls "$WORK/$k" | grep -E '^snapshot_e0000_s[0-9]+\.h5$' || true)
    [ -n "$mid" ] || fail "$k: no mid-epoch snapshot: $(ls "$WORK/$k")"
    # Resumed on 2 ranks, killed with kill -9 a few steps later, still mid-epoch.
    : > "$WORK/$k.log"
    "${quota[@]}" run "$k" $model 2 1 --train.resume auto & job=$!
    seen_now "$WORK/$k.log" "^\[.*\] step [0-9]*/20 " || { cat "$WORK/$k.log"; fail "$k: no progress after the resume"; }
    # Every rank held where it is at once (LeNet's steps take milliseconds: a kill after a poll
    # could land after the epoch's end), then one killed; the other goes on into the dead rank.
    pids=$(rank_pids "$WORK/$k")
    kill -STOP $pids 2> /dev/null || true
    victim=$(echo "$pids" | tail -1)
    [ -n "$victim" ] || fail "$k: no rank process to kill"
    kill -9 "$victim"
    kill -CONT $pids 2> /dev/null || true
    set +e; wait $job; rc=$?; set -e
    if ls "$WORK/$k" | grep -q '^snapshot_e0001'; then
      [ "$attempt" -lt 3 ] || fail "$k: the killed run finished anyway, 3 times (kill came too late)"
      echo "  $k: the hold came after the epoch's end (attempt $attempt); again"
      continue
    fi
    [ "$rc" != 0 ] || fail "$k: the job survived the death of a rank"
    break
  done
  # Resumed on 3 ranks from the newest snapshot, the mid-epoch one of the 2-rank run.
  : > "$WORK/$k.log"
  run "$k" $model 3 1 --train.resume auto || { cat "$WORK/$k.log"; fail "$k: resume on 3 ranks failed"; }
  grep -q "resume: .*$mid (epoch 0, step [0-9]*, written by 2 rank(s))" "$WORK/$k.log" \
    || { cat "$WORK/$k.log"; fail "$k: did not resume from $mid"; }
  d=$(digest "$k")
  [ "$d" = "$ref" ] || fail "$k: weights digest $d after kill -9 and a resume on 3 ranks, expected $ref"
  echo "  $model: $ref on 1x2, 1x1, 2x1, 3 ranks [3, 1, 2], and 2 ranks -> kill -9 -> 3 ranks"
done

# A gradient that turns inf is found by the exact sum and named (without loss scaling, the run
# stops): rank 1 holds chunks 2 and 3 of LeNet's global batch.
set +e
DDP_FAULT_INF_GRAD=1:2 mpirun_local -x DDP_FAULT_INF_GRAD -np 2 "$BIN" ${model_args[lenet]} \
  "${base[@]}" --runtime.threads 1 --run-dir "$WORK/inf" > "$WORK/inf.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "a non-finite gradient did not stop the run"
grep -Eq "the gradient of conv1\.(weight|bias) is not finite \((NaN|inf)\) at global step 2, first in chunk 2 of the global batch" \
  "$WORK/inf.log" || { cat "$WORK/inf.log"; fail "the non-finite gradient was not named"; }

# Chunks that do not divide the global batch are refused, naming the keys.
set +e
"$BIN" ${model_args[lenet]} "${base[@]}" --train.chunk 48 --run-dir "$WORK/bad" > "$WORK/bad.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "train.chunk = 48 with a global batch of 128 was accepted"
grep -q "train.chunk = 48 does not divide the global batch of 128" "$WORK/bad.log" \
  || { cat "$WORK/bad.log"; fail "no clear refusal of train.chunk = 48"; }
pass "reproducible: equal weights digests over ranks, shares, threads and kill -9 + resume"
