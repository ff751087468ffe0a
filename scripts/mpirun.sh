#!/usr/bin/env bash
# mpirun with the flags a workstation or container needs: as root Open MPI wants an explicit opt-in,
# and with more ranks than cores it needs --oversubscribe.
#   scripts/mpirun.sh -np 2 build/ddp_train --config configs/fashion_mnist.toml
set -euo pipefail
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
extra+=(--oversubscribe)
exec mpirun "${extra[@]}" "$@"
