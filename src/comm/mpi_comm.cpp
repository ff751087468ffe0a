#include "ddp/comm/mpi_comm.hpp"

#include <climits>
#include <string>

#include "ddp/error.hpp"

namespace ddp::comm {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw SystemError(std::string(what) + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

// MPI counts are int: split very large buffers into chunks.
template <class T>
void allreduce_chunks(std::span<T> data, MPI_Datatype type, MPI_Comm comm) {
  constexpr std::size_t kChunk = INT_MAX / 2;
  for (std::size_t off = 0; off < data.size(); off += kChunk) {
    const auto n = static_cast<int>(std::min(kChunk, data.size() - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data.data() + off, n, type, MPI_SUM, comm), "MPI_Allreduce");
  }
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void MpiComm::allreduce_sum(std::span<float> data) { allreduce_chunks(data, MPI_FLOAT, comm_); }
void MpiComm::allreduce_sum(std::span<double> data) { allreduce_chunks(data, MPI_DOUBLE, comm_); }
void MpiComm::allreduce_sum(std::span<std::int64_t> data) {
  allreduce_chunks(data, MPI_INT64_T, comm_);
}

void MpiComm::broadcast(std::span<std::byte> data, int root) {
  constexpr std::size_t kChunk = INT_MAX / 2;
  for (std::size_t off = 0; off < data.size(); off += kChunk) {
    const auto n = static_cast<int>(std::min(kChunk, data.size() - off));
    check(MPI_Bcast(data.data() + off, n, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

void MpiComm::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace ddp::comm
