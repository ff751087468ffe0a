#pragma once
// `ddp_train doctor`: checks a launch before a user trusts it with a training run, under srun,
// mpirun or alone. It prints the rank table, then one verdict per check — config (the
// configuration loads and passes every check training makes before it starts), launch (MPI's view
// vs. the launcher's), binding (no rank bound to fewer CPUs than its host gives each rank), devices
// (GPU per rank, no GPU shared or oversubscribed), network (interfaces per host, which ones MPI and
// NCCL would use), dataset (readable on every rank that needs it, and the same copy everywhere),
// collectives (exact results), and, when every rank has a GPU of its own, nccl (the same
// collectives through NcclComm) — and all-reduce bandwidth sweeps (MPI; NCCL on device buffers with
// GPUs).
#include <cstddef>
#include <ostream>
#include <string>

#include "ddp/app/config.hpp"
#include "ddp/runtime/runtime.hpp"

namespace ddp::app {

struct DoctorOptions {
  // Why the configuration cannot train ("" when it can): the first check, [FAIL] with it.
  std::string config_error;
  bool dataset_configured = false;  // a config file or data.* override names the dataset
  bool sweep = true;                // run the all-reduce bandwidth sweep
  std::size_t sweep_max_bytes = std::size_t{64} << 20;
  int sweep_iterations = 20;
};

// Collective over MPI_COMM_WORLD. Rank 0 prints to `out`, ending with "all checks passed", "passed
// with N warning(s)" or "N check(s) failed". Returns the exit code, the same on every rank: 0 when
// no check failed (warnings allowed), 1 when any failed.
int run_doctor(const Config& cfg, const runtime::Runtime& rt, const DoctorOptions& options,
               std::ostream& out);

}  // namespace ddp::app
