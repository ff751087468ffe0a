#!/usr/bin/env bash
# data.distribute = broadcast goes through the Communicator: a rank that does not arrive at the
# dataset broadcast is named after comm's timeout and the job ends, instead of hanging (a raw
# MPI_Bcast returned at once on rank 0, which then waited forever in the node split). Rank 1 stalls
# (test-only fault injection) before its 9th collective: after start-up's allgathers, the dataset
# header broadcast (1.1 KiB). If start-up gains collectives, the report below names another one:
# move DDP_FAULT_STALL_AT.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
T=2
export DDP_COMM_TIMEOUT_S=$T DDP_FAULT_STALL_RANK=1 DDP_FAULT_STALL_AT=9
start=$(date +%s)
set +e
# A hang is killed after 60 s (mpirun, which takes its ranks along), failing rather than blocking CI.
timeout -k 5 60 bash -c "source '$SRC/tests/integration/lib.sh' '$BIN' '$SRC'
  mpirun_local -np 2 '$BIN' --config '$FASHION_CONFIG' --data.distribute broadcast \
    --train.epochs 1 --data.train_limit 64 --data.test_limit 64 --run-dir '$WORK/run' &
  trap 'kill \$!' TERM; wait \$!" > "$WORK/log" 2>&1
rc=$?
set -e
took=$(($(date +%s) - start))
[ $rc -ne 124 ] || { cat "$WORK/log"; fail "the job hung at the dataset broadcast (killed after 60 s)"; }
[ $rc -ne 0 ] || { cat "$WORK/log"; fail "the job succeeded although rank 1 stalled"; }
grep -q "(broadcast from rank 0, 1.1 KiB) did not complete within $T s; ranks not arrived: 1" "$WORK/log" ||
  { cat "$WORK/log"; fail "no stall report naming rank 1 at the dataset broadcast"; }
echo "  $(grep -o 'collective #[0-9]* (broadcast[^;]*; ranks not arrived: 1' "$WORK/log" | head -1); job ended after ${took} s"
pass "a rank missing at the dataset broadcast is named and the job ends"
