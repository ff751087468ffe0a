#!/usr/bin/env bash
# mpirun with the flags a workstation or container needs: as root Open MPI wants an explicit opt-in,
# with more ranks than cores it needs --oversubscribe, and --bind-to none lets each rank use its
# share of the machine's cores (Open MPI's default binds each of 1-2 ranks to one core; ddp_train
# divides the CPUs among the ranks of a host itself).
#   scripts/mpirun.sh -np 2 build/ddp_train --config configs/fashion_mnist.toml
set -euo pipefail
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
extra+=(--oversubscribe --bind-to none)
# A SIGTERM to mpirun itself reaches the ranks odls_base_sigkill_timeout seconds later, and SIGKILL
# as long again after that: Open MPI's 1 s may be too short for the ranks to reach their next step
# and write the snapshot. Set OMPI_MCA_odls_base_sigkill_timeout yourself to choose another.
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-10}
exec mpirun "${extra[@]}" "$@"
