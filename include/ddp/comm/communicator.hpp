#pragma once
// One communication interface for the training loop: MPI on host buffers now, NCCL on device
// buffers later. All calls are collective over the job's ranks.
#include <cstdint>
#include <span>

namespace ddp::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place element-wise sum over all ranks.
  virtual void allreduce_sum(std::span<float> data) = 0;
  virtual void allreduce_sum(std::span<double> data) = 0;
  virtual void allreduce_sum(std::span<std::int64_t> data) = 0;
  // Rank `root`'s bytes to everyone.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  virtual void barrier() = 0;
};

}  // namespace ddp::comm
