#!/usr/bin/env bash
# Quick start: install what building and running need, build ddp_train (and the CUDA plugin when a
# GPU is visible), and train LeNet on the real Fashion-MNIST with two MPI ranks. The test command
# (scripts/run_tests.sh) installs and builds the rest: the tests, the benchmarks, the plugin.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DDP_SETUP_PACKAGES=build DDP_SETUP_TARGETS=ddp_train "$here/scripts/setup.sh"
cd "$here"
# --run.overwrite: running the quick start again trains anew (the previous run moves to
# runs/fashion_mnist/archive/) instead of refusing to mix two runs in one directory.
"$here/scripts/mpirun.sh" -np 2 build/ddp_train --config configs/fashion_mnist.toml --run.overwrite "$@"
