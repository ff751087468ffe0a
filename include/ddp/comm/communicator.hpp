#pragma once
// One communication interface for the training loop: MPI on host buffers now, NCCL on device
// buffers later. All calls are collective over the job's ranks.
#include <cstdint>
#include <span>

namespace ddp::comm {

// Handle of a non-blocking collective (an index into the communicator's table of requests).
struct Request {
  std::int64_t id = -1;
};

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

  // Non-blocking in-place sum: `data` must stay untouched until test() returned true or wait()
  // returned. Requests complete in any order.
  virtual Request iallreduce_sum(std::span<float> data) = 0;
  virtual bool test(Request& r) = 0;
  virtual void wait(Request& r) = 0;
};

}  // namespace ddp::comm
