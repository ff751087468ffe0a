#!/usr/bin/env bash
# A CUDA plugin built from another plugin interface (tests/tools/foreign_cuda_plugin.cpp: the entry
# symbol, a table with another interface hash; built without CUDA, so this runs on every machine)
# is refused by ddp_train before any of it is used: `--version` and doctor say that it is not
# loaded, that its interface hash is not the expected one, and to rebuild the plugin with this
# binary; with a driver (the toolkit's stub), runtime.device = cuda is an error with the same reason,
# and device = auto trains on the CPU saying why; without one, auto trains on the CPU saying that
# no driver was found.
source "$(dirname "$0")/lib.sh"
foreign="$(dirname "$BIN")/tests/libddp_foreign_cuda_plugin.so"
[ -f "$foreign" ] || skip "no $foreign: the tests' CMake builds it (DDP_BUILD_TESTS=ON)"
export DDP_CUDA_PLUGIN="$foreign"
why="$foreign was built from another plugin interface than this ddp_train (interface hash 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef, expected [0-9a-f]\{64\})"

"$BIN" --version > "$WORK/version" 2>&1 || { cat "$WORK/version"; fail "--version failed"; }
cat "$WORK/version"
grep -q "cuda plugin not loaded: $why" "$WORK/version" || fail "--version does not say why the plugin was refused"
grep -q "Rebuild the plugin with this binary" "$WORK/version" || fail "--version does not say what to do"

cfg=(--config "$FASHION_CONFIG")
"$BIN" doctor "${cfg[@]}" > "$WORK/doctor.log" 2>&1 || { cat "$WORK/doctor.log"; fail "doctor failed"; }
grep -A3 "devices" "$WORK/doctor.log" | grep -q "another plugin interface" ||
  { cat "$WORK/doctor.log"; fail "doctor does not report the refused plugin"; }

[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed; --version and doctor checked"
stand_in_driver
short=("${cfg[@]}" --data.train_limit 500 --data.test_limit 200 --train.epochs 1)
if with_driver "$BIN" "${short[@]}" --runtime.device cuda --run-dir "$WORK/cuda" > "$WORK/cuda.log" 2>&1; then
  cat "$WORK/cuda.log"; fail "device = cuda succeeded with a foreign plugin"
fi
grep -q "runtime.device = cuda, but no usable GPU: $why" "$WORK/cuda.log" ||
  { cat "$WORK/cuda.log"; fail "device = cuda: the error does not say why"; }
with_driver "$BIN" "${short[@]}" --runtime.device auto --run-dir "$WORK/auto" > "$WORK/auto.log" 2>&1 ||
  { cat "$WORK/auto.log"; fail "device = auto failed with a foreign plugin"; }
grep -q "another plugin interface" "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "device = auto: no note of the refused plugin"; }
grep -q '"summary": true' "$WORK/auto/metrics.jsonl" || fail "device = auto: the run wrote no summary"
if [ "$real_driver" = 0 ]; then
  "$BIN" "${short[@]}" --runtime.device auto --run-dir "$WORK/nodriver" > "$WORK/nodriver.log" 2>&1 ||
    { cat "$WORK/nodriver.log"; fail "device = auto without a driver failed"; }
  grep -q "no GPU (no NVIDIA driver was found): trains on the CPU" "$WORK/nodriver.log" ||
    { cat "$WORK/nodriver.log"; fail "device = auto without a driver: the note does not say so"; }
fi
pass "a plugin of another interface is refused with its reason (--version, doctor, device = cuda), auto trains on the CPU"
