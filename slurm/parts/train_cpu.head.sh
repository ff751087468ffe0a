#!/bin/bash
# ddp_train on Slurm, CPU only: 2 nodes x 2 ranks (e.g. one per socket), gradients all-reduced over MPI.
#
#   sbatch slurm/train_cpu.sh                                      # configs/cifar.toml
#   sbatch --export=ALL,DDP_CONFIG=my.toml,DDP_ARGS="--train.epochs 30" slurm/train_cpu.sh
#   sbatch --nodes=1 --ntasks-per-node=1 --cpus-per-task=32 slurm/train_cpu.sh
#
# Adapt the #SBATCH lines below to your cluster (or override them on the sbatch command line):
#   --partition, --account   which queue, which project is charged: `sinfo -s`, `sacctmgr show assoc user=$USER`
#   --nodes, --ntasks-per-node  ranks; one rank per socket (NUMA domain) with many threads is usually
#                            fastest on CPUs (`lscpu` shows sockets and cores)
#   --cpus-per-task          cores per rank; ddp_train runs that many compute threads (DDP_THREADS)
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
# Networks: when nodes have several interfaces, tell Open MPI which one to use, e.g.
#   export OMPI_MCA_btl_tcp_if_include=ib0    (`ip -br addr` on a compute node lists them)
#
#SBATCH --job-name=ddp_train_cpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=16
#SBATCH --time=04:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
##SBATCH --partition=cpu
##SBATCH --account=myproject
DDP_DEVICE=${DDP_DEVICE:-cpu}

