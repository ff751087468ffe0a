#include "ddp/runtime/runtime.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "ddp/error.hpp"

namespace ddp::runtime {

Runtime::Runtime(int* argc, char*** argv) {
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
