#!/usr/bin/env bash
# A launch that leaves cores idle is reported: Open MPI binds each rank to one core by default when
# it starts 2 or fewer ranks, so `mpirun -np 1` on a 2-CPU machine (and `-np 2` on a bigger one)
# trains on fewer CPUs than the host gives each rank. Training says so once per host on rank 0's
# output, with the fix, and `doctor` warns (exit 0, but its final line must not claim "all checks
# passed"). With `--bind-to none` neither warns. runtime.threads set explicitly to what the binding
# gives is not warned about (each thread has its CPU). Raw mpirun, not mpirun_local: the binding
# defaults are what is tested, so no option that could change them.
source "$(dirname "$0")/lib.sh"
[ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] || skip "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)"
cpus=$(nproc)  # this shell's CPUs: the host's, as far as this job is concerned
[ "$cpus" -ge 2 ] || skip "one CPU: no binding can leave a core idle here"
mpi=(mpirun --mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
# The premise: this mpirun binds a lone rank to one core. If it does not, there is nothing to see.
bound=$("${mpi[@]}" -np 1 grep Cpus_allowed_list /proc/self/status | awk '{ print $2 }')
[ "$bound" != "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)" ] ||
  skip "this mpirun does not bind a single rank by default (it may use CPUs $bound)"

train=("$BIN" --config "$FASHION_CONFIG" --data.root "$FASHION"
       --data.train_limit 256 --data.test_limit 128 --train.epochs 1 --train.batch_size 64
       --runtime.device cpu)
run() {  # run NAME MPIRUN-ARGS... -- DDP-ARGS...: training, then doctor, with those mpirun options
  local name=$1; shift
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  "${mpi[@]}" "${opts[@]}" "${train[@]}" --run-dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "$name: training failed"; }
  "${mpi[@]}" "${opts[@]}" "$BIN" doctor --no-sweep "$@" > "$WORK/$name.doctor" 2>&1 ||
    { cat "$WORK/$name.doctor"; fail "$name: doctor exited non-zero (a warning must not fail it)"; }
}
warns() {  # warns NAME RANKS PE: one warning line with the fix, in training and in doctor
  local name=$1 ranks=$2 pe=$3 share=$((cpus / $4))
  [ "$(grep -c '^warning: host .* bound to' "$WORK/$name.log")" = 1 ] ||
    { cat "$WORK/$name.log"; fail "$name: not exactly one binding warning at start"; }
  grep '^warning: host' "$WORK/$name.log"
  for want in "$ranks" "could use $share" '`mpirun --bind-to none ...`' \
    "\`mpirun --map-by slot:PE=$pe ...\`" "\`srun --cpus-per-task=$share ...\`"; do
    grep '^warning: host' "$WORK/$name.log" | grep -qF -- "$want" ||
      fail "$name: the warning lacks '$want'"
  done
  grep -q '^\[WARN\] binding ' "$WORK/$name.doctor" || { cat "$WORK/$name.doctor"; fail "$name: doctor did not warn"; }
  grep -qF -- "--bind-to none" "$WORK/$name.doctor" || fail "$name: doctor's warning has no fix"
  grep -q '^doctor: passed with 1 warning(s)' "$WORK/$name.doctor" ||
    { cat "$WORK/$name.doctor"; fail "$name: doctor's verdict does not count the warning"; }
}
quiet() {  # quiet NAME: no binding warning, doctor passes outright
  ! grep -q 'bound to' "$WORK/$1.log" || { cat "$WORK/$1.log"; fail "$1: warned about binding"; }
  grep -q '^\[PASS\] binding ' "$WORK/$1.doctor" || { cat "$WORK/$1.doctor"; fail "$1: doctor's binding check did not pass"; }
  grep -q '^doctor: all checks passed' "$WORK/$1.doctor" || { cat "$WORK/$1.doctor"; fail "$1: doctor did not pass"; }
}
# --map-by slot:PE=N counts cores: this host's cores per rank.
cores=$(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2> /dev/null | sort -u | wc -l)
[ "$cores" -ge 1 ] || cores=$cpus

run np1_default -np 1 --
warns np1_default "rank 0 is bound to 1 CPU(s)" $((cores > 1 ? cores : 1)) 1
grep -q ': 1 rank(s), 1 thread(s) per rank' "$WORK/np1_default.log" || fail "np1_default: the start-up line does not say 1 thread"
run np1_none -np 1 --bind-to none --
quiet np1_none
grep -q ": 1 rank(s), $cpus thread(s) per rank" "$WORK/np1_none.log" || fail "np1_none: the start-up line does not say $cpus threads"
# The same binding with runtime.threads = 1 asked for: nothing is lost, nothing said.
run np1_threads1 -np 1 -- --runtime.threads 1
quiet np1_threads1

if [ "$cpus" -gt 2 ]; then
  run np2_default -np 2 --
  warns np2_default "ranks 0-1 are bound to" $((cores / 2 > 1 ? cores / 2 : 1)) 2
  run np2_none -np 2 --bind-to none --
  quiet np2_none
  checked="-np 1 and -np 2"
else
  echo "-np 2 not checked: this machine has $cpus CPUs, so two ranks bound to one core each use them all"
  checked="-np 1"
fi
pass "$checked with mpirun's default binding warn (training and doctor) with the fix; --bind-to none and runtime.threads = 1 do not"
