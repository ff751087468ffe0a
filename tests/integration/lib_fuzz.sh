# Shared by the fuzz tests (test_fuzz_*.sh), sourced after lib.sh. Every case runs under `timeout`;
# it passes when the program exits 0, or with an error on stderr that says "error" and names the
# file or key at fault; it fails on a death by signal (exit >= 128, except the stop code 75 and what
# the caller allows), a hang past the case's limit, or a sanitizer report.
#   DDP_FUZZ_SEED=N    the seed (printed; the default is fixed, so CI runs the same cases)
#   DDP_FUZZ_SCALE=F   multiplies the number of cases (e.g. 10 for a long local run)
FUZZ_SEED=${DDP_FUZZ_SEED:-20250612}
FUZZ_SCALE=${DDP_FUZZ_SCALE:-1}
MUTATE="$SRC/tests/integration/fuzz_mutate.py"
command -v python3 > /dev/null || skip "python3 not found (the mutator is a Python script)"
echo "fuzz seed $FUZZ_SEED (reproduce with DDP_FUZZ_SEED=$FUZZ_SEED), scale $FUZZ_SCALE"
FUZZ_CASES=0

# Number of cases for a base count $1, scaled.
scaled() { awk -v n="$1" -v s="$FUZZ_SCALE" 'BEGIN { printf "%d", (n * s < 1 ? 1 : n * s) }'; }

# mutate CASE_ID KIND IN OUT: writes a mutated copy, echoes what was done.
mutate() { python3 "$MUTATE" "$FUZZ_SEED:$1" "$2" "$3" "$4"; }

# The same, batched: a Python start costs more than a mutation (~0.3 s each on a CI machine), so a
# test queues its cases with plan_mutation CASE_ID KIND IN OUT (same arguments, same files as
# mutate), then mutate_planned writes them all in one start and sets WHAT[CASE_ID] to each
# description.
declare -A WHAT
PLANNED=()
plan_mutation() {
  PLANNED+=("$1")
  printf '%s\t%s\t%s\t%s\n' "$FUZZ_SEED:$1" "$2" "$3" "$4" >> "$WORK/mutations.plan"
}
mutate_planned() {
  local descs=() k
  mapfile -t descs < <(python3 "$MUTATE" - < "$WORK/mutations.plan"; echo "exit $?")
  [ "${descs[-1]}" = "exit 0" ] && [ "${#descs[@]}" = $((${#PLANNED[@]} + 1)) ] ||
    fail "fuzz_mutate.py failed: ${descs[*]}"
  for k in "${!PLANNED[@]}"; do WHAT[${PLANNED[$k]}]=${descs[$k]}; done
  PLANNED=()
  rm -f "$WORK/mutations.plan"
}

# fuzz_case LABEL NEEDLE LIMIT_S [ALLOWED_RC...] -- COMMAND...
# Runs COMMAND with a time limit and checks the outcome (see above). NEEDLE: a regular expression
# that a failure's stderr must match (the file's name or the key). LABEL says how to reproduce.
fuzz_case() {
  local label=$1 needle=$2 limit=$3
  shift 3
  local allowed=(75)
  while [ "$1" != -- ]; do allowed+=("$1"); shift; done
  shift
  FUZZ_CASES=$((FUZZ_CASES + 1))
  local rc=0
  timeout -k 5 "$limit" "$@" > "$WORK/case.out" 2> "$WORK/case.err" || rc=$?
  # One awk answers every question about stderr (a sanitizer report; a line saying "error", and
  # the first; a line matching the needle), line by line as the grep -E / grep -i per question did:
  # a process start costs ~10 ms of CPU, and those greps cost a third of a case's `inspect`. NUL
  # bytes, where mawk's regular expressions stop reading a line (grep's do not), read as spaces.
  local san err named first
  read -r san err named first < <(NEEDLE="$needle" awk '
    /ERROR: (Address|Thread|Memory|Leak)Sanitizer|runtime error: |WARNING: ThreadSanitizer/ { san = 1 }
    tolower($0) ~ /error/ { if (!err) first = substr($0, 1, 150); err = 1 }
    $0 ~ ENVIRON["NEEDLE"] { named = 1 }
    END { printf "%d %d %d %s\n", san, err, named, first }' < <(tr '\0' ' ' < "$WORK/case.err"))
  local why=""
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    why="no answer within $limit s (a hang)"
  elif [ "$san" = 1 ]; then
    why="a sanitizer report"
  elif [ "$rc" -ge 128 ] && [[ ! " ${allowed[*]} " =~ " $rc " ]]; then
    why="death by signal $((rc - 128)) (exit $rc)"
  elif [ "$rc" != 0 ] && [[ ! " ${allowed[*]} " =~ " $rc " ]]; then
    if [ "$err" != 1 ]; then
      why="exit $rc without an error message"
    elif [ "$named" != 1 ]; then
      why="exit $rc with an error that does not name /$needle/"
    fi
  fi
  if [ -n "$why" ]; then
    echo "--- stderr of the failing case:" >&2
    tail -c 3000 "$WORK/case.err" >&2
    fail "fuzz case '$label' (DDP_FUZZ_SEED=$FUZZ_SEED): $why"
  fi
  FUZZ_LAST_RC=$rc
  echo "  $label: exit $rc $first"
}

# fashion_subset DIR: the first 256 training and 128 test images of Fashion-MNIST as raw IDX files
# in DIR (only the bytes kept are decompressed): the fuzz tests' runs need images, not all of them.
fashion_subset() {
  mkdir -p "$1"
  python3 - "$FASHION_GZ" "$1" << 'PYEOF'
import gzip, struct, sys
src, dst = sys.argv[1:3]
for split, n in (("train", 256), ("t10k", 128)):
    img = gzip.open(f"{src}/{split}-images-idx3-ubyte.gz").read(16 + n * 784)
    lab = gzip.open(f"{src}/{split}-labels-idx1-ubyte.gz").read(8 + n)
    open(f"{dst}/{split}-images-idx3-ubyte", "wb").write(
        struct.pack(">IIII", 0x803, n, 28, 28) + img[16:16 + n * 784])
    open(f"{dst}/{split}-labels-idx1-ubyte", "wb").write(
        struct.pack(">II", 0x801, n) + lab[8:8 + n])
PYEOF
}
