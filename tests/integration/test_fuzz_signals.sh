#!/usr/bin/env bash
# Fuzz: stop signals at random early moments (MPI start, data loading, model building, the first
# steps, evaluation, snapshot writing): SIGUSR1, SIGTERM or SIGINT, once or twice in quick
# succession (two SIGUSR1 right after the first epoch line is where a heap corruption was seen
# once, issue #12), to one process or to one rank of two. Pass: exit 0 (the run ended first),
# 75 (stopped, with a snapshot that --resume auto continues from), or 128+N after a second
# SIGTERM/SIGINT; never another death by signal, never a hang. Signals are sent once the process
# takes them (SigCgt or SigBlk in /proc): before main() runs (about 15 ms of dynamic loading) no
# program can catch one. See lib_fuzz.sh for the seed and the scale.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_fuzz.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

common=(--config "$FASHION_CONFIG" --model.preset lenet_mnist
        --data.train_limit 512 --data.test_limit 256 --train.batch_size 64 --runtime.threads 1
        --train.epochs 3)
RANDOM_STATE=$(python3 -c "import random; r = random.Random('$FUZZ_SEED:signals'); print(' '.join(str(r.randrange(1 << 15)) for _ in range(400)))")
read -ra RANDS <<< "$RANDOM_STATE"
R=0
rand() { RND=$((RANDS[R++ % ${#RANDS[@]}] % $1)); }  # RND: a seeded number in [0, $1)
ms() { awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }'; }
export -f mpirun_local  # for `timeout bash -c`

# Waits (up to 30 s) until process $1 catches SIGINT, SIGUSR1 and SIGTERM (a handler, or blocked
# in its threads and taken by a thread of its own in sigwait).
# (/proc read by the shell itself: two awk starts per 10 ms poll cost more than the wait.)
wait_for_handlers() {
  local i k v caught blocked
  for ((i = 0; i < 3000; i++)); do
    caught="" blocked=""
    { while read -r k v; do
        case $k in SigBlk:) blocked=$v ;; SigCgt:) caught=$v ;; esac
      done < "/proc/$1/status"; } 2> /dev/null || return 1
    [ -n "$caught" ] && ((((16#$caught | 16#$blocked) & 16#4202) == 16#4202)) && return 0
    sleep 0.01
  done
  return 1
}

# Runs one case in the background and signals it. $1: label, $2: run dir, $3: ranks (1 or 2),
# $4: signal, $5: second signal or "", $6: delay before the first (ms), $7: gap to the second
# (ms). Target: the only process, or rank $8 of two ("all": both). Sets CASE_RC.
signal_case() {
  local label=$1 dir=$2 ranks=$3 sig=$4 sig2=$5 delay=$6 gap=$7 target=${8:-0}
  local out="$WORK/sig.out" err="$WORK/sig.err"
  local launch=("$BIN")
  [ "$ranks" = 2 ] && launch=(bash -c 'mpirun_local "$@"' mpirun_local -np 2 "$BIN")
  FUZZ_CASES=$((FUZZ_CASES + 1))
  timeout -k 5 120 "${launch[@]}" "${common[@]}" --run-dir "$dir" > "$out" 2> "$err" &
  local job=$! pids=() p
  # The rank processes (under timeout, and mpirun for 2 ranks).
  for ((p = 0; p < 300 && ${#pids[@]} < ranks; p++)); do
    read -ra pids <<< "$(rank_pids "$dir" | tr '\n' ' ')"
    sleep 0.01
  done
  local victims=()
  if [ "$ranks" = 1 ] || [ "$target" = all ]; then victims=("${pids[@]}"); else
    victims=("$(rank_pid "$dir" "$target")")
  fi
  for p in "${victims[@]}"; do [ -n "$p" ] && wait_for_handlers "$p" || true; done
  sleep "$(ms "$delay")"
  for p in "${victims[@]}"; do kill -s "$sig" "$p" 2> /dev/null || true; done
  if [ -n "$sig2" ]; then
    sleep "$(ms "$gap")"
    for p in "${victims[@]}"; do kill -s "$sig2" "$p" 2> /dev/null || true; done
  fi
  CASE_RC=0
  wait "$job" || CASE_RC=$?
  local allowed=" 0 75 "
  [ "$sig2" = TERM ] && allowed+="143 "
  [ "$sig2" = INT ] && allowed+="130 "
  local why=""
  if [ "$CASE_RC" = 124 ] || [ "$CASE_RC" = 137 ]; then
    why="no exit within 120 s (a hang)"
  elif grep -qE "ERROR: (Address|Thread)Sanitizer|runtime error: |WARNING: ThreadSanitizer|corrupted|double free|free\(\)" "$err"; then
    why="a sanitizer or heap-corruption report"
  elif [[ ! "$allowed" =~ " $CASE_RC " ]]; then
    why="exit $CASE_RC (allowed:$allowed)"
  fi
  if [ -n "$why" ]; then
    echo "--- stdout:" >&2; tail -20 "$out" >&2
    echo "--- stderr:" >&2; tail -c 3000 "$err" >&2
    fail "signal case '$label' (DDP_FUZZ_SEED=$FUZZ_SEED): $why"
  fi
  echo "  $label: exit $CASE_RC"
}

# One process: a random signal, once or twice, at a random moment of the first ~1.5 s.
sigs=(USR1 TERM INT)
n=$(scaled 12)
for ((i = 0; i < n; i++)); do
  rand 3 && sig=${sigs[$RND]}
  sig2=""
  rand 3 && ((RND == 0)) && rand 3 && sig2=${sigs[$RND]}
  rand 1500 && delay=$RND
  rand 300 && gap=$RND
  dir="$WORK/one_$i"
  signal_case "1 rank #$i: SIG$sig${sig2:+ + SIG$sig2 after $gap ms} at +$delay ms" "$dir" 1 \
    "$sig" "$sig2" "$delay" "$gap"
  if [ "$CASE_RC" = 75 ]; then
    # The stop snapshot is complete: the run continues from it to the end.
    fuzz_case "1 rank #$i: --resume auto after the stop" "snapshot_e" 120 -- \
      "$BIN" "${common[@]}" --run-dir "$dir" --resume auto
    [ "$FUZZ_LAST_RC" = 0 ] || fail "1 rank #$i: the resumed run exited $FUZZ_LAST_RC"
    grep -q "^resume: " "$WORK/case.out" || fail "1 rank #$i: stopped (75) but nothing to resume"
  fi
  rm -rf "$dir"
done

# Two SIGUSR1 right after the first epoch line (the scenario of issue #12's heap corruption).
n=$(scaled 3)
for ((i = 0; i < n; i++)); do
  dir="$WORK/usr1_$i"
  rand 50 && gap=$RND
  FUZZ_CASES=$((FUZZ_CASES + 1))
  # 20 epochs: the signals land in epoch 2 or 3, not after the end of the run.
  rm -f "$WORK/sig.out"  # the previous case's first epoch line must not count
  timeout -k 5 120 "$BIN" "${common[@]}" --train.epochs 20 --run-dir "$dir" > "$WORK/sig.out" \
    2> "$WORK/sig.err" &
  job=$!
  # (an event wait, tail -F in seen_now: as soon as the line is written, without a 10 ms grep poll)
  seen_now "$WORK/sig.out" "^epoch 1/" || { cat "$WORK/sig.out"; fail "no first epoch line"; }
  pid=$(rank_pids "$dir")  # not $job, which is timeout's
  kill -USR1 "$pid" 2> /dev/null || true
  sleep "$(ms "$gap")"
  kill -USR1 "$pid" 2> /dev/null || true
  rc=0
  wait "$job" || rc=$?
  if [ "$rc" != 75 ] || grep -qE "Sanitizer|runtime error: |corrupted|free\(\)" "$WORK/sig.err"; then
    cat "$WORK/sig.err" >&2
    fail "two SIGUSR1 after the first epoch line (gap $gap ms): exit $rc"
  fi
  echo "  2x SIGUSR1 after epoch 1 (gap $gap ms): exit $rc"
  rm -rf "$dir"
done

# Two ranks: one of them, or both, signalled at a random moment; all must agree to stop.
if command -v mpirun > /dev/null; then
  n=$(scaled 4)
  for ((i = 0; i < n; i++)); do
    rand 2 && sig=${sigs[$RND]}  # USR1 or TERM: what Slurm sends
    rand 3 && target=all && ((RND == 0)) || { rand 2 && target=$RND; }
    rand 2000 && delay=$RND
    signal_case "2 ranks #$i: SIG$sig to rank(s) $target at +$delay ms" "$WORK/two_$i" 2 "$sig" "" \
      "$delay" 0 "$target"
    rm -rf "$WORK/two_$i"
  done
fi
pass "$FUZZ_CASES runs signalled at random early moments: each stopped cleanly or finished"
