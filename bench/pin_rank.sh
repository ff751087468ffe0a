#!/usr/bin/env bash
# Runs one MPI rank on the CPU(s) chosen for it, to build uneven machines out of one:
#   RANK_CPUS="0 1 1" mpirun --bind-to none -np 3 bench/pin_rank.sh ddp_train ...
# puts rank 0 alone on CPU 0 and ranks 1 and 2 on CPU 1 (each at half speed). Word R of RANK_CPUS
# (default "0 1 1") is rank R's CPU list in taskset's format ("1", "2-3"). mpirun must not bind
# (--bind-to none): taskset may only choose among the CPUs a rank was given.
set -euo pipefail
read -r -a cpus <<< "${RANK_CPUS:-0 1 1}"
rank=${OMPI_COMM_WORLD_RANK:?pin_rank.sh: not started by Open MPI\'s mpirun (no OMPI_COMM_WORLD_RANK)}
[ "$rank" -lt "${#cpus[@]}" ] || { echo "pin_rank.sh: RANK_CPUS='${cpus[*]}' has no CPU for rank $rank" >&2; exit 2; }
exec taskset -c "${cpus[$rank]}" "$@"
