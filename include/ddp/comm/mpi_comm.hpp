#pragma once
// Communicator over MPI (host buffers), with no silent hangs: every collective is non-blocking
// underneath and waited with a timeout (CommOptions). When a collective does not complete in
// time, the waiting rank prints which collective it was and which ranks never arrived, then calls
// MPI_Abort so the job ends and the scheduler frees the nodes. MPI errors come back as
// ddp::SystemError (MPI_ERRORS_RETURN on a private duplicate of the communicator).
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ddp/comm/comm_options.hpp"
#include "ddp/comm/communicator.hpp"

namespace ddp::comm {

namespace detail {
class ArrivalTracker;
}

class MpiComm final : public Communicator {
 public:
  // Options from the environment (comm_options_from_env: DDP_COMM_TIMEOUT_S, default 300 s).
  explicit MpiComm(MPI_Comm comm = MPI_COMM_WORLD);
  // Collective over `comm` (duplicates it, itself under the timeout).
  MpiComm(MPI_Comm comm, const CommOptions& options);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(std::span<float> data) override;
  void allreduce_sum(std::span<double> data) override;
  void allreduce_sum(std::span<std::int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void barrier() override;
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override;

  Request iallreduce_sum(std::span<float> data) override;
  Request iallreduce_sum_int64(std::span<std::int64_t> data) override;
  Request iallreduce_max_int64(std::span<std::int64_t> data) override;
  void wait(Request& r) override;
  bool test(Request& r) override;

  // The stall timeout in seconds (<= 0: wait forever); applies to collectives started afterwards
  // and to waits on requests started before.
  void set_timeout(double seconds) { options_.timeout_s = seconds; }
  double timeout() const { return options_.timeout_s; }
  // Collectives started so far (the index the stall report and DDP_FAULT_STALL_AT use).
  std::int64_t collectives_started() const { return seq_; }
  // Non-blocking requests started and not yet completed.
  std::size_t pending_requests() const { return pending_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Op {
    std::int64_t seq = 0;
    std::string kind;
    std::size_t bytes = 0;
    Clock::time_point start;
    std::vector<MPI_Request> reqs;  // one per chunk (MPI counts are int)
  };

  Op begin(std::string kind, std::size_t bytes);
  template <class T>
  Op start_allreduce(std::span<T> data, MPI_Datatype type, MPI_Op reduce = MPI_SUM);
  Request pend(Op op);   // a started op as a request for wait() / test()
  bool test_op(Op& op);  // true when complete; throws SystemError on MPI errors
  void wait_op(Op& op);  // polls with backoff, honours the timeout
  bool expired(const Op& op) const;
  // The timeout expired: reports the ranks that did not arrive and aborts the job. Returns only
  // if the operation completes after all while the report is being assembled.
  void handle_timeout(Op& op);

  MPI_Comm comm_ = MPI_COMM_NULL;  // our duplicate
  int rank_ = 0, size_ = 1;
  CommOptions options_;
  std::optional<StallFault> fault_;
  std::int64_t seq_ = 0;
  std::uint64_t next_request_ = 1;
  std::unordered_map<std::uint64_t, Op> pending_;
  std::unique_ptr<detail::ArrivalTracker> tracker_;
};

}  // namespace ddp::comm
