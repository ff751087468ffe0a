#!/bin/sh
# Prints how many GPUs a CUDA process started with this environment sees: the GPUs `nvidia-smi -L`
# lists, narrowed by CUDA_VISIBLE_DEVICES as the CUDA runtime reads it (a comma list of indices
# or GPU-/MIG- UUID prefixes; the first invalid, out-of-range or repeated entry ends the list, so
# "" and "-1" hide every GPU). 0 without nvidia-smi or a driver. The GPU test launchers start one
# rank per GPU with this count (cmake/DdpCuda.cmake, tests/integration/test_cuda_training.sh,
# scripts/gpu_check.sh): counting the machine's GPUs would over-subscribe a restricted job.
list=$(nvidia-smi -L 2> /dev/null) || { echo 0; exit 0; }
physical=$(printf '%s\n' "$list" | grep -c '^GPU ')
if [ -z "${CUDA_VISIBLE_DEVICES+x}" ]; then
  echo "$physical"
  exit 0
fi
count=0
seen=" "
old_ifs=$IFS
IFS=,
for entry in $CUDA_VISIBLE_DEVICES; do
  IFS=$old_ifs
  entry=$(printf '%s' "$entry" | tr -d ' \t')
  case $entry in
    GPU-*)
      # A UUID prefix that names exactly one GPU; the same GPU as its index for the repeat check.
      matches=$(printf '%s\n' "$list" | grep '^GPU ' | grep -n "(UUID: $entry" | cut -d: -f1)
      [ "$(printf '%s\n' "$matches" | grep -c .)" = 1 ] || break
      key="i$((matches - 1))"
      ;;
    MIG-*)
      [ "$(printf '%s\n' "$list" | grep -c "(UUID: $entry")" = 1 ] || break
      key="m$entry"
      ;;
    '' | *[!0-9]*) break ;;
    *)
      [ "$entry" -lt "$physical" ] || break
      key="i$((entry + 0))"
      ;;
  esac
  case $seen in *" $key "*) break ;; esac
  seen="$seen$key "
  count=$((count + 1))
done
IFS=$old_ifs
echo "$count"
