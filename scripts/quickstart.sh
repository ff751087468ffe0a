#!/usr/bin/env bash
# Quick start: install, build, and train LeNet on the real Fashion-MNIST with two MPI ranks.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
"$here/scripts/mpirun.sh" -np 2 build/ddp_train --config configs/fashion_mnist.toml "$@"
