#pragma once
// Cross-check of MPI's view of the world against the launcher's environment. Rank and size always
// come from MPI; the environment only serves to diagnose a mis-launch. The classic one: `srun`
// without a working PMIx starts N tasks that each initialise MPI as a singleton (rank 0 of 1), so N
// copies train alone and nothing fails until the user notices N identical logs.
#include <string>
#include <vector>

#include "ddp/runtime/runtime.hpp"

namespace ddp::runtime {

struct LaunchProblem {
  enum class Severity { warning, error };
  Severity severity = Severity::error;
  std::string message;  // what happened and what to do, one paragraph
};

// The variables check_launch looks at.
const std::vector<std::string>& launch_env_names();
// Those of launch_env_names() that are set in this process's environment now.
LaunchEnv read_launch_env();

// Pure: the problems with being rank `rank` of `size` under environment `env`. Empty when all
// agree.
//
// SLURM_* are taken as describing this process only when it is an srun task: SLURM_STEP_ID names a
// real step (not the batch script or the extern step) and OMPI_COMM_WORLD_SIZE is absent. Under
// mpirun inside an allocation the ranks inherit the SLURM_* of mpirun's daemons (task = node),
// which say nothing about the ranks.
std::vector<LaunchProblem> check_launch(int rank, int size, const LaunchEnv& env);

// The problems of `problems` of the given severity, as one text (messages separated by newlines).
std::string join_problems(const std::vector<LaunchProblem>& problems,
                          LaunchProblem::Severity severity);

// Checks this process's launch (rt.launch_env(), captured before MPI_Init). Prints the warnings to
// stderr ("ddp_train: warning (rank R of N): ..."); throws ddp::Error with every error's message.
// Call right after constructing the Runtime, before any collective that a mis-launch would break.
void check_launch_or_throw(const Runtime& rt);

}  // namespace ddp::runtime
