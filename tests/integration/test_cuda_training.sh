#!/usr/bin/env bash
# Training on GPUs, end to end through the real binary (skipped, with the reason, without a GPU):
#  - runtime.device = cuda, 1 rank, the Fashion-MNIST recipe for 2 epochs against the same run on
#    the CPU: the same test-set count, accuracy within 1.5 points, epoch losses within 1%;
#  - with 2 or more GPUs: 2 ranks (gradients over NCCL) with the same global batch as the 1-GPU run:
#    the same accuracy within 1.5 points and epoch losses within 1%;
#  - the GPU run's snapshot resumes on the CPU for a third epoch, and the CPU run's on the GPU:
#    both continue where the other backend stopped (3 epoch records, accuracy still >= 80%).
source "$(dirname "$0")/lib.sh"
# lib.sh hides the GPUs from the CPU tests; this one needs them.
if [ -n "${DDP_CALLER_CUDA_VISIBLE_DEVICES+x}" ]; then
  export CUDA_VISIBLE_DEVICES="$DDP_CALLER_CUDA_VISIBLE_DEVICES"
else
  unset CUDA_VISIBLE_DEVICES
fi
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
"$BIN" --version | grep '^backends:.*, cuda (' > /dev/null || skip "this ddp_train was built without the CUDA backend"
# The GPUs this test's processes see (CUDA_VISIBLE_DEVICES honoured), not the machine's.
gpus=$(sh "$SRC/scripts/visible_gpus.sh")
[ "${gpus:-0}" -ge 1 ] || skip "no GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-}' hides them)"

common=(--config "$FASHION_CONFIG" --train.global_batch 256)
run() {  # run NAME NP DEVICE ARGS...
  local name=$1 np=$2 dev=$3; shift 3
  mpirun_local -np "$np" "$BIN" "${common[@]}" --runtime.device "$dev" --run-dir "$WORK/$name" \
    "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; fail "run $name failed"; }
}
acc() { summary_field "$WORK/$1/metrics.jsonl" final_test_acc; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

run cpu 1 cpu --train.epochs 2
run gpu 1 cuda --train.epochs 2
grep -q "device cuda" "$WORK/gpu.log" || fail "the cuda run did not report its device"
grep -q '"test_samples": 10000' "$WORK/gpu/metrics.jsonl" || fail "GPU run: test set not counted exactly"
close "$(acc gpu)" "$(acc cpu)" 0.015 || fail "GPU accuracy $(acc gpu) vs CPU $(acc cpu)"
paste <(losses_5sig "$WORK/cpu/metrics.jsonl") <(losses_5sig "$WORK/gpu/metrics.jsonl") |
  awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > 0.01) exit 1 }' ||
  fail "epoch losses differ by more than 1% between CPU and GPU"
echo "  1 GPU vs CPU: accuracy $(acc gpu) vs $(acc cpu)"

if [ "$gpus" -ge 2 ]; then
  # Same global batch over 2 GPUs (NCCL): the same training up to fp32 summation order, which
  # Adam's ~470 steps amplify; the outcome must agree like the CPU/GPU pair above.
  run gpu2 2 cuda --train.epochs 2
  close "$(acc gpu2)" "$(acc gpu)" 0.015 || fail "2 GPUs: accuracy $(acc gpu2) vs 1 GPU $(acc gpu)"
  paste <(losses_5sig "$WORK/gpu/metrics.jsonl") <(losses_5sig "$WORK/gpu2/metrics.jsonl") |
    awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > 0.01) exit 1 }' ||
    fail "epoch losses differ by more than 1% between 1 and 2 GPUs"
  echo "  2 GPUs (NCCL) vs 1 GPU: accuracy $(acc gpu2) vs $(acc gpu)"
fi

# Cross-backend resume: a third epoch on the other device.
run gpu 1 cpu --train.epochs 3 --resume auto
run cpu 1 cuda --train.epochs 3 --resume auto
for name in gpu cpu; do
  grep -q "^resume: .*snapshot_e0002.h5" "$WORK/$name.log" || fail "$name run did not resume"
  [ "$(grep -c '"epoch"' "$WORK/$name/metrics.jsonl")" = 3 ] || fail "$name: expected 3 epoch records"
  ge "$(acc $name)" 0.80 || fail "$name resumed on the other backend: accuracy $(acc $name)"
done
pass "GPU training matches the CPU; snapshots move between backends (gpu->cpu $(acc gpu), cpu->gpu $(acc cpu))"
