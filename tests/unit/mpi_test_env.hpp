#pragma once
// MPI for the unit tests that need it. The unit-test binary is shared with tests that never touch
// MPI: a test initialises it lazily (ensure_mpi), and it is finalised at the end only if a test
// here initialised it (under mpirun the same binary runs the multi-rank tests).
#include <gtest/gtest.h>
#include <mpi.h>

#include "ddp/runtime/singleton.hpp"

namespace ddp::testing {

inline bool g_mpi_initialised_here = false;

inline void ensure_mpi() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) return;
  // Outside mpirun the test process is a singleton, set up as ddp_train's Runtime sets up its
  // own: ctest -j runs many at once.
  runtime::prepare_singleton_environment();
  int provided = 0;
  ASSERT_EQ(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), MPI_SUCCESS);
  g_mpi_initialised_here = true;
}

class MpiFinalizer : public ::testing::Environment {
 public:
  void TearDown() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (g_mpi_initialised_here && !finalised) MPI_Finalize();
  }
};
// One registration for the whole binary (an inline variable is one object in every file).
[[maybe_unused]] inline ::testing::Environment* const g_mpi_finalizer =
    ::testing::AddGlobalTestEnvironment(new MpiFinalizer);

}  // namespace ddp::testing
