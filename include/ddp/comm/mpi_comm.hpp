#pragma once
// Communicator over MPI_COMM_WORLD (host buffers).
#include <mpi.h>

#include <vector>

#include "ddp/comm/communicator.hpp"

namespace ddp::comm {

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(MPI_Comm comm = MPI_COMM_WORLD);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(std::span<float> data) override;
  void allreduce_sum(std::span<double> data) override;
  void allreduce_sum(std::span<std::int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void barrier() override;
  Request iallreduce_sum(std::span<float> data) override;
  bool test(Request& r) override;
  void wait(Request& r) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;  // slot per outstanding request; MPI_REQUEST_NULL when free
};

}  // namespace ddp::comm
