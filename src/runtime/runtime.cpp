#include "ddp/runtime/runtime.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>

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

void Runtime::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace ddp::runtime
