#include "ddp/runtime/runtime.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/runtime/launch_check.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/runtime/singleton.hpp"
#include "request_wait.hpp"

namespace ddp::runtime {
namespace {

// One rank's host name as exchanged at start. Full names, not only their hashes (as llm.c and
// nccl-tests exchange): a hash collision must not put two hosts' ranks on one "node".
struct HostRecord {
  std::array<char, 256> name{};
};

// Waits for the start-up's one collective under `timeout_s` (<= 0: forever): a rank that died or
// hangs between MPI_Init and here must not leave the others waiting without a word. The
// communicator that names missing ranks (comm::MpiComm) does not exist yet, so this says only
// what it knows, and ends the job.
void wait_or_abort(MPI_Request& req, double timeout_s, int rank, int size) {
  if (detail::wait_within(req, timeout_s)) return;
  std::fprintf(stderr,
               "ddp_train: error (rank %d of %d): start-up: the exchange of host names (the "
               "first collective after MPI_Init) did not complete within %g s "
               "(DDP_COMM_TIMEOUT_S, default 300): some rank died or hangs before reaching "
               "it; aborting the job\n",
               rank, size, timeout_s);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace

namespace {

// srun without PMIx (--mpi=none, or pmi2 with Debian's Open MPI) makes Open MPI abort inside
// MPI_Init with a generic message before any check of ours could run: apply the launch check to
// the environment first, as the singleton each task would become (rank 0 of 1). A working PMIx
// launch sets PMIX_RANK; mpirun sets OMPI_COMM_WORLD_SIZE.
void refuse_srun_without_pmix() {
  int initialized = 0;
  MPI_Initialized(&initialized);  // by an embedding program (or a test): past that point already
  if (initialized || std::getenv("PMIX_RANK") || std::getenv("OMPI_COMM_WORLD_SIZE")) return;
  std::string errors;
  for (const auto& p : check_launch(0, 1, read_launch_env()))
    if (p.severity == LaunchProblem::Severity::error) errors += p.message;
  if (errors.empty()) {
    prepare_singleton_environment();
    return;
  }
  std::fprintf(stderr, "ddp_train: error (rank 0 of 1): %s\n", errors.c_str());
  std::exit(1);
}

}  // namespace

Runtime::Runtime(int* argc, char*** argv, double startup_timeout_s)
    : launch_env_((refuse_srun_without_pmix(), read_launch_env())) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // FUNNELED: only the main thread calls MPI (the batch loader never does).
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw SystemError("MPI_Init_thread failed");
    finalize_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) host_ = name;

  HostRecord mine;
  std::strncpy(mine.name.data(), host_.c_str(), mine.name.size() - 1);
  std::vector<HostRecord> all(static_cast<std::size_t>(size_));
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD,
                 &req);
  wait_or_abort(req, startup_timeout_s, rank_, size_);
  std::vector<std::string> hosts;
  hosts.reserve(all.size());
  for (const auto& r : all) hosts.emplace_back(r.name.data());
  const auto placement = assign_local_ranks(hosts);
  const auto& me = placement[static_cast<std::size_t>(rank_)];
  local_rank_ = me.local_rank;
  local_size_ = me.local_size;
  for (const auto& p : placement) num_nodes_ = std::max(num_nodes_, p.node + 1);
}

Runtime::~Runtime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalize_ && !finalized) MPI_Finalize();
}

bool stdout_is_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK")) return true;
  const std::string fd = "/proc/" + std::to_string(getppid()) + "/fd/1";
  char target[256] = {};
  const ssize_t n = readlink(fd.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string t(target, static_cast<std::size_t>(n));
  return t.rfind("/dev/pts/", 0) == 0 || t.rfind("/dev/tty", 0) == 0;
}

void Runtime::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace ddp::runtime
