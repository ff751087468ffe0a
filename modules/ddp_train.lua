-- Lmod module file for ddp_train @DDP_VERSION@.
-- A template: `cmake --install` writes it to PREFIX/modulefiles/ddp_train/@DDP_VERSION@.lua with the
-- install prefix filled in (modules/install.cmake). Then:
--   module use PREFIX/modulefiles
--   module load ddp_train
help([[
ddp_train @DDP_VERSION@: synchronous data-parallel training of convolutional image classifiers
over MPI (CPU: oneDNN; GPU: cuDNN + NCCL), one process per rank.

  ddp_train --config $DDP_TRAIN_CONFIGS/fashion_mnist.toml         one process
  srun --mpi=pmix ddp_train --config $DDP_TRAIN_CONFIGS/cifar.toml  inside a Slurm allocation
  sbatch $DDP_TRAIN_SLURM/train_2nodes.sh                           a batch job; read its comments
  mpirun -np 3 --host a:1,b:2 ddp_train --config ...                workstations, no scheduler
  ddp_train --help                                                  every option, with its default

This module sets PATH, DDP_TRAIN_HOME (the installation), DDP_TRAIN_CONFIGS (example
configurations) and DDP_TRAIN_SLURM (batch templates to copy and adapt).
ddp_train needs the MPI library it was built with at run time.
]])

whatis("Name: ddp_train")
whatis("Version: @DDP_VERSION@")
whatis("Category: machine learning, MPI, Slurm")
whatis("Description: data-parallel CNN training over MPI (srun, sbatch, mpirun)")

local prefix = "@DDP_PREFIX@"
prepend_path("PATH", pathJoin(prefix, "@DDP_BINDIR@"))
setenv("DDP_TRAIN_HOME", prefix)
setenv("DDP_TRAIN_CONFIGS", pathJoin(prefix, "@DDP_DATADIR@/ddp_train/configs"))
setenv("DDP_TRAIN_SLURM", pathJoin(prefix, "@DDP_DATADIR@/ddp_train/slurm"))

-- Where the MPI (and CUDA) that ddp_train was built with is itself a module, load it here, e.g.:
-- depends_on("openmpi")
