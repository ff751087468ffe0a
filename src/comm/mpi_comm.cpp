#include "ddp/comm/mpi_comm.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "arrival_tracker.hpp"
#include "backoff.hpp"
#include "ddp/comm/stall_report.hpp"
#include "ddp/error.hpp"
#include "mpi_check.hpp"

namespace ddp::comm {
namespace {

using detail::check;

// MPI counts are int: larger buffers go in chunks (each its own MPI request, one collective).
constexpr std::size_t kChunk = INT_MAX / 2;

// How long a rank whose collective timed out waits for rank 0 to say who is missing. Rank 0 itself
// waits this much longer before reporting on its own, so that it is still inside its wait loop,
// answering, when the others ask (were it to time out at the same moment it would be busy aborting
// and the others would wrongly conclude that rank 0 never arrived). Small next to the bound the
// issue sets (timeout + 10 s for the whole job to end).
double grace_seconds(double timeout_s) {
  return std::clamp(0.2 * timeout_s, 1.0, 3.0);
}

[[noreturn]] void abort_job(int rank, int size, const std::string& message) {
  std::fprintf(stderr, "ddp_train: error (rank %d of %d): %s\n", rank, size, message.c_str());
  std::fflush(stderr);
  // MPI_COMM_WORLD, not our duplicate: the whole job must end so the scheduler frees the nodes.
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

[[noreturn]] void stall_forever(int rank, std::int64_t seq) {
  std::fprintf(stderr,
               "ddp_train: fault injection (DDP_FAULT_STALL_RANK, test only): rank %d stalls "
               "before collective #%lld\n",
               rank, static_cast<long long>(seq));
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm) : MpiComm(comm, comm_options_from_env()) {}

MpiComm::MpiComm(MPI_Comm comm, const CommOptions& options) : options_(options) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  if (size_ > 1) fault_ = stall_fault_from_env();
  // A private duplicate: our error handler and our arrival messages touch nobody else's traffic.
  // Duplicating is itself collective, so it waits under the timeout too (a rank that never gets
  // here must not hang the others).
  Op op;
  op.kind = "communicator setup (MPI_Comm_idup)";
  op.start = Clock::now();
  op.reqs.resize(1);
  check(MPI_Comm_idup(comm, &comm_, op.reqs.data()), "MPI_Comm_idup");
  detail::Backoff backoff;
  for (;;) {
    int done = 0;
    check(MPI_Test(op.reqs.data(), &done, MPI_STATUS_IGNORE), "MPI_Comm_idup");
    if (done) break;
    if (expired(op))
      abort_job(rank_, size_,
                describe_stall({0, op.kind, 0}, options_.timeout_s, {}, false,
                               "arrivals are tracked only once the communicator exists"));
    backoff.pause();
  }
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (size_ > 1) tracker_ = std::make_unique<detail::ArrivalTracker>(comm_, rank_, size_);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    (void)tracker_.release();  // its requests died with MPI; calling MPI now would abort
    return;
  }
  // Requests nobody waited for (an exception unwound past them): collectives cannot be cancelled,
  // so let them finish on their own. Never block here.
  for (auto& [id, op] : pending_)
    for (auto& req : op.reqs)
      if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
  tracker_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MpiComm::Op MpiComm::begin(std::string kind, std::size_t bytes) {
  ++seq_;
  if (fault_ && fault_->rank == rank_ && fault_->at == seq_) stall_forever(rank_, seq_);
  if (tracker_) {
    tracker_->arrive(seq_);
    tracker_->service();
  }
  Op op;
  op.seq = seq_;
  op.kind = std::move(kind);
  op.bytes = bytes;
  op.start = Clock::now();
  return op;
}

template <class T>
MpiComm::Op MpiComm::start_allreduce(std::span<T> data, MPI_Datatype type, MPI_Op reduce) {
  Op op = begin(reduce == MPI_MAX ? "allreduce (max)" : "allreduce", data.size_bytes());
  for (std::size_t off = 0; off < data.size(); off += kChunk) {
    const auto n = static_cast<int>(std::min(kChunk, data.size() - off));
    op.reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Iallreduce(MPI_IN_PLACE, data.data() + off, n, type, reduce, comm_, &op.reqs.back()),
          "MPI_Iallreduce (collective #" + std::to_string(op.seq) + ")");
  }
  return op;
}

bool MpiComm::test_op(Op& op) {
  if (op.reqs.empty()) return true;
  int done = 0;
  const int rc =
      MPI_Testall(static_cast<int>(op.reqs.size()), op.reqs.data(), &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS)
    throw SystemError("collective #" + std::to_string(op.seq) + " (" + op.kind +
                      (op.bytes ? ", " + format_bytes(op.bytes) : std::string()) +
                      ") failed: " + detail::mpi_error_text(rc));
  if (!done && tracker_) tracker_->service();
  return done != 0;
}

bool MpiComm::expired(const Op& op) const {
  if (options_.timeout_s <= 0) return false;
  const double limit =
      options_.timeout_s + (tracker_ && rank_ == 0 ? grace_seconds(options_.timeout_s) : 0.0);
  return Clock::now() - op.start > std::chrono::duration<double>(limit);
}

void MpiComm::wait_op(Op& op) {
  detail::Backoff backoff;
  for (;;) {
    if (test_op(op)) return;
    if (expired(op)) {
      handle_timeout(op);
      return;
    }
    backoff.pause();
  }
}

void MpiComm::handle_timeout(Op& op) {
  const double grace = grace_seconds(options_.timeout_s);
  const CollectiveInfo info{op.seq, op.kind, op.bytes};
  if (!tracker_)  // a single rank: nobody to wait for, so nobody can be missing
    abort_job(rank_, size_, describe_stall(info, options_.timeout_s, {}, true));
  std::vector<std::int64_t> table;
  auto completed = [&] { return test_op(op); };
  const auto answer = tracker_->arrivals(op.seq, grace, completed, table);
  if (answer == detail::ArrivalTracker::Answer::completed) return;
  std::string message;
  if (answer == detail::ArrivalTracker::Answer::known) {
    message = describe_stall(info, options_.timeout_s, missing_ranks(table, op.seq), true);
  } else {
    char g[32];
    std::snprintf(g, sizeof g, "%g", grace);
    // Rank 0 answers from any wait of its own (and outwaits the others by the grace period),
    // so silence means it is not inside a collective at all.
    const std::string note = "rank 0, which tracks arrivals, did not answer within " +
                             std::string(g) +
                             " s, so it is not waiting in a collective; whether other ranks "
                             "arrived could not be determined";
    message = describe_stall(info, options_.timeout_s, {0}, false, note);
  }
  abort_job(rank_, size_, message + "; aborting the job");
}

void MpiComm::allreduce_sum(std::span<float> data) {
  Op op = start_allreduce(data, MPI_FLOAT);
  wait_op(op);
}
void MpiComm::allreduce_sum(std::span<double> data) {
  Op op = start_allreduce(data, MPI_DOUBLE);
  wait_op(op);
}
void MpiComm::allreduce_sum(std::span<std::int64_t> data) {
  Op op = start_allreduce(data, MPI_INT64_T);
  wait_op(op);
}

void MpiComm::broadcast(std::span<std::byte> data, int root) {
  if (root < 0 || root >= size_)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank (0.." +
                std::to_string(size_ - 1) + ")");
  Op op = begin("broadcast from rank " + std::to_string(root), data.size());
  for (std::size_t off = 0; off < data.size(); off += kChunk) {
    const auto n = static_cast<int>(std::min(kChunk, data.size() - off));
    op.reqs.push_back(MPI_REQUEST_NULL);
    check(MPI_Ibcast(data.data() + off, n, MPI_BYTE, root, comm_, &op.reqs.back()),
          "MPI_Ibcast (collective #" + std::to_string(op.seq) + ")");
  }
  wait_op(op);
}

void MpiComm::barrier() {
  Op op = begin("barrier", 0);
  op.reqs.push_back(MPI_REQUEST_NULL);
  check(MPI_Ibarrier(comm_, &op.reqs.back()),
        "MPI_Ibarrier (collective #" + std::to_string(op.seq) + ")");
  wait_op(op);
}

void MpiComm::allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
  const std::size_t n = mine.size();
  if (all.size() != n * static_cast<std::size_t>(size_))
    throw Error("allgather: output holds " + std::to_string(all.size()) + " bytes, expected " +
                std::to_string(size_) + " x " + std::to_string(n));
  if (n > kChunk) {
    Communicator::allgather(mine, all);  // rare and huge: broadcasts, which are chunked
    return;
  }
  Op op = begin("allgather", n);
  op.reqs.push_back(MPI_REQUEST_NULL);
  check(MPI_Iallgather(mine.data(), static_cast<int>(n), MPI_BYTE, all.data(), static_cast<int>(n),
                       MPI_BYTE, comm_, &op.reqs.back()),
        "MPI_Iallgather (collective #" + std::to_string(op.seq) + ")");
  wait_op(op);
}

Request MpiComm::pend(Op op) {
  const std::uint64_t id = next_request_++;
  pending_.emplace(id, std::move(op));
  return Request{id};
}

Request MpiComm::iallreduce_sum(std::span<float> data) {
  return pend(start_allreduce(data, MPI_FLOAT));
}

Request MpiComm::iallreduce_sum_int64(std::span<std::int64_t> data) {
  return pend(start_allreduce(data, MPI_INT64_T));
}

Request MpiComm::iallreduce_max_int64(std::span<std::int64_t> data) {
  return pend(start_allreduce(data, MPI_INT64_T, MPI_MAX));
}

void MpiComm::wait(Request& r) {
  if (r.empty()) return;
  const auto it = pending_.find(r.id());
  if (it == pending_.end()) throw Error("wait: request " + std::to_string(r.id()) + " is unknown");
  r = Request{};
  Op op = std::move(it->second);
  pending_.erase(it);
  wait_op(op);
}

bool MpiComm::test(Request& r) {
  if (r.empty()) return true;
  const auto it = pending_.find(r.id());
  if (it == pending_.end()) throw Error("test: request " + std::to_string(r.id()) + " is unknown");
  Op& op = it->second;
  bool done = false;
  try {
    done = test_op(op);
    if (!done && expired(op)) {
      handle_timeout(op);
      done = true;
    }
  } catch (...) {
    pending_.erase(it);
    r = Request{};
    throw;
  }
  if (done) {
    pending_.erase(it);
    r = Request{};
  }
  return done;
}

}  // namespace ddp::comm
