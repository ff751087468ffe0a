#pragma once
// The process's place in the world: MPI lifetime (RAII), rank and size. The one piece of global
// state the program has; everything else receives what it needs from here.
#include <map>
#include <string>

namespace ddp::runtime {

// The launcher's environment variables (SLURM_*, OMPI_COMM_WORLD_*, PMI*), name -> value.
using LaunchEnv = std::map<std::string, std::string>;

class Runtime {
 public:
  // Initialises MPI (a singleton of size 1 when not launched by mpirun/srun) and finds each rank's
  // node-local placement (collective: an allgather of host names, which ends the job after
  // `startup_timeout_s` seconds, <= 0: never, when some rank does not take part).
  Runtime(int* argc, char*** argv, double startup_timeout_s = 300.0);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }
  bool is_root() const { return rank_ == 0; }
  // Position among the ranks on this host and how many there are (by host name, see rank_info.hpp).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Number of distinct hosts in the job.
  int num_nodes() const { return num_nodes_; }
  // The launcher's variables as they were before MPI_Init (an Open MPI singleton sets PMIX_RANK
  // itself during init, which would hide how the process was really started).
  const LaunchEnv& launch_env() const { return launch_env_; }

  // Ends every rank of the job now (after an error on one rank), so the scheduler frees the nodes.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int num_nodes_ = 1;
  std::string host_;
  LaunchEnv launch_env_;
  bool finalize_ = false;
};

// Whether what this process prints reaches a terminal. Under mpirun the ranks' stdout is a pty that
// mpirun forwards, so the answer is whether mpirun's own stdout (our parent's) is a terminal.
bool stdout_is_terminal();

}  // namespace ddp::runtime
