#pragma once
// Waiting for a start-up collective of the runtime (internal to src/runtime): MPI_Test in a loop
// with a growing pause, under a time limit, before the communicator that names missing ranks
// (comm::MpiComm) exists.
#include <mpi.h>

namespace ddp::runtime::detail {

// True when `req` completed within limit_s seconds (<= 0: no limit), false when the time ran out.
bool wait_within(MPI_Request& req, double limit_s);

}  // namespace ddp::runtime::detail
