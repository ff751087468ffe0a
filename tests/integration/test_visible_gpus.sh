#!/usr/bin/env bash
# scripts/visible_gpus.sh, the count the GPU test launchers start one rank per GPU with, honours
# CUDA_VISIBLE_DEVICES as the CUDA runtime does. No GPU here: nvidia-smi is replaced by a script
# that lists 4 GPUs (one with a MIG instance) in the driver's format.
source "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/bin"
cat > "$WORK/bin/nvidia-smi" <<'SMI'
#!/bin/sh
[ "$1" = -L ] || exit 9
cat <<'L'
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-11111111-aaaa-bbbb-cccc-000000000000)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-22222222-aaaa-bbbb-cccc-000000000000)
  MIG 1g.10gb     Device  0: (UUID: MIG-33333333-aaaa-bbbb-cccc-000000000000)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-44444444-aaaa-bbbb-cccc-000000000000)
GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-45555555-aaaa-bbbb-cccc-000000000000)
L
SMI
chmod +x "$WORK/bin/nvidia-smi"
count() {  # count VALUE|unset
  if [ "$1" = unset ]; then
    env -u CUDA_VISIBLE_DEVICES PATH="$WORK/bin:$PATH" sh "$SRC/scripts/visible_gpus.sh"
  else
    env CUDA_VISIBLE_DEVICES="$1" PATH="$WORK/bin:$PATH" sh "$SRC/scripts/visible_gpus.sh"
  fi
}
check() {  # check VALUE EXPECTED WHY
  local got
  got=$(count "$1")
  [ "$got" = "$2" ] || fail "CUDA_VISIBLE_DEVICES='$1' ($3): counted $got GPUs, expected $2"
}
check unset 4 "all of the machine's GPUs"
check "" 0 "empty hides every GPU"
check -1 0 "an invalid first entry hides every GPU"
check 0 1 "one index"
check 2,3,0 3 "indices in any order"
check 0,7,1 1 "the list ends at an index out of range"
check 1,1 1 "a repeated GPU ends the list"
check GPU-2222 1 "a UUID prefix"
check GPU-4 0 "an ambiguous UUID prefix is invalid"
check GPU-4444,2 1 "a UUID and the index of the same GPU"
check MIG-3333 1 "a MIG instance"
check " 1, 2" 2 "blanks around entries"
# Without nvidia-smi (or a driver that answers), no GPU.
mkdir -p "$WORK/empty"
[ "$(env -u CUDA_VISIBLE_DEVICES PATH="$WORK/empty" /bin/sh "$SRC/scripts/visible_gpus.sh")" = 0 ] ||
  fail "no nvidia-smi: expected 0"
# The launchers use this count, not the machine's.
grep -q 'scripts/visible_gpus.sh' "$SRC/cmake/DdpCuda.cmake" || fail "DdpCuda.cmake counts GPUs otherwise"
grep -q 'scripts/visible_gpus.sh' "$SRC/tests/integration/test_cuda_training.sh" ||
  fail "test_cuda_training.sh counts GPUs otherwise"
pass "visible GPUs counted as CUDA sees them (indices, UUID/MIG prefixes, invalid, repeated, empty)"
