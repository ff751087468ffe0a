#!/usr/bin/env bash
# mpirun across two "workstations" without a scheduler: ws1 and ws2 are network namespaces (with
# their own hostnames) joined by a bridge that only this test uses. mpirun runs on ws1, as a user
# would on their own machine, and reaches ws2 through an ssh stand-in (tests/harness/ns_rsh.sh,
# --mca plm_rsh_agent) that enters ws2's namespace; MPI's control (oob) and data (btl tcp) traffic
# are pinned to the test's subnet. 1 rank on ws1, 2 on ws2, as with `--host ws1:1,ws2:2`.
# `ddp_train doctor` there sees both hosts on the shared subnet and passes.
# The training must equal the single-host `mpirun -np 3`: per-epoch losses to 5 significant digits,
# the test accuracy, and the weights digest (a sum over 3 ranks whose order is the same algorithm's
# whether the bytes travel over TCP or shared memory).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_cluster.sh"
[ -f "$FASHION/t10k-labels-idx1-ubyte" ] || [ -f "$FASHION_GZ/t10k-labels-idx1-ubyte.gz" ] ||
  skip "Fashion-MNIST not found at $FASHION_GZ (apt-get install dataset-fashion-mnist)"
cluster_require hosts
cluster_up_hosts ws1 ws2

net=$SLC_NET.0/24
hosts_mpirun() {  # mpirun on ws1, the other host through the namespace "ssh"
  local extra=(--mca plm_rsh_agent "$SRC/tests/harness/ns_rsh.sh" --mca plm_rsh_no_tree_spawn 1
               --mca oob_tcp_if_include "$net" --mca btl self,vader,tcp --mca btl_tcp_if_include "$net")
  [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
  extra+=(-x CUDA_VISIBLE_DEVICES)  # lib.sh hides GPUs: both "hosts" are one machine
  slc_ns ws1 mpirun "${extra[@]}" "$@"
}

# Placement, with a hostfile as in slurm/hostfile.example: rank 0 on ws1, ranks 1 and 2 on ws2.
printf 'ws1 slots=1\nws2 slots=2\n' > "$WORK/hostfile"
hosts_mpirun --hostfile "$WORK/hostfile" -np 3 sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"' \
  > "$WORK/placement.log" 2>&1 || { cat "$WORK/placement.log"; fail "mpirun across ws1+ws2 failed"; }
sort "$WORK/placement.log" | tee "$WORK/placement.sorted"
diff <(printf 'rank 0 on ws1\nrank 1 on ws2\nrank 2 on ws2\n') "$WORK/placement.sorted" > /dev/null ||
  fail "ranks not placed 1 on ws1 + 2 on ws2"

# doctor across the two hosts: both are on the test's subnet, MPI's TCP transport is pinned to it.
hosts_mpirun -np 3 --host ws1:1,ws2:2 "$BIN" doctor --config "$SRC/configs/fashion_mnist.toml" \
  --runtime.threads 1 --sweep-max-mb 1 > "$WORK/doctor.log" 2>&1 ||
  { cat "$WORK/doctor.log"; fail "doctor across ws1+ws2 failed"; }
cat "$WORK/doctor.log"
grep -qF "[PASS] network     2 hosts sharing subnet(s) $net" "$WORK/doctor.log" ||
  fail "doctor does not report the two hosts on $net"
grep -qE "^ +ws2: lo 127.0.0.1/8, eth0 $SLC_NET\.[0-9]+/24; NCCL would use eth0; MPI TCP would use eth0" \
  "$WORK/doctor.log" || fail "doctor does not list ws2's interfaces and choices"
grep -q "^doctor: all checks passed" "$WORK/doctor.log" || fail "doctor across hosts did not pass"

# 10 steps per epoch (1920 samples, 3 x 64 per step): the comparisons are exact, so more steps add
# only time.
args=(--config "$FASHION_CONFIG" --data.train_limit 1920 --data.test_limit 1000
      --train.epochs 2 --train.batch_size 64 --runtime.threads 1 --runtime.device cpu)
hosts_mpirun -np 3 --host ws1:1,ws2:2 "$BIN" "${args[@]}" --run-dir "$WORK/hosts" > "$WORK/hosts.log" 2>&1 ||
  { cat "$WORK/hosts.log"; fail "training with mpirun --host ws1:1,ws2:2 failed"; }
grep -v '^  ' "$WORK/hosts.log"
mpirun_local -np 3 "$BIN" "${args[@]}" --run-dir "$WORK/local" > "$WORK/local.log" 2>&1 ||
  { cat "$WORK/local.log"; fail "the single-host mpirun -np 3 failed"; }

diff <(losses_5sig "$WORK/hosts/metrics.jsonl") <(losses_5sig "$WORK/local/metrics.jsonl") ||
  fail "per-epoch training losses differ between two hosts and one host"
for f in final_test_acc weights_digest world_size; do
  a=$(summary_field "$WORK/hosts/metrics.jsonl" $f); b=$(summary_field "$WORK/local/metrics.jsonl" $f)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$f: $a across ws1+ws2, $b on one host"
done
pass "mpirun -np 3 --host ws1:1,ws2:2 == mpirun -np 3 on one host (losses $(losses_5sig "$WORK/hosts/metrics.jsonl" | tr '\n' ' ')digest $(summary_field "$WORK/hosts/metrics.jsonl" weights_digest))"
