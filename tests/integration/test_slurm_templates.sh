#!/usr/bin/env bash
# The batch templates in slurm/, without a cluster (seconds; the real-cluster tests are
# test_slurm_2nodes.sh and test_slurm_requeue.sh):
#  - each parses (bash -n) and carries the settings the README promises (warning signal to the batch
#    shell, requeue, appended log, srun --mpi=pmix, --resume auto, guarded module loads, GPU options);
#  - the part below "common body" is identical in all three, so a fix in one cannot miss the others;
#  - they have one source: each is what slurm/parts/assemble.cmake writes (its head in slurm/parts/,
#    then slurm/parts/job_body.sh), so that an edit of a part cannot go without the templates;
#  - the signal logic, with stand-ins for srun/scontrol/ddp_train on PATH: SIGUSR1 to the batch shell
#    reaches the training process, whose exit code 75 makes the template call `scontrol requeue JOBID`
#    and exit 0; with DDP_REQUEUE=0 it exits 75; a normal end exits 0 without requeue; and a
#    failing run passes its exit code on; each says so in the log;
#  - the run directory: DDP_RUN_DIR, else --run-dir in DDP_ARGS, else the config's run.dir, else
#    runs/<job name>-<job id>, relative to the working directory; the log names it and the rule.
# (Module loading: test_slurm_template_modules.sh.)
source "$(dirname "$0")/lib.sh" || exit 2  # it sets WORK, where the stand-ins are written
T=$SRC/slurm
body() { sed -n '/^# ---- common body/,$p' "$1"; }
for t in train_1node.sh train_2nodes.sh train_cpu.sh; do
  f=$T/$t
  bash -n "$f" || fail "$t does not parse"
  for want in '^#!/bin/bash' '^#SBATCH --signal=B:USR1@120$' '^#SBATCH --requeue$' '^#SBATCH --open-mode=append$' \
              '^#SBATCH --time=' '^#SBATCH --cpus-per-task=' '^##SBATCH --partition=' '^##SBATCH --account=' \
              '^set -euo pipefail$' 'srun --mpi=pmix ' '--resume auto' 'if ! type module ' 'scontrol requeue' \
              'NCCL_SOCKET_IFNAME|OMPI_MCA_btl_tcp_if_include' '^trap on_warning USR1$'; do
    grep -Eq -- "$want" "$f" || fail "$t: no line matching '$want'"
  done
  [ -n "$(body "$f")" ] || fail "$t: no common body marker"
  diff <(body "$T/train_2nodes.sh") <(body "$f") > /dev/null || fail "$t: common body differs from train_2nodes.sh"
done
# The committed templates (what a checkout submits) are exactly what their one source assembles, and
# there are no more or fewer of them.
command -v cmake > /dev/null || fail "cmake not found (it assembles the templates)"
cmake -DOUT_DIR="$WORK/assembled" -P "$T/parts/assemble.cmake" || fail "slurm/parts/assemble.cmake failed"
[ "$(cd "$WORK/assembled" && ls)" = "$(printf '%s\n' train_1node.sh train_2nodes.sh train_cpu.sh)" ] ||
  fail "slurm/parts/ assembles other templates than train_1node.sh train_2nodes.sh train_cpu.sh: $(ls "$WORK/assembled")"
for t in train_1node.sh train_2nodes.sh train_cpu.sh; do
  diff -u "$T/$t" "$WORK/assembled/$t" ||
    fail "slurm/$t is not what slurm/parts/ assembles (diff above): edit slurm/parts/, then run cmake -P slurm/parts/assemble.cmake"
  [ -x "$T/$t" ] || fail "slurm/$t is not executable"
done
for t in train_1node.sh train_2nodes.sh; do
  grep -q '^#SBATCH --gpus-per-task=1$' "$T/$t" || fail "$t: no --gpus-per-task=1"
  grep -q 'NCCL_SOCKET_IFNAME' "$T/$t" || [ $t = train_1node.sh ] || fail "$t: no NCCL_SOCKET_IFNAME advice"
done
grep -q '^#SBATCH --nodes=2$' "$T/train_2nodes.sh" || fail "train_2nodes.sh: not 2 nodes"
grep -q '^#SBATCH --nodes=1$' "$T/train_1node.sh" || fail "train_1node.sh: not 1 node"
! grep -q 'gpus' "$T/train_cpu.sh" || fail "train_cpu.sh asks for GPUs"

# Stand-ins: srun runs its command here (dropping its own options); scontrol records its arguments;
# the "trainer" traps SIGUSR1 like ddp_train (exit 75) and otherwise ends after 20 s with $FAKE_RC.
mkdir -p "$WORK/bin"
cat > "$WORK/bin/srun" <<'EOF'
#!/bin/bash
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
if [ "$1" = hostname ]; then touch "$FAKE_DIR/hosts.started"; sleep 1; echo "0: fake"; exit 0; fi
exec "$@"
EOF
cat > "$WORK/bin/scontrol" <<'EOF'
#!/bin/bash
echo "scontrol $*" >> "$FAKE_DIR/scontrol.log"
EOF
cat > "$WORK/bin/trainer" <<'EOF'
#!/bin/bash
echo "trainer $*" > "$FAKE_DIR/trainer.args"
trap 'echo "trainer: stop on USR1"; exit 75' USR1
touch "$FAKE_DIR/trainer.started"
for ((i = 0; i < 200; i++)); do sleep 0.1; [ -f "$FAKE_DIR/trainer.finish" ] && exit "${FAKE_RC:-0}"; done
exit "${FAKE_RC:-0}"
EOF
chmod +x "$WORK/bin/"*

# run_case NAME SIGNAL|none|early [ENV...]: runs train_cpu.sh as a batch script would be, signals it
# once the trainer runs (early: SIGUSR1 while it lists the hosts, before the launch); prints its exit code.
run_case() {
  local name=$1 sig=$2 pid rc; shift 2
  export FAKE_DIR="$WORK/$name"
  mkdir -p "$FAKE_DIR"
  (cd "$FAKE_DIR" && exec env PATH="$WORK/bin:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NAME=fake SLURM_NTASKS=2 \
     SLURM_JOB_NODELIST='n[1-2]' SLURM_CPUS_PER_TASK=3 DDP_BIN=trainer DDP_MODULES= DDP_SHOW_HOSTS=0 \
     DDP_CONFIG=c.toml DDP_ARGS="--train.epochs 7" "$@" bash "$T/train_cpu.sh") > "$FAKE_DIR/log" 2>&1 &
  pid=$!
  wait_for_file() { for ((i = 0; i < 100; i++)); do [ -f "$1" ] && return 0; sleep 0.1; done; return 1; }
  if [ "$sig" = early ]; then
    wait_for_file "$FAKE_DIR/hosts.started" || { cat "$FAKE_DIR/log"; fail "$name: the host listing never started"; }
    kill -USR1 $pid
  fi
  wait_for_file "$FAKE_DIR/trainer.started" || { cat "$FAKE_DIR/log"; fail "$name: the trainer never started"; }
  case "$sig" in
    none) touch "$FAKE_DIR/trainer.finish" ;;  # a normal end
    early) ;;                                   # the template passes the early warning on by itself
    *) kill -"$sig" $pid ;;
  esac
  rc=0; wait $pid || rc=$?
  echo "$rc"
}
rc=$(run_case warned USR1)
[ "$rc" = 0 ] || { cat "$WORK/warned/log"; fail "after SIGUSR1 the template exited $rc, expected 0 (requeued)"; }
grep -q 'trainer: stop on USR1' "$WORK/warned/log" || fail "SIGUSR1 did not reach the training process"
grep -qx 'scontrol requeue 42' "$WORK/warned/scontrol.log" || fail "no 'scontrol requeue 42' after exit 75"
args=$(cat "$WORK/warned/trainer.args")
for want in "--config c.toml" "--run-dir $WORK/warned/runs/fake-42" "--resume auto" "--runtime.threads 3" \
            "--runtime.device cpu" "--train.epochs 7"; do
  [[ "$args" == *"$want"* ]] || fail "the trainer did not get '$want': $args"
done

# The warning before the launch must neither kill the batch shell nor get lost: it is passed on
# DDP_SIGNAL_GRACE seconds after the launch.
rc=$(run_case early early DDP_SHOW_HOSTS=1 DDP_SIGNAL_GRACE=1)
[ "$rc" = 0 ] || { cat "$WORK/early/log"; fail "SIGUSR1 before the launch: exit $rc, expected 0 (requeued)"; }
grep -q 'trainer: stop on USR1' "$WORK/early/log" || { cat "$WORK/early/log"; fail "an early SIGUSR1 never reached the trainer"; }
grep -qx 'scontrol requeue 42' "$WORK/early/scontrol.log" || fail "no requeue after an early SIGUSR1"

rc=$(run_case norequeue USR1 DDP_REQUEUE=0)
[ "$rc" = 75 ] || fail "DDP_REQUEUE=0: exit $rc, expected 75"
[ ! -f "$WORK/norequeue/scontrol.log" ] || fail "DDP_REQUEUE=0 still requeued"

grep -q 'ddp_train stopped with a snapshot (exit 75): requeueing the job (scontrol requeue 42)' "$WORK/warned/log" ||
  { cat "$WORK/warned/log"; fail "the requeue is not announced"; }
grep -q 'not requeued (DDP_REQUEUE=0)' "$WORK/norequeue/log" || { cat "$WORK/norequeue/log"; fail "DDP_REQUEUE=0 is not explained"; }
grep -qF "run dir $WORK/warned/runs/fake-42 (c.toml sets no run.dir: runs/<job name>-<job id>)" "$WORK/warned/log" ||
  { cat "$WORK/warned/log"; fail "the default run directory is not printed with its rule"; }

rc=$(run_case normal none)
[ "$rc" = 0 ] || { cat "$WORK/normal/log"; fail "a normal end exited $rc"; }
[ ! -f "$WORK/normal/scontrol.log" ] || fail "a normal end requeued the job"
grep -q 'finished: ddp_train completed (exit 0)' "$WORK/normal/log" || { cat "$WORK/normal/log"; fail "a normal end is not reported"; }

rc=$(run_case failing none FAKE_RC=3)
[ "$rc" = 3 ] || fail "a failing run exited $rc, expected its exit code 3"
[ ! -f "$WORK/failing/scontrol.log" ] || fail "a failing run requeued the job"
grep -q 'failed: ddp_train exited with code 3' "$WORK/failing/log" || { cat "$WORK/failing/log"; fail "a failure is not reported"; }

# The run directory. A config whose run.dir is set (as in the example configs) is honoured, relative
# to the job's working directory; DDP_ARGS and DDP_RUN_DIR come before it.
mkdir -p "$WORK/cfgdir" "$WORK/cfgarg" "$WORK/cfgenv"
for d in cfgdir cfgarg cfgenv; do
  printf '[data]\nroot = "x"  # [run]\n\n[run]  # where\nsave = 1\ndir = "from_config/r1"  # metrics\n' > "$WORK/$d/c.toml"
done
run_case cfgdir none > /dev/null
grep -q -- "--run-dir $WORK/cfgdir/from_config/r1 " "$WORK/cfgdir/trainer.args" ||
  fail "the config's run.dir was not used: $(cat "$WORK/cfgdir/trainer.args")"
grep -qF "run dir $WORK/cfgdir/from_config/r1 (run.dir of c.toml" "$WORK/cfgdir/log" ||
  { cat "$WORK/cfgdir/log"; fail "the config's run directory is not printed with its rule"; }
run_case cfgarg none DDP_ARGS="--train.epochs 7 --run-dir from_args" > /dev/null
grep -q -- "--run-dir $WORK/cfgarg/from_args " "$WORK/cfgarg/trainer.args" || fail "--run-dir in DDP_ARGS was not used"
grep -qF "run dir $WORK/cfgarg/from_args (--run-dir in DDP_ARGS)" "$WORK/cfgarg/log" || { cat "$WORK/cfgarg/log"; fail "DDP_ARGS's run dir not printed"; }
run_case cfgenv none DDP_RUN_DIR="$WORK/elsewhere" DDP_ARGS="--run.dir from_args" > /dev/null
grep -q -- "--run-dir $WORK/elsewhere " "$WORK/cfgenv/trainer.args" || fail "DDP_RUN_DIR was not used"
grep -qF "run dir $WORK/elsewhere (DDP_RUN_DIR)" "$WORK/cfgenv/log" || { cat "$WORK/cfgenv/log"; fail "DDP_RUN_DIR not printed"; }
pass "templates parse, are assembled from slurm/parts/, share one body, forward SIGUSR1, requeue on 75 only, say what happened; run dir by DDP_RUN_DIR > DDP_ARGS > config > job"
