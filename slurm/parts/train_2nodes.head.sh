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

