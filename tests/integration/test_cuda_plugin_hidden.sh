#!/usr/bin/env bash
# One binary for CPU-only and GPU nodes: ddp_train links no CUDA library, the CUDA backend is the
# plugin libddp_cuda.so beside it. Here, with the plugin's CUDA libraries hidden (a private mount
# namespace with an empty tmpfs over each directory holding them, as on a node without the
# toolkit), the plugin does not load and
#  - `ddp_train --version` says so and why (the dynamic loader's message),
#  - with a driver (the toolkit's stub libcuda), a short training with runtime.device = auto runs
#    on the CPU saying that the plugin did not load, and runtime.device = cuda is an error that
#    names the missing library; without one, they need no plugin (auto says no driver was found);
#    test_mpi_two_ranks.sh (run as it is, two MPI ranks) passes,
#  - doctor's devices check reports it.
# Without hiding, --version reports the plugin loaded from beside the binary.
source "$(dirname "$0")/lib.sh"
plugin="$(dirname "$BIN")/libddp_cuda.so"
[ -f "$plugin" ] || skip "no $plugin: this build has no CUDA backend (DDP_CUDA=OFF or the toolkit was not found)"
cuda_libs='libcudart|libcublas|libcudnn|libnccl'
if ldd "$BIN" | grep -E "$cuda_libs"; then fail "ddp_train itself links CUDA libraries"; fi
ldd "$plugin" | grep -E "libcudart" > /dev/null || fail "the plugin does not link libcudart: $(ldd "$plugin")"

"$BIN" --version > "$WORK/version" 2>&1 || { cat "$WORK/version"; fail "--version failed"; }
cat "$WORK/version"
grep -qF "plugin $(realpath "$plugin")" "$WORK/version" || fail "--version does not report the plugin loaded"
grep -q "cuDNN 9" "$WORK/version" || fail "--version lists no cuDNN version from the plugin"

[ "$(id -u)" = 0 ] || skip "hiding the CUDA libraries needs root (a private mount namespace)"
unshare -m true 2> /dev/null || skip "unshare -m is not permitted here (no CAP_SYS_ADMIN)"
# The directories the plugin's CUDA libraries come from (ldd, through symlinks), and the toolkit.
hide=$(ldd "$plugin" | awk -v re="$cuda_libs" '$0 ~ re && $3 ~ /^\// { print $3 }' |
       xargs -r -n1 realpath | xargs -r -n1 dirname | sort -u)
[ -d /usr/local/cuda ] && hide="$hide $(realpath /usr/local/cuda)"
for d in $hide; do
  [ -e "$d/libc.so.6" ] || [ -e "$d/libmpi.so" ] || [ -e "$d/libmpi.so.40" ] &&
    skip "the CUDA libraries share $d with system libraries: they cannot be hidden alone"
done
echo "hiding: $hide"
# hidden CMD ARGS...: runs CMD with an empty tmpfs over each directory of $hide.
hidden() {
  HIDE="$hide" unshare -m bash -c \
    'for d in $HIDE; do mount -t tmpfs -o size=1m ddp_hidden "$d" || exit 99; done; exec "$@"' \
    _ "$@"
}
hidden ldd "$plugin" > "$WORK/ldd" 2>&1 || true
grep -q "libcudart.*not found" "$WORK/ldd" || { cat "$WORK/ldd"; fail "the CUDA runtime is still found: not hidden"; }

hidden "$BIN" --version > "$WORK/version_hidden" 2>&1 ||
  { cat "$WORK/version_hidden"; fail "--version failed without the CUDA libraries"; }
cat "$WORK/version_hidden"
grep -q "cuda plugin not loaded: libddp_cuda.so did not load: .*lib[a-z]*\.so[.0-9]*: cannot open shared object file" \
  "$WORK/version_hidden" || fail "--version does not say that and why the plugin did not load"

[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist); --version checked"
stand_in_driver
# mpirun_local's command line (a function cannot be exec'd in the namespace; we are root here).
mpi=(mpirun --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo
     --mca oob_tcp_if_include lo --allow-run-as-root -x CUDA_VISIBLE_DEVICES -np 1)
short=(--config "$FASHION_CONFIG" --data.train_limit 500 --data.test_limit 200
       --train.epochs 1)
with_driver hidden "${mpi[@]}" "$BIN" "${short[@]}" --runtime.device auto --run-dir "$WORK/auto" \
  > "$WORK/auto.log" 2>&1 || { cat "$WORK/auto.log"; fail "device = auto failed without the CUDA libraries"; }
grep -q "trains on the CPU" "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "device = auto: no note that it trains on the CPU"; }
grep -q "did not load" "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "device = auto: the note does not say why there is no GPU"; }
grep -q '"summary": true' "$WORK/auto/metrics.jsonl" || fail "device = auto: the run wrote no summary"

if with_driver hidden "${mpi[@]}" "$BIN" "${short[@]}" --runtime.device cuda --run-dir "$WORK/cuda" \
  > "$WORK/cuda.log" 2>&1; then
  cat "$WORK/cuda.log"; fail "device = cuda succeeded without the CUDA libraries"
fi
grep -q "runtime.device = cuda, but no usable GPU: libddp_cuda.so did not load: .*cannot open shared object file" \
  "$WORK/cuda.log" || { cat "$WORK/cuda.log"; fail "device = cuda: the error does not say why"; }

hidden "${mpi[@]}" "$BIN" doctor --config "$FASHION_CONFIG" \
  > "$WORK/doctor.log" 2>&1 || { cat "$WORK/doctor.log"; fail "doctor failed without the CUDA libraries"; }
cat "$WORK/doctor.log"
grep -A3 "devices" "$WORK/doctor.log" | grep -q "did not load" || fail "doctor does not report that the plugin did not load"

hidden bash "$SRC/tests/integration/test_mpi_two_ranks.sh" "$BIN" "$SRC" > "$WORK/two.log" 2>&1 ||
  { cat "$WORK/two.log"; fail "test_mpi_two_ranks.sh fails without the CUDA libraries"; }
pass "without the CUDA libraries: --version and doctor say why, auto trains on the CPU, cuda is a clear error"
