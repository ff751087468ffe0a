#!/usr/bin/env bash
# data.distribute = broadcast: three ranks on one node hold one copy of the training images in MPI
# shared memory; each-reads holds one per rank. Compares each rank's private resident memory. The
# whole set (a limited run reads only the samples it keeps). The memory line is printed once every
# rank holds its data, before the first step: the runs are then stopped (SIGUSR1, exit 75), as the
# training that followed measured nothing (it cost three quarters of the test's CPU time).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
for mode in each-reads broadcast; do
  mpirun_local -np 3 "$BIN" --config "$FASHION_CONFIG" --data.distribute $mode \
    --train.epochs 1 --data.train_limit 0 --train.batch_size 1000 --run-dir "$WORK/$mode" > "$WORK/$mode.log" 2>&1 &
  job=$!
  seen_now "$WORK/$mode.log" "^memory" || { cat "$WORK/$mode.log"; fail "$mode run printed no memory line"; }
  # (A run that ends before the signal, exit 0, has measured the same.)
  kill -USR1 $(rank_pids "$WORK/$mode") 2> /dev/null || true
  set +e; wait $job; rc=$?; set -e
  [ "$rc" = 75 ] || [ "$rc" = 0 ] || { cat "$WORK/$mode.log"; fail "$mode run failed (exit $rc)"; }
  grep "^memory" "$WORK/$mode.log"
done
# Largest private MiB over the ranks.
max_private() { grep "^memory" "$1" | grep -o 'rank [0-9]* [0-9]*/' | awk '{ sub("/", "", $3); if ($3 > m) m = $3 } END { print m }'; }
each=$(max_private "$WORK/each-reads.log")
bcast=$(max_private "$WORK/broadcast.log")
# The Fashion-MNIST training set is 47 MB of pixels: broadcast must save at least 40 MiB per rank.
[ $((each - bcast)) -ge 40 ] || fail "broadcast does not share the dataset: private $bcast MiB vs $each MiB"
pass "private memory per rank: each-reads $each MiB, broadcast $bcast MiB"
