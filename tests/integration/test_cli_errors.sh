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
# A command-line typo gets the suggestion the config file gives for it.
expect_error "unknown option '--train.epoch'; did you mean '--train.epochs'?" \
  --config "$SRC/configs/fashion_mnist.toml" --train.epoch 3
# --help says what train.global_batch does with a remainder (it need not divide by the ranks).
grep -q "need not divide evenly: each step's samples are split over the ranks in slices differing by at most one (256 on 3 ranks: 86, 85, 85;" \
  <(tr -s ' \n' ' ' < "$WORK/help") || fail "--help does not say how train.global_batch is split over the ranks"
! grep -q "must divide evenly" "$WORK/help" || fail "--help still says the global batch must divide evenly"
# doctor's numbers: NaN and infinity are not in any range.
for v in nan inf; do
  expect_error "sweep-max-mb" doctor --sweep-max-mb $v --no-sweep
  expect_error "iters" doctor --iters $v --no-sweep
done

# Sizes that cannot work are refused when the config is read or before anything is allocated,
# naming the key: never a crash, never "internal error: std::bad_alloc".
TINY=(--config "$FASHION_CONFIG" --data.train_limit 512 --data.test_limit 256
      --train.epochs 1 --run.dir "$WORK/run")
expect_error "runtime.threads = 100000: at most" "${TINY[@]}" --runtime.threads 100000
expect_error "train.batch_size = 1000000000" "${TINY[@]}" --model.preset lenet_mnist --train.batch_size 1000000000
grep -q "of memory per rank, more than this machine's" "$WORK/err" || { cat "$WORK/err"; fail "no memory estimate"; }
layers() {  # a model whose hidden linear layer has name $1 and out_features $2
  printf '[data]\ndataset = "fashion_mnist"\nroot = "%s"\n\n[[model.layers]]\ntype = "flatten"\n\n' "$FASHION"
  printf '[[model.layers]]\ntype = "linear"\nname = "%s"\nout_features = %s\n\n' "$1" "$2"
  printf '[[model.layers]]\ntype = "relu"\n\n[[model.layers]]\ntype = "linear"\nout_features = 10\n'
}
layers hidden 4000000000 > "$WORK/big.toml"
expect_error "big.toml:8) with out_features = 4000000000" --config "$WORK/big.toml" --data.train_limit 512 \
  --data.test_limit 256 --run.dir "$WORK/run"
# An allocation that still fails (here: 1.9 GiB of activations under a 1.5 GiB address-space
# limit, which the estimate above lets through on any machine with more RAM) is "out of memory".
# (Not under a sanitizer, which reserves terabytes of address space for itself.)
if ! ldd "$BIN" | grep 'lib[at]san' > /dev/null; then
  ( ulimit -v 1500000 && expect_error "error (rank 0 of 1): out of memory" "${TINY[@]}" \
    --model.preset lenet_mnist --train.batch_size 30000 )
fi
# A layer named "." cannot be an HDF5 group: refused when the file is read, not at the first snapshot.
layers . 100 > "$WORK/dot.toml"
expect_error "dot.toml:10: model.layers\[1\] (linear 'fc1'): name = \".\": must not consist of dots only" \
  --config "$WORK/dot.toml" --data.train_limit 512 --data.test_limit 256 --run.dir "$WORK/run"
! grep -q "^epoch" "$WORK/out" || fail "a layer named '.' trained an epoch before the error"
pass "errors name file, line and key"
