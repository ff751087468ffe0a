#pragma once
// One communication interface for the training loop: MPI on host buffers now, NCCL on device
// buffers later. All calls are collective over the job's ranks and must be made in the same order
// on every rank.
#include <cstddef>
#include <cstdint>
#include <span>

namespace ddp::comm {

// Handle of a non-blocking operation, issued by one communicator and completed by its wait() or
// test(). A default-constructed (or completed) Request is empty: waiting on it returns at once.
class Request {
 public:
  Request() = default;
  explicit Request(std::uint64_t id) : id_(id) {}
  bool empty() const { return id_ == 0; }
  std::uint64_t id() const { return id_; }

 private:
  std::uint64_t id_ = 0;
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

  // Every rank's `mine` (same size on all ranks) into `all` (size() * mine.size() bytes, rank
  // order). The default broadcasts each rank's part in turn; implementations override it.
  virtual void allgather(std::span<const std::byte> mine, std::span<std::byte> all);

  // Non-blocking in-place sum: starts the reduction and returns; `data` must stay alive and
  // untouched until wait() or test() reports completion. Requests may complete in any order.
  // The default reduces at once (blocking) and returns an empty request.
  virtual Request iallreduce_sum(std::span<float> data);
  // The exact (fixed-point) gradient sum's two collectives (sync/fixed_point_sum.hpp), the same
  // way: an integer sum, and a max of the values' magnitude codes. The defaults block (the max
  // through allgather) and return an empty request.
  virtual Request iallreduce_sum_int64(std::span<std::int64_t> data);
  virtual Request iallreduce_max_int64(std::span<std::int64_t> data);
  // Completes `r` (blocking; subject to the same timeout as the blocking collectives) and empties
  // it.
  virtual void wait(Request& r);
  // Progresses communication; true (and `r` emptied) when `r` has completed. Does not block
  // (except to report a request whose timeout has expired, which ends the job).
  virtual bool test(Request& r);
};

}  // namespace ddp::comm
