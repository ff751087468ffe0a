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

Request MpiComm::iallreduce_sum(std::span<float> data) {
  if (data.size() > static_cast<std::size_t>(INT_MAX))
    throw SystemError("MPI_Iallreduce: bucket of " + std::to_string(data.size()) +
                      " floats exceeds MPI's int count; lower comm.bucket_mb");
  std::size_t slot = 0;
  while (slot < requests_.size() && requests_[slot] != MPI_REQUEST_NULL) ++slot;
  if (slot == requests_.size()) requests_.push_back(MPI_REQUEST_NULL);
  check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                       comm_, &requests_[slot]),
        "MPI_Iallreduce");
  return Request{static_cast<std::int64_t>(slot)};
}

bool MpiComm::test(Request& r) {
  if (r.id < 0) return true;
  int done = 0;
  check(MPI_Test(&requests_[static_cast<std::size_t>(r.id)], &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) r.id = -1;
  return done != 0;
}

void MpiComm::wait(Request& r) {
  if (r.id < 0) return;
  check(MPI_Wait(&requests_[static_cast<std::size_t>(r.id)], MPI_STATUS_IGNORE), "MPI_Wait");
  r.id = -1;
}

}  // namespace ddp::comm
