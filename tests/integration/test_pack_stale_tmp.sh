#!/usr/bin/env bash
# A pack killed with SIGKILL leaves its temporary file (.x.h5.tmp.PID), which no later pack used to
# remove (an interrupted pack of a large set leaked its size). The next pack to the same output
# removes the temporaries of processes that are gone, and says so; it keeps those of a live
# process, one locked by a writer elsewhere (another host on a shared file system), and those of
# other outputs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pack/find_python.sh"
find_python PIL numpy
T=$SRC/tests/integration/pack
"$PY" "$T/make_folder.py" "$WORK/many" 2> /dev/null || true
for i in $(seq 1 40); do cp -r "$WORK/many/cat" "$WORK/many/cat$i"; done
O=$WORK/out
mkdir -p "$O"
"$BIN" pack --format imagefolder --input "$WORK/many" --output "$O/x.h5" --size 512x512 --threads 1 \
  > "$WORK/killed.log" 2>&1 &
killed=$!
wait_for_file "$O/.x.h5.tmp.$killed" 60 || { kill $killed; fail "the pack never started writing"; }
kill -9 $killed
wait $killed 2> /dev/null || true
[ -e "$O/.x.h5.tmp.$killed" ] || fail "precondition: the killed pack left no temporary file"

sleep 600 & live=$!
echo partial > "$O/.x.h5.tmp.$live"                  # a live process's: kept
true & gone=$!; wait $gone
echo partial > "$O/.x.h5.tmp.$gone"                  # written elsewhere and locked: kept
"$PY" -c "
import fcntl, sys, time
f = open(sys.argv[1], 'r+')
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], 'w').close()
time.sleep(600)" "$O/.x.h5.tmp.$gone" "$WORK/locked" &
locker=$!
wait_for_file "$WORK/locked" 30 || fail "the lock holder did not start"
echo partial > "$O/.y.h5.tmp.$killed"                # another output's: kept
cleanup() { kill $live $locker 2> /dev/null || true; }
trap 'cleanup; [ "${DDP_KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"' EXIT

"$BIN" pack --format imagefolder --input "$WORK/many/cat" --output "$O/x.h5" > "$WORK/log" 2>&1 \
  || { cat "$WORK/log"; fail "the next pack failed"; }
grep -qF "removed the temporary file of an interrupted pack: '$O/.x.h5.tmp.$killed' (left by process $killed)" "$WORK/log" \
  || { cat "$WORK/log"; fail "the removal is not reported"; }
[ ! -e "$O/.x.h5.tmp.$killed" ] || fail "the killed pack's temporary file is still there"
[ -e "$O/.x.h5.tmp.$live" ] || fail "a live process's temporary file was removed"
[ -e "$O/.x.h5.tmp.$gone" ] || fail "a temporary file locked by its writer was removed"
[ -e "$O/.y.h5.tmp.$killed" ] || fail "another output's temporary file was removed"
[ "$(grep -c "removed the temporary" "$WORK/log")" = 1 ] || { cat "$WORK/log"; fail "more than one removal reported"; }
pass "the killed pack's temporary removed and reported; live, locked and other outputs' kept"
