#!/usr/bin/env bash
# Quick start: install, build, and train LeNet on the real Fashion-MNIST with two MPI ranks.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
# --run.overwrite: running the quick start again trains anew (the previous run moves to
# runs/fashion_mnist/archive/) instead of refusing to mix two runs in one directory.
"$here/scripts/mpirun.sh" -np 2 build/ddp_train --config configs/fashion_mnist.toml --run.overwrite "$@"
