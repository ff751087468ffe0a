#!/usr/bin/env bash
# Bad input gives a clear error naming the thing at fault and a non-zero exit; --help documents keys.
source "$(dirname "$0")/lib.sh"
expect_error() {  # expect_error PATTERN ARGS... : must exit non-zero with PATTERN on stderr
  local pattern=$1; shift
  if "$BIN" "$@" > "$WORK/out" 2> "$WORK/err"; then fail "succeeded: $*"; fi
  grep -q -- "$pattern" "$WORK/err" "$WORK/out" || { cat "$WORK/err"; fail "no '$pattern' for: $*"; }
}
"$BIN" --help > "$WORK/help"
for key in train.epochs train.batch_size train.save_every train.seed data.root run.dir optim.lr; do
  grep -q -- "--$key" "$WORK/help" || fail "--help does not document $key"
done
printf '[train]\nepocs = 3\n' > "$WORK/typo.toml"
expect_error "typo.toml:2" --config "$WORK/typo.toml"
expect_error "train.epochs" --config "$WORK/typo.toml"
printf '[train]\nepochs = "ten"\n' > "$WORK/type.toml"
expect_error "type.toml:2" --config "$WORK/type.toml"
expect_error "train.epochs" --config "$SRC/configs/fashion_mnist.toml" --train.epochs abc
expect_error "/nonexistent/data" --config "$SRC/configs/fashion_mnist.toml" --data.root /nonexistent/data
expect_error "no_such.toml" --config "$WORK/no_such.toml"
# Asking for the GPU where there is none (or no CUDA build) is an error, not a silent CPU run.
expect_error 'runtime.device = "cuda"' --config "$SRC/configs/fashion_mnist.toml" --runtime.device cuda
pass "errors name file, line and key"
