#!/usr/bin/env bash
# `ddp_train doctor` under mpirun: a healthy 3-rank job passes every check and prints the rank table
# and an all-reduce bandwidth table whose busbw is algbw * 2(n-1)/n; a rank that cannot see the
# dataset directory (hidden from it by a tmpfs in its own mount namespace, as on a host that lacks
# the mount) fails the dataset check, named by rank, with exit 1; with data.distribute = broadcast
# the same rank needs no files and the job passes; a mis-launched singleton is refused.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"

mkdir "$WORK/data"
cp "$FASHION_GZ"/*-ubyte.gz "$WORK/data/"
args=(doctor --config "$SRC/configs/fashion_mnist.toml" --data.root "$WORK/data" --runtime.threads 1)

# --- healthy ---------------------------------------------------------------------------------
mpirun_local -np 3 "$BIN" "${args[@]}" --sweep-max-mb 2 --iters 5 > "$WORK/ok.log" 2>&1 ||
  { cat "$WORK/ok.log"; fail "doctor failed on a healthy 3-rank job"; }
cat "$WORK/ok.log"
[ "$(grep -cE '^ +[0-2] +[0-2]/3 ' "$WORK/ok.log")" = 3 ] || fail "the rank table does not list ranks 0-2 as 0/3..2/3"
for c in launch network dataset collectives; do
  grep -qE "^\[PASS\] $c " "$WORK/ok.log" || fail "check '$c' did not pass"
done
grep -qE '^\[(PASS|SKIP)\] devices ' "$WORK/ok.log" || fail "no devices verdict"
grep -q "60000 train + 10000 test samples, crc32 [0-9a-f]\{8\} (the same on every rank)" "$WORK/ok.log" ||
  fail "the dataset check does not report what every rank read"
grep -q "exact on all 3 rank(s)" "$WORK/ok.log" || fail "the collective check does not cover 3 ranks"
# Bandwidth rows: size count iters time algbw busbw, 8 B .. 2 MiB by factors of 4.
awk '/busbw\(GB\/s\)/ { t = 1; next } t && NF == 6 { print }' "$WORK/ok.log" > "$WORK/bw"
[ "$(awk '{ print $1 }' "$WORK/bw" | tr '\n' ' ')" = "8 32 128 512 2048 8192 32768 131072 524288 2097152 " ] ||
  fail "bandwidth sizes: $(awk '{ print $1 }' "$WORK/bw" | tr '\n' ' ')"
# Printed to 4 decimals (GB/s), so compare within that rounding: algbw = size / time, busbw =
# algbw * 2(n-1)/n = algbw * 4/3 for 3 ranks.
awk 'function off(a, b) { d = a - b; if (d < 0) d = -d; return d > 1e-4 + 1e-3 * b }
     { if ($1 != 4 * $2 || $4 <= 0) bad = 1
       if (off($5, $1 / ($4 * 1e3))) bad = 1
       if (off($6, $5 * 4 / 3)) bad = 1 }
     END { exit bad }' "$WORK/bw" || fail "a bandwidth row is inconsistent (count = size/4, algbw = size/time, busbw = algbw * 4/3)"
grep -q "^doctor: all checks passed" "$WORK/ok.log" || fail "no final verdict"

# --- rank 2 cannot see the dataset ---------------------------------------------------------------
# Ranks 0 and 1 see the files; rank 2 runs with a tmpfs over the directory in a private mount
# namespace (root), or is pointed at a directory that does not exist (otherwise).
run_with_hidden_data() {
  if [ "$(id -u)" = 0 ] && unshare -m true 2> /dev/null; then
    mpirun_local -np 2 "$BIN" "$@" : -np 1 \
      unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$WORK/data" "$BIN" "$@"
  else
    mpirun_local -np 2 "$BIN" "$@" : -np 1 "$BIN" "$@" --data.root "$WORK/not-mounted-here"
  fi
}
set +e
run_with_hidden_data "${args[@]}" --sweep-max-mb 1 > "$WORK/bad.log" 2>&1
rc=$?
set -e
cat "$WORK/bad.log"
[ "$rc" -ne 0 ] || fail "doctor exited 0 although rank 2 cannot read the dataset"
grep -q "^\[FAIL\] dataset " "$WORK/bad.log" || fail "the dataset check did not fail"
grep -qE "^ +rank 2 \([^)]*\): .*no such file" "$WORK/bad.log" || fail "the failure does not name rank 2 and the missing file"
grep -qE "^ +ranks 0, 1 \([^)]*\): 60000 train" "$WORK/bad.log" || fail "ranks 0 and 1 are not reported as fine"
for c in launch network collectives; do
  grep -qE "^\[PASS\] $c " "$WORK/bad.log" || fail "check '$c' should still pass"
done
grep -q "^doctor: 1 check(s) failed" "$WORK/bad.log" || fail "no failure verdict"

# Broadcast: only rank 0 reads the files, so rank 2 not seeing them is fine.
run_with_hidden_data "${args[@]}" --data.distribute broadcast --no-sweep > "$WORK/bcast.log" 2>&1 ||
  { cat "$WORK/bcast.log"; fail "with data.distribute = broadcast, rank 2 needs no dataset files"; }
grep -q "rank 0 reads it for all" "$WORK/bcast.log" || fail "the broadcast verdict does not say who reads"

# --- alone, and mis-launched ---------------------------------------------------------------------
clean_env=(env)
for v in $(compgen -e); do
  case "$v" in SLURM_* | OMPI_* | PMIX_* | PMI_*) clean_env+=(-u "$v") ;; esac
done
"${clean_env[@]}" "$BIN" doctor --no-sweep > "$WORK/alone.log" 2>&1 ||
  { cat "$WORK/alone.log"; fail "doctor alone (no config) failed"; }
grep -q "^\[SKIP\] dataset .*no dataset configured" "$WORK/alone.log" || fail "no dataset should be a skip"
set +e
"${clean_env[@]}" SLURM_NTASKS=3 SLURM_STEP_ID=0 SLURM_PROCID=0 timeout 60 "$BIN" doctor --no-sweep > "$WORK/mis.log" 2>&1
rc=$?
set -e
cat "$WORK/mis.log"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a mis-launched doctor exited $rc"
grep -q "srun --mpi=pmix" "$WORK/mis.log" || fail "the mis-launch message does not say what to do"
pass "doctor: healthy 3 ranks pass with a bandwidth table; rank 2 without the dataset fails by name; broadcast needs it only on rank 0; mis-launch refused"
