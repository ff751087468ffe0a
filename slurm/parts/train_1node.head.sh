#!/bin/bash
# ddp_train on Slurm: 1 node, one MPI rank per GPU, gradients all-reduced with NCCL.
#
#   sbatch slurm/train_1node.sh                                    # configs/cifar.toml, 4 GPUs
#   sbatch --export=ALL,DDP_CONFIG=my.toml,DDP_ARGS="--train.epochs 30" slurm/train_1node.sh
#   sbatch --ntasks-per-node=2 slurm/train_1node.sh                # #SBATCH lines are defaults only
#
# Adapt the #SBATCH lines below to your cluster (or override them on the sbatch command line):
#   --partition, --account   which queue, which project is charged: `sinfo -s`, `sacctmgr show assoc user=$USER`
#   --ntasks-per-node        = the GPUs you want on the node (one rank per GPU); `sinfo -o "%N %G"`
#   --gpus-per-task=1        each rank gets its own GPU (on some sites: --gres=gpu:4 instead)
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
# Within one node NCCL talks over NVLink/PCIe and needs no network settings (NCCL_SOCKET_IFNAME and
# OMPI_MCA_btl_tcp_if_include matter across nodes: see train_2nodes.sh).
#
#SBATCH --job-name=ddp_train
#SBATCH --nodes=1
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

