#!/usr/bin/env bash
# What each launcher returns for a requeueable stop, and how a wrapper tells a clean stop from a
# failure (issue 33, item 3). ddp_train itself exits 75 (EX_TEMPFAIL) after writing its snapshot;
# mpirun, signalled itself, returns its own code (Open MPI 4: not 75), so a wrapper reads the
# outcome from run.json, whose last segment records it. The one-liner the README gives:
#   python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["segments"][-1]["exit"]; print(e); sys.exit(0 if e=="complete" else 75 if e.startswith("stopped") else 1)' RUN/run.json
# prints the exit ("complete", "stopped by Terminated", "failed: ...") and exits 0, 75 or 1.
# Checked here: one process (exit 75 itself), mpirun -np 2 signalled (ranks write the snapshot,
# run.json says stopped, the one-liner exits 75, mpirun itself 1), the ranks of mpirun signalled
# (mpirun exits 75, as srun does when Slurm signals the tasks), and a complete run (the one-liner
# exits 0).
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
command -v mpirun > /dev/null || skip "mpirun not found"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
outcome() {  # the README's one-liner
  "$PY" -c 'import json,sys; e=json.load(open(sys.argv[1]))["segments"][-1]["exit"]; print(e); sys.exit(0 if e=="complete" else 75 if e.startswith("stopped") else 1)' "$1/run.json"
}
long=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 20000
      --data.test_limit 256 --train.epochs 50 --train.batch_size 32 --runtime.threads 1
      --run.log_every 100)
# A signalled mpirun stops forwarding the ranks' output at once, sends them the signal
# odls_base_sigkill_timeout seconds later and SIGKILL as long again after that (Open MPI's 1 s is
# less than a loaded machine may need to reach the next step and write the snapshot:
# scripts/mpirun.sh sets 10). A progress line every step would fill the ranks' output pipes
# meanwhile and block them in a write until the SIGKILL; every 100 steps it does not.
mpi=(mpirun --oversubscribe --mca btl self,vader,tcp --mca btl_tcp_if_include lo
     --mca oob_tcp_if_include lo --mca odls_base_sigkill_timeout 5)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

# stop_job NAME COMMAND...: starts it, SIGTERMs the launcher once training is under way; sets RC.
stop_job() {
  local name=$1 job
  shift
  "$@" > "$WORK/$name.log" 2>&1 &
  job=$!
  wait_for "$WORK/$name.log" "^\[.*step [0-9]" 300 || wait_for "$WORK/$name.log" "step [0-9]*/" 10 \
    || { kill $job; cat "$WORK/$name.log"; fail "$name: training never started"; }
  kill -TERM $job
  set +e
  wait $job
  RC=$?
  set -e
}

stop_job single "$BIN" "${long[@]}" --run-dir "$WORK/single"
[ "$RC" = 75 ] || { cat "$WORK/single.log"; fail "one process stopped by SIGTERM exited $RC, not 75"; }
set +e; said=$(outcome "$WORK/single"); orc=$?; set -e
[ "$orc" = 75 ] && [[ "$said" == "stopped by "* ]] || fail "one process: the one-liner says '$said' ($orc)"
echo "  ddp_train alone: exit 75; run.json: $said"

stop_job mpirun "${mpi[@]}" -np 2 "$BIN" "${long[@]}" --run-dir "$WORK/mpi"
mpirun_rc=$RC
ls "$WORK/mpi"/snapshot_e*_s*.h5 > /dev/null 2>&1 || ls "$WORK/mpi"/snapshot_e*.h5 > /dev/null 2>&1 \
  || { cat "$WORK/mpirun.log"; fail "mpirun SIGTERM: the ranks wrote no snapshot"; }
grep -q '"status": "stopped"' "$WORK/mpi/run.json" || { cat "$WORK/mpi/run.json"; fail "mpirun SIGTERM: run.json does not say stopped"; }
set +e; said=$(outcome "$WORK/mpi"); orc=$?; set -e
[ "$orc" = 75 ] && [[ "$said" == "stopped by "* ]] || fail "mpirun: the one-liner says '$said' ($orc)"
[ "$mpirun_rc" != 0 ] || fail "mpirun SIGTERM: mpirun exited 0"
echo "  mpirun -np 2, SIGTERM to mpirun: mpirun exits $mpirun_rc; run.json: $said; the one-liner exits 75"
# The ranks signalled themselves (as Slurm signals each task): mpirun passes their 75 on.
"${mpi[@]}" -np 2 "$BIN" "${long[@]}" --run-dir "$WORK/ranks" > "$WORK/ranks.log" 2>&1 &
job=$!
wait_for "$WORK/ranks.log" "^\[.*step [0-9]" 300 || wait_for "$WORK/ranks.log" "step [0-9]*/" 10 \
  || { kill $job; cat "$WORK/ranks.log"; fail "ranks: training never started"; }
kill -TERM $(rank_pids "$WORK/ranks")
set +e; wait $job; ranks_rc=$?; set -e
[ "$ranks_rc" = 75 ] || { cat "$WORK/ranks.log"; fail "mpirun whose ranks got SIGTERM exited $ranks_rc, not 75"; }
set +e; said=$(outcome "$WORK/ranks"); orc=$?; set -e
[ "$orc" = 75 ] || fail "ranks signalled: the one-liner says '$said' ($orc)"
echo "  mpirun -np 2, SIGTERM to the ranks: mpirun exits 75; run.json: $said"
# The stopped run resumes and completes: the one-liner then exits 0.
"${mpi[@]}" -np 2 "$BIN" "${long[@]}" --data.train_limit 2000 --train.epochs 1 --run-dir "$WORK/done" \
  > "$WORK/done.log" 2>&1 || { cat "$WORK/done.log"; fail "a short run failed"; }
said=$(outcome "$WORK/done") || fail "complete run: the one-liner exits non-zero ('$said')"
[ "$said" = complete ] || fail "complete run: the one-liner says '$said'"
pass "a requeueable stop: ddp_train exits 75, mpirun $mpirun_rc; run.json's last segment tells stopped from failed"
