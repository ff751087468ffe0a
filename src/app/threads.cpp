#include "ddp/app/threads.hpp"

#include <sched.h>

#include <algorithm>
#include <string>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/runtime/cpu_binding.hpp"

namespace ddp::app {
namespace {

// The CPUs this process may run on (sched_getaffinity), at least 1.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

}  // namespace

int max_compute_threads(int cpus) {
  return kThreadsPerCpu * std::max(1, cpus);
}

int configure_threads(long long requested, int local_size) {
  const int cpus = usable_cpus();
  if (requested > max_compute_threads(cpus)) {
    // Far more threads than cores only slows a rank down, and OpenMP's runtime dies (SIGSEGV in
    // libgomp) creating tens of thousands of them: refuse with the limit instead.
    throw ConfigError("runtime.threads = " + std::to_string(requested) + ": at most " +
                      std::to_string(max_compute_threads(cpus)) + " (" +
                      std::to_string(kThreadsPerCpu) + " x the " + std::to_string(cpus) +
                      " CPU(s) this rank may use); 0 uses one thread per CPU");
  }
  int n = static_cast<int>(requested);
  if (n <= 0) {
    // A rank bound to a subset of the job's CPUs on this host (srun --cpus-per-task, mpirun
    // --bind-to) owns that subset; an unbound rank sees them all and shares them with the other
    // ranks of its host (counted by host name at start, runtime::Runtime::local_size, with no
    // collective here). The job's CPUs are the online ones narrowed by a cgroup cpuset or Slurm's
    // allocation (runtime/cpu_binding.hpp): in a container every process sees only its cpuset,
    // which binds no rank.
    const int node = runtime::node_cpus().cpus;
    const bool bound = cpus < node;
    n = bound ? cpus : std::max(1, std::min(cpus, node) / std::max(1, local_size));
  }
  backend::set_compute_threads(n);
  return n;
}

}  // namespace ddp::app
