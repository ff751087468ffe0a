#pragma once
// MPI return codes -> ddp::SystemError with MPI's own explanation (our communicators use
// MPI_ERRORS_RETURN, so a failure reaches the caller instead of killing the process unexplained).
#include <mpi.h>

#include <string>

#include "ddp/error.hpp"

namespace ddp::comm::detail {

inline std::string mpi_error_text(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(msg, static_cast<std::size_t>(len));
}

inline void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw SystemError(what + " failed: " + mpi_error_text(rc));
}

}  // namespace ddp::comm::detail
