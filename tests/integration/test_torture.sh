#!/usr/bin/env bash
# A 2-rank run interrupted 20 times in a row at random moments - SIGKILL of one rank, SIGTERM or
# SIGUSR1 to every rank, during steps, evaluation and snapshot writes - and resumed each time with
# --resume auto ends with weights bitwise equal to an uninterrupted run's, every epoch exactly once
# in metrics.jsonl, no temporary file left and every snapshot readable. The run asks for 60 epochs,
# more than 20 rounds get through on a fast machine; once the rounds are over, the last segment
# resumes with --train.epochs lowered to 2 past the furthest epoch reached (a busy CI machine gets
# through a few; the 60 did not matter to the rounds, and the rest would only be training), and
# the uninterrupted run trains that many epochs beside it.
#   DDP_TORTURE_SEED=N reproduces a sequence (printed at the start); DDP_TORTURE_ROUNDS=N.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not found at $FASHION_GZ"
seed=${DDP_TORTURE_SEED:-$(date +%s)}
rounds=${DDP_TORTURE_ROUNDS:-20}
RANDOM=$seed
echo "  seed $seed, $rounds interruptions (DDP_TORTURE_SEED=$seed reproduces them)"
args=(--config "$FASHION_CONFIG" --model.preset lenet_mnist --data.train_limit 8192
      --data.test_limit 4096 --train.batch_size 64 --train.epochs 60 --train.save_every 2
      --train.keep_last 2 --runtime.threads 1)
epochs=60  # enough work that every round interrupts a running job, even on a fast quiet machine
# (24 epochs were done after 12 rounds on a quiet 2-core guest)
launch() {  # launch DIR [ARGS...]: 2 ranks in the background, output in DIR.log (DIR.all: every round's)
  local dir=$1; shift
  [ -f "$dir.log" ] && cat "$dir.log" >> "$dir.all"
  mpirun_local -np 2 "$BIN" "${args[@]}" --run-dir "$dir" "$@" > "$dir.log" 2>&1 &
  job=$!
}
ref_job=""
# A test that fails before the end must not leave the uninterrupted run going (mpirun takes its
# ranks along).
trap "[ -z \"\$ref_job\" ] || kill \$(pgrep -P \$ref_job) \$ref_job 2> /dev/null || true; $(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")" EXIT
# catching PID...: whether every PID has its SIGTERM and SIGUSR1 handlers in place (SigCgt).
catching() {
  local p m
  for p; do
    m=$(awk '/^SigCgt:/ { print $2 }' "/proc/$p/status" 2> /dev/null) || return 1
    [ -n "$m" ] && (( (16#$m & 0x4200) == 0x4200 )) || return 1
  done
}
# nth_line FILE REGEX N LIMIT_S: returns the moment FILE holds N lines that match (tail -F wakes on
# every write), 1 after LIMIT_S.
nth_line() {
  local rc=0
  coproc TAILN { exec tail -F -n +1 "$1" 2> /dev/null; }
  local pid=$TAILN_PID
  timeout "$4" grep -m "$3" -- "$2" <&"${TAILN[0]}" > /dev/null || rc=1
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  return $rc
}

T="$WORK/t"
launch "$T"  # the first segment starts the run; every later one resumes it
done_early=0 interrupted=0
for ((i = 1; i <= rounds; i++)); do
  # A random moment 0.4..2.4 s after the start (start-up, steps, evaluation, snapshot writes), or
  # the moment an epoch line appears: the snapshot of that epoch is being written then.
  mode=$((RANDOM % 3)) action=$((RANDOM % 3))
  if [ $mode = 0 ]; then
    # (an event wait, not a 10 ms poll of grep: as close to the line, without the poll's CPU; 5 s at
    # most, as the poll's 400 rounds took at least 4 s)
    next=$(( $(grep -c '^epoch ' "$T.log" || true) + 1 ))
    nth_line "$T.log" '^epoch ' "$next" 5 || true
  else
    sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.4 + 2.0 * r / 32767 }')"
  fi
  pids=$(rank_pids "$T")
  # On a loaded machine mpirun may not have started a rank by then (the signal would reach no one
  # and the round wait for the whole run), or a rank may still be loading its libraries (a stop
  # signal would kill it: the executable's preinit sets its handlers, after the libraries load).
  # Then the moment is when a rank runs and, for a stop signal, every rank found catches it.
  while kill -0 $job 2> /dev/null; do
    [ -n "$pids" ] && { [ $action = 0 ] || catching $pids; } && break
    sleep 0.02
    pids=$(rank_pids "$T")
  done
  case $action in
    0) what="SIGKILL of one rank"; victim=$(echo "$pids" | shuf -n 1 --random-source=<(yes $RANDOM))
       [ -n "$victim" ] && kill -9 $victim 2> /dev/null || true ;;
    1) what="SIGTERM to all"; [ -n "$pids" ] && kill -TERM $pids 2> /dev/null || true ;;
    2) what="SIGUSR1 to all"; [ -n "$pids" ] && kill -USR1 $pids 2> /dev/null || true ;;
  esac
  # Open MPI 4.1's mpirun can wait for good after a rank died before it registered with it ("PMIX
  # ERROR: UNREACHABLE", the other rank left a zombie; seen once in 4 runs): once no rank has run
  # for 30 s, mpirun is killed. A rank that hangs keeps it waiting, and that still fails the test.
  idle=0
  while kill -0 $job 2> /dev/null && ((idle < 150)); do
    if [ -n "$(rank_pids "$T")" ]; then idle=0; else idle=$((idle + 1)); fi
    sleep 0.2
  done
  if ((idle >= 150)) && kill -0 $job 2> /dev/null; then
    echo "  round $i: mpirun still waiting 30 s after its ranks ended: killed"
    kill -9 $(pgrep -P $job) $job 2> /dev/null || true
  fi
  set +e; wait $job; rc=$?; set -e
  echo "  round $i: $what ($([ $mode = 0 ] && echo "at an epoch's end" || echo "at a random moment")): exit $rc"
  # A crash, a snapshot that could not be read back (a broken atomic write) or, after a stop
  # signal, any error fails the test; so does an exit code that is neither a stop (75), a finish
  # (0) nor, after a SIGKILL, the job's death.
  grep -qE "internal error|Segmentation|corrupted size|double free|AddressSanitizer|skipping unreadable" "$T.log" &&
    { tail -30 "$T.log"; fail "round $i: a crash or an unreadable snapshot in the log"; }
  if [ $action != 0 ]; then
    grep -q "ddp_train: error" "$T.log" && { tail -30 "$T.log"; fail "round $i: an error after a stop signal"; }
    [ "$rc" = 75 ] || [ "$rc" = 0 ] || { tail -30 "$T.log"; fail "round $i: exit $rc after $what"; }
  else
    [ "$rc" != 0 ] || grep -q '"summary": true' "$T/metrics.jsonl" || fail "round $i: exit 0 after a SIGKILL"
  fi
  [ "$rc" != 0 ] && interrupted=$((interrupted + 1))
  if [ "$rc" = 0 ] && grep -q '"summary": true' "$T/metrics.jsonl" 2> /dev/null; then
    done_early=$i; break
  fi
  if [ $i = $rounds ]; then
    # The last segment: 2 epochs past the furthest one any segment reached (an epoch row, or a
    # snapshot's epoch; a mid-epoch one's needs at least 1 more), the same for the uninterrupted
    # run. Adam at a constant step: the number of epochs asked for changes none of the first ones.
    reached=$( { grep -o '"epoch": [0-9]*' "$T/metrics.jsonl" 2> /dev/null | grep -o '[0-9]*$'
                 ls "$T" | sed -nE 's/^snapshot_e0*([0-9]+).*\.h5$/\1/p'; echo 0; } | sort -n | tail -1)
    epochs=$((reached + 2 < epochs ? reached + 2 : epochs))
    echo "  epoch $reached reached in the rounds: the last segment and the uninterrupted run train $epochs"
    launch "$T" --resume auto --train.epochs $epochs
  else
    launch "$T" --resume auto
  fi
done
# The uninterrupted run, for the weights: independent of the interrupted one (its own directory;
# its ranks' command lines do not match rank_pids "$T"), beside the last segment.
mpirun_local -np 2 "$BIN" "${args[@]}" --train.epochs $epochs --run-dir "$WORK/ref" > "$WORK/ref.log" 2>&1 &
ref_job=$!
if [ "$done_early" = 0 ]; then
  wait $job || { tail -30 "$T.log"; fail "the last segment failed"; }
fi
wait $ref_job || { cat "$WORK/ref.log"; fail "the uninterrupted run failed"; }
ref_job=""
want=$(summary_field "$WORK/ref/metrics.jsonl" weights_digest)
got=$(summary_field "$T/metrics.jsonl" weights_digest)
[ "$got" = "$want" ] || { tail -40 "$T.log"; fail "final weights $got differ from the uninterrupted run's $want"; }
[ "$interrupted" -ge $((rounds * 3 / 4)) ] || fail "only $interrupted of $rounds rounds interrupted a running job"
for ((e = 1; e <= epochs; e++)); do
  n=$(grep -c "\"epoch\": $e," "$T/metrics.jsonl" || true)
  [ "$n" = 1 ] || { cat "$T/metrics.jsonl"; fail "epoch $e appears $n times in metrics.jsonl"; }
  grep "\"epoch\": $e," "$T/metrics.jsonl" | grep -q '"steps": 64,' || fail "epoch $e's row does not cover its 64 steps"
done
[ "$(grep -c '"summary": true' "$T/metrics.jsonl")" = 1 ] || fail "not exactly one summary"
leftovers=$(ls -A "$T" | grep '\.tmp\.' || true)
[ -z "$leftovers" ] || fail "temporary files left: $leftovers"
for f in "$T"/snapshot_*.h5; do "$BIN" inspect "$f" > /dev/null || fail "$f is unreadable"; done
grep -q '"status": "complete"' "$T/run.json" || fail "run.json is not complete"
segments=$(summary_field "$T/metrics.jsonl" segments)
pass "$interrupted interruptions, $segments segments, weights bitwise equal after $epochs epochs ($want), every epoch once, no temporary file, all snapshots readable"
