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
# This file stands alone on purpose: sbatch stores the script when you submit it and runs that copy
# on the job's first node (again at each requeue), where a helper sourced from beside it could be
# missing, or changed while the job waited. Copy it and adapt it as you like. (In the ddp_train
# sources everything from "common body" down is slurm/parts/job_body.sh, shared by the three
# templates: edit it there, then run `cmake -P slurm/parts/assemble.cmake`; a test checks them.)
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

# ---- common body: the same in every template, from slurm/parts/job_body.sh (see the top) ----
# Settings, as environment variables (sbatch passes your environment; or --export=ALL,NAME=VALUE,...):
#   DDP_BIN       the program (default: ddp_train from PATH, after `module load ddp_train`)
#   DDP_CONFIG    configuration file (default: $DDP_TRAIN_CONFIGS/cifar.toml, set by the module file,
#                 else configs/cifar.toml in the working directory)
#   DDP_ARGS      more options for ddp_train, e.g. "--train.epochs 30 --data.root /scratch/cifar"
#   DDP_RUN_DIR   the run directory. Without it: --run-dir in DDP_ARGS, else the config's run.dir,
#                 else runs/<job name>-<job id>; relative to the working directory (the submit
#                 directory or sbatch --chdir). The log says which and why. A requeued job keeps its
#                 settings and id, so it finds its snapshots there; a new job given the directory of
#                 an earlier one continues that run (--resume auto)
#   DDP_DEVICE    cuda | cpu | auto (default: cuda in the GPU templates, cpu in train_cpu.sh)
#   DDP_THREADS   compute threads per rank (default: --cpus-per-task)
#   DDP_MODULES   modules to load, e.g. "openmpi cuda ddp_train" (default: ddp_train if it loads;
#                 "" loads none). When set, a module that fails to load, or no module system at
#                 all, ends the job with an error. Where `module` is defined for login shells only,
#                 the template sources the module system's init script first (/etc/profile.d/lmod.sh,
#                 z00_lmod.sh, modules.sh, $LMOD_PKG or $MODULESHOME /init/bash, /usr/share/{lmod/lmod,
#                 modules,Modules}/init/bash) and says which
#   DDP_MODULE_INIT  that init script, where your site keeps it elsewhere
#   DDP_SRUN_ARGS more options for srun (e.g. "--cpu-bind=cores")
#   DDP_REQUEUE   1 (default): requeue the job when ddp_train stopped on the warning; 0: just exit 75
#   DDP_SHOW_HOSTS 1 (default): print which node runs which rank before training

set -euo pipefail
: "${SLURM_JOB_ID:?submit this script with sbatch}"
log() { echo "[$(date +%T) job $SLURM_JOB_ID] $*"; }

# Signals. The warning (--signal=B:USR1@...) reaches only this shell, which traps it first thing (its
# default action would kill the shell) and passes it on to the ranks through srun (srun forwards
# SIGUSR1 to every task of the step): ddp_train stops after the current step and writes a snapshot.
# A SIGTERM reaches the ranks from Slurm directly (they stop the same way if they can before
# KillWait ends in SIGKILL); here it only tells what Slurm is doing, which `scontrol show job` knows:
# a requeue (scontrol requeue, preemption) has counted a restart; a time limit gives Reason=TimeLimit.
srun_pid=""
warned=0
terminated=""  # why Slurm sent SIGTERM: requeue | timelimit | cancel | unknown
requeueing=0   # this script has asked for the requeue itself
interrupted=0
run_dir=""
on_warning() {
  warned=1; interrupted=1
  if [ -n "$srun_pid" ]; then
    local next="then the job ends with exit code 75 (DDP_REQUEUE=0)"
    [ "${DDP_REQUEUE:-1}" != 1 ] || next="then this script requeues the job"
    log "got SIGUSR1: passing it to ddp_train, which stops with a snapshot; $next"
    kill -USR1 "$srun_pid" 2> /dev/null || true
  else
    log "got SIGUSR1 before the launch: passing it on ${DDP_SIGNAL_GRACE:-10} s after the launch"
  fi
}
on_term() {
  interrupted=1
  [ "$requeueing" = 1 ] && return  # the requeue asked for below: Slurm ends this run of the job
  local info restarts reason
  info=$(scontrol show job -o "$SLURM_JOB_ID" 2> /dev/null) || info=""
  restarts=$(sed -n 's/.* Restarts=\([0-9]*\).*/\1/p' <<< "$info")
  reason=$(sed -n 's/.* Reason=\([^ ]*\).*/\1/p' <<< "$info")
  if [ -z "$info" ]; then
    terminated=unknown
    log "got SIGTERM (cause unknown: scontrol show job failed): ddp_train stops with a snapshot if it can"
  elif [ "${restarts:-0}" -gt "${SLURM_RESTART_COUNT:-0}" ]; then
    terminated=requeue
    log "got SIGTERM: Slurm is requeueing the job (scontrol requeue or preemption); ddp_train stops" \
      "with a snapshot if it can, and the job resumes from ${run_dir:-its run directory} when it restarts"
  elif [ "$reason" = TimeLimit ]; then
    terminated=timelimit
    log "got SIGTERM: the time limit is reached (no warning signal came in time); ddp_train stops" \
      "with a snapshot if it can before Slurm kills it; the job is not requeued"
  else
    terminated=cancel
    log "got SIGTERM: Slurm is ending the job (scancel${reason:+, reason $reason}); ddp_train stops" \
      "with a snapshot if it can; the job is not requeued"
  fi
}
trap on_warning USR1
trap on_term TERM

# Software environment: the modules in DDP_MODULES. Many sites define `module` for login shells
# only (/etc/profile.d), which a batch shell is not: then source the module system's init script.
modules=${DDP_MODULES-ddp_train}
if [ -z "$modules" ]; then
  log "modules: none (DDP_MODULES is empty); ddp_train and its libraries come from PATH as it is"
else
  if ! type module > /dev/null 2>&1; then
    if [ -n "${DDP_MODULE_INIT:-}" ]; then
      inits=("$DDP_MODULE_INIT")
    else
      inits=(/etc/profile.d/lmod.sh /etc/profile.d/z00_lmod.sh /etc/profile.d/modules.sh
             ${LMOD_PKG:+"$LMOD_PKG/init/bash"} ${MODULESHOME:+"$MODULESHOME/init/bash"}
             /usr/share/lmod/lmod/init/bash /usr/share/modules/init/bash /usr/share/Modules/init/bash)
    fi
    module_init=""
    for init in "${inits[@]}"; do
      [ -f "$init" ] || continue
      set +eu  # init scripts are written for interactive shells
      # shellcheck disable=SC1090
      source "$init"
      set -eu
      if type module > /dev/null 2>&1; then module_init=$init; break; fi
    done
    if [ -z "$module_init" ]; then
      if [ -n "${DDP_MODULES+set}" ]; then
        log "error: DDP_MODULES=\"$modules\" but no module system found: \`module\` is not defined in" \
          "this batch shell and none of these init scripts defines it: ${inits[*]}. Set DDP_MODULE_INIT" \
          "to the script your login shell sources for it (\`grep -l module /etc/profile.d/*\`), or" \
          "DDP_MODULES= to load none"
        exit 2
      fi
      log "modules: no module system found (tried ${inits[*]}); ddp_train comes from PATH as it is"
      modules=""
    else
      log "modules: \`module\` was not defined in this batch shell: initialised it from $module_init"
    fi
  fi
  for m in $modules; do
    set +u  # some modulefiles read unset variables
    ok=1; module load "$m" || ok=0
    set -u
    if [ "$ok" = 0 ]; then
      if [ -n "${DDP_MODULES+set}" ]; then
        log "error: 'module load $m' failed (its message is above; \`module avail\` lists the modules)"
        exit 2
      fi
      log "warning: 'module load $m' failed; ddp_train comes from PATH as it is (set DDP_MODULES)"
    fi
  done
  [ -z "$modules" ] || log "modules loaded: ${LOADEDMODULES:-(none reported)}"
fi

bin=${DDP_BIN:-ddp_train}
command -v "$bin" > /dev/null || { log "error: '$bin' not found: module load ddp_train, or set DDP_BIN"; exit 2; }
config=${DDP_CONFIG:-${DDP_TRAIN_CONFIGS:-$PWD/configs}/cifar.toml}
threads=${DDP_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
read -r -a extra_args <<< "${DDP_ARGS:-}"
read -r -a srun_args <<< "${DDP_SRUN_ARGS:-}"

# The run directory, by the first rule that applies: DDP_RUN_DIR; --run-dir/--run.dir in DDP_ARGS;
# the config file's run.dir; runs/<job name>-<job id>. A requeued job keeps its id and its settings,
# so it finds its snapshots; a new job given the same directory continues that run (--resume auto).
for ((i = 0; i < ${#extra_args[@]}; i++)); do
  case ${extra_args[i]} in
    --run-dir | --run.dir) arg_run_dir=${extra_args[i + 1]:-} ;;
    --run-dir=* | --run.dir=*) arg_run_dir=${extra_args[i]#*=} ;;
  esac
done
# run.dir of a TOML file: `dir = "..."` under [run], or a top-level `run.dir = "..."`
config_run_dir=$(awk '
  /^[ \t]*\[/ { s = $0; gsub(/[][ \t]/, "", s); sub(/#.*/, "", s); next }
  (s == "run" && /^[ \t]*dir[ \t]*=/) || (s == "" && /^[ \t]*run\.dir[ \t]*=/) {
    v = $0; sub(/^[^=]*=[ \t]*/, "", v)
    if (v ~ /^"/) { sub(/^"/, "", v); sub(/".*/, "", v) } else if (v ~ /^\047/) { sub(/^\047/, "", v); sub(/\047.*/, "", v) }
    d = v }
  END { print d }' "$config" 2> /dev/null || true)
if [ -n "${DDP_RUN_DIR:-}" ]; then
  run_dir=$DDP_RUN_DIR why="DDP_RUN_DIR"
elif [ -n "${arg_run_dir:-}" ]; then
  run_dir=$arg_run_dir why="--run-dir in DDP_ARGS"
elif [ -n "$config_run_dir" ]; then
  run_dir=$config_run_dir why="run.dir of $config; set DDP_RUN_DIR for another"
else
  run_dir=runs/${SLURM_JOB_NAME}-${SLURM_JOB_ID} why="$config sets no run.dir: runs/<job name>-<job id>"
fi
case $run_dir in /*) ;; *) run_dir=$PWD/$run_dir ;; esac  # relative to the job's working directory

# Slurm 22.05's srun does not inherit --cpus-per-task from the job: pass it on.
[ -n "${SLURM_CPUS_PER_TASK:-}" ] && srun_args+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")
export OMP_NUM_THREADS=$threads
mkdir -p "$run_dir"
log "start (restart ${SLURM_RESTART_COUNT:-0}): $SLURM_NTASKS rank(s) on $SLURM_JOB_NODELIST, $(command -v "$bin")"
log "run dir $run_dir ($why)"
if [ "${DDP_SHOW_HOSTS:-1}" = 1 ]; then
  log "ranks per node (task: host):"
  srun "${srun_args[@]}" --label hostname | sort -n || log "warning: could not list the hosts"
fi

if [ -n "$terminated" ]; then  # Slurm is ending the job before the training started
  log "not launching ddp_train: Slurm is ending the job ($terminated)"
  exit 143
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

# What happened, in Slurm's terms, and the exit code Slurm records.
case $rc in
  0) stopped="ddp_train completed (exit 0)" ;;
  75) stopped="ddp_train stopped with a snapshot (exit 75)" ;;
  *) stopped="ddp_train ended without a new snapshot (exit $rc; a resume starts from the newest snapshot already in $run_dir, if any)" ;;
esac
resubmit="to continue, submit again with DDP_RUN_DIR=$run_dir"
case $terminated in
  requeue) log "$stopped. Slurm requeues the job (scontrol requeue or preemption): it resumes from $run_dir" ;;
  timelimit) log "$stopped. Time limit: the job is not requeued; $resubmit" ;;
  cancel | unknown) log "$stopped. After SIGTERM the job is not requeued; $resubmit" ;;
  *)
    if [ "$rc" = 75 ] && [ "${DDP_REQUEUE:-1}" = 1 ]; then
      log "$stopped: requeueing the job (scontrol requeue $SLURM_JOB_ID); it resumes from $run_dir"
      requeueing=1
      if scontrol requeue "$SLURM_JOB_ID"; then exit 0; fi
      requeueing=0
      log "requeue refused: $resubmit"
    elif [ "$rc" = 75 ]; then
      log "$stopped; not requeued (DDP_REQUEUE=0): $resubmit"
    elif [ "$rc" = 0 ]; then
      log "finished: $stopped; results in $run_dir"
    else
      log "failed: ddp_train exited with code $rc (its message is above)"
    fi
    ;;
esac
exit "$rc"
