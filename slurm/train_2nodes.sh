#!/bin/bash
# ddp_train on Slurm: 2 nodes, one MPI rank per GPU, gradients all-reduced with NCCL.
#
#   sbatch slurm/train_2nodes.sh                                   # configs/cifar.toml, 2 x 4 GPUs
#   sbatch --export=ALL,DDP_CONFIG=my.toml,DDP_ARGS="--train.epochs 30" slurm/train_2nodes.sh
#   sbatch --nodes=4 slurm/train_2nodes.sh                         # #SBATCH lines are defaults only
#
# Adapt the #SBATCH lines below to your cluster (or override them on the sbatch command line):
#   --partition, --account   which queue, which project is charged: `sinfo -s`, `sacctmgr show assoc user=$USER`
#   --ntasks-per-node        = the GPUs per node (one rank per GPU); `sinfo -o "%N %G"` shows them
#   --gpus-per-task=1        each rank gets its own GPU (on some sites: --gres=gpu:4 per node instead)
#   --cpus-per-task          CPU cores per rank for data loading and host work: cores per node / GPUs
#   --time                   wall-clock limit. 120 s before it Slurm sends SIGUSR1 to this script, which
#                            passes it to ddp_train: it finishes the step, writes a snapshot, exits 75,
#                            and the job requeues itself and resumes from that snapshot (same job id,
#                            same run directory). Long trainings thus run as a chain of short jobs.
#
# Settings, as environment variables (sbatch passes your environment; or --export=ALL,NAME=VALUE,...):
#   DDP_BIN       the program (default: ddp_train from PATH, after `module load ddp_train`)
#   DDP_CONFIG    configuration file (default: $DDP_TRAIN_CONFIGS/cifar.toml, set by the module file,
#                 else configs/cifar.toml in the working directory)
#   DDP_ARGS      more options for ddp_train, e.g. "--train.epochs 30 --data.root /scratch/cifar"
#   DDP_RUN_DIR   the run directory (default: runs/<job name>-<job id> in the working directory: the
#                 submit directory or sbatch --chdir; a requeued job keeps its id, so it finds
#                 its snapshots there)
#   DDP_DEVICE    cuda | cpu | auto (default: cuda in the GPU templates, cpu in train_cpu.sh)
#   DDP_THREADS   compute threads per rank (default: --cpus-per-task)
#   DDP_MODULES   modules to load when `module` exists (default: ddp_train; "" loads none)
#   DDP_SRUN_ARGS more options for srun (e.g. "--cpu-bind=cores")
#   DDP_REQUEUE   1 (default): requeue the job when ddp_train stopped on the warning; 0: just exit 75
#   DDP_SHOW_HOSTS 1 (default): print which node runs which rank before training
#
# Networks: when nodes have several interfaces, tell NCCL and Open MPI which one to use, e.g.
#   export NCCL_SOCKET_IFNAME=ib0          (or =^docker,lo to exclude some)
#   export OMPI_MCA_btl_tcp_if_include=ib0
# (exported here or before sbatch; `ip -br addr` on a compute node lists the interfaces).
#
#SBATCH --job-name=ddp_train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
##SBATCH --partition=gpu
##SBATCH --account=myproject
DDP_DEVICE=${DDP_DEVICE:-cuda}

# ---- common body: identical in train_1node.sh, train_2nodes.sh and train_cpu.sh (a test checks it) ----
set -euo pipefail
: "${SLURM_JOB_ID:?submit this script with sbatch}"
log() { echo "[$(date +%T) job $SLURM_JOB_ID] $*"; }

# The warning signal (--signal=B:USR1@...) reaches only this shell, which traps it first thing (its
# default action would kill the shell) and passes it on to the ranks through srun (srun forwards
# SIGUSR1 to every task of the step): ddp_train stops after the current step and writes a snapshot.
# A SIGTERM (scancel, time limit, preemption) reaches the ranks from Slurm directly; here it only
# means "do not requeue".
srun_pid=""
warned=0
terminated=0
interrupted=0
on_warning() {
  warned=1; interrupted=1
  if [ -n "$srun_pid" ]; then
    log "got SIGUSR1: passing it to ddp_train (snapshot, then requeue)"
    kill -USR1 "$srun_pid" 2> /dev/null || true
  else
    log "got SIGUSR1 before the launch: passing it on ${DDP_SIGNAL_GRACE:-10} s after the launch"
  fi
}
trap on_warning USR1
trap 'terminated=1; interrupted=1; log "got SIGTERM: the ranks stop and snapshot; no requeue"' TERM

# Software environment. Runs only where the `module` command exists; add your site's modules here
# (e.g. DDP_MODULES="openmpi cuda nccl ddp_train"), or load them before sbatch (the job inherits PATH).
if type module > /dev/null 2>&1; then
  set +u  # some modulefiles read unset variables
  for m in ${DDP_MODULES-ddp_train}; do
    module load "$m" || log "warning: 'module load $m' failed; continuing with PATH as it is"
  done
  set -u
fi

bin=${DDP_BIN:-ddp_train}
command -v "$bin" > /dev/null || { log "error: '$bin' not found: module load ddp_train, or set DDP_BIN"; exit 2; }
config=${DDP_CONFIG:-${DDP_TRAIN_CONFIGS:-$PWD/configs}/cifar.toml}
run_dir=${DDP_RUN_DIR:-$PWD/runs/${SLURM_JOB_NAME}-${SLURM_JOB_ID}}
threads=${DDP_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
read -r -a extra_args <<< "${DDP_ARGS:-}"
read -r -a srun_args <<< "${DDP_SRUN_ARGS:-}"
# Slurm 22.05's srun does not inherit --cpus-per-task from the job: pass it on.
[ -n "${SLURM_CPUS_PER_TASK:-}" ] && srun_args+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")
export OMP_NUM_THREADS=$threads
mkdir -p "$run_dir"
log "start (restart ${SLURM_RESTART_COUNT:-0}): $SLURM_NTASKS rank(s) on $SLURM_JOB_NODELIST, run dir $run_dir"
if [ "${DDP_SHOW_HOSTS:-1}" = 1 ]; then
  log "ranks per node (task: host):"
  srun "${srun_args[@]}" --label hostname | sort -n || log "warning: could not list the hosts"
fi

srun --mpi=pmix "${srun_args[@]}" "$bin" --config "$config" --run-dir "$run_dir" --resume auto \
  --runtime.threads "$threads" --runtime.device "$DDP_DEVICE" "${extra_args[@]}" &
srun_pid=$!
if [ "$warned" = 1 ]; then  # the warning came early: give the ranks time to install their handlers
  (sleep "${DDP_SIGNAL_GRACE:-10}"; kill -USR1 "$srun_pid" 2> /dev/null) &
fi
while :; do  # `wait` returns early when a trapped signal arrives; then wait again for srun itself
  interrupted=0
  rc=0; wait "$srun_pid" || rc=$?
  [ "$interrupted" = 1 ] || break
done

if [ "$rc" = 75 ] && [ "$terminated" = 0 ] && [ "${DDP_REQUEUE:-1}" = 1 ]; then
  log "ddp_train stopped with a snapshot (exit 75): requeueing; the job resumes from $run_dir"
  if scontrol requeue "$SLURM_JOB_ID"; then exit 0; fi
  log "requeue refused; resubmit the same template with --export=ALL,DDP_RUN_DIR=$run_dir to resume"
fi
log "done: exit code $rc"
exit "$rc"
