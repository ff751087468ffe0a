#include "ddp/app/threads.hpp"

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "ddp/backend/cpu_backend.hpp"

namespace ddp::app {

int configure_threads(long long requested) {
  int n = static_cast<int>(requested);
  if (n <= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local = 1;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    // A rank bound to a subset of the CPUs (srun --cpus-per-task, mpirun --bind-to) owns that
    // subset; an unbound rank sees every CPU and shares them with the other ranks of its node.
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const bool bound = online > 0 && cpus < online;
    n = bound ? cpus : std::max(1, cpus / local);
  }
  backend::set_compute_threads(n);
  return n;
}

}  // namespace ddp::app
