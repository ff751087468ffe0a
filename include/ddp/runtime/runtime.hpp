#pragma once
// The process's place in the world: MPI lifetime (RAII), rank and size. The one piece of global
// state the program has; everything else receives what it needs from here.
#include <string>

namespace ddp::runtime {

class Runtime {
 public:
  // Initialises MPI (a singleton of size 1 when not launched by mpirun/srun).
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }
  bool is_root() const { return rank_ == 0; }

  // Ends every rank of the job now (after an error on one rank), so the scheduler frees the nodes.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
  bool finalize_ = false;
};

// Whether what this process prints reaches a terminal. Under mpirun the ranks' stdout is a pty that
// mpirun forwards, so the answer is whether mpirun's own stdout (our parent's) is a terminal.
bool stdout_is_terminal();

}  // namespace ddp::runtime
