#include "arrival_tracker.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "mpi_check.hpp"

namespace ddp::comm::detail {
namespace {

constexpr int kTagArrive = 101;
constexpr int kTagQuery = 102;
constexpr int kTagReply = 103;

}  // namespace

ArrivalTracker::ArrivalTracker(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size) {
  if (rank_ == 0) {
    post_root_receives();
  } else {
    ring_ = std::make_unique<Ring>();
    std::fill(std::begin(ring_->req), std::end(ring_->req), MPI_REQUEST_NULL);
  }
}

void ArrivalTracker::post_root_receives() {
  const auto n = static_cast<std::size_t>(size_);
  arrived_.assign(n, 0);
  root_bufs_.assign(n, 0);
  root_reqs_.assign(n, MPI_REQUEST_NULL);
  scratch_idx_.assign(n, 0);
  scratch_status_.resize(n);
  // Slot 0 takes queries from anyone; slot r > 0 takes rank r's announcements (one at a time, so
  // they are seen in order: MPI does not let messages from one sender overtake each other).
  check(MPI_Recv_init(&root_bufs_[0], 1, MPI_INT64_T, MPI_ANY_SOURCE, kTagQuery, comm_,
                      &root_reqs_[0]),
        "MPI_Recv_init");
  for (int r = 1; r < size_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    check(MPI_Recv_init(&root_bufs_[i], 1, MPI_INT64_T, r, kTagArrive, comm_, &root_reqs_[i]),
          "MPI_Recv_init");
  }
  check(MPI_Startall(size_, root_reqs_.data()), "MPI_Startall");
}

ArrivalTracker::~ArrivalTracker() {
  // Never block here: this also runs while an exception from a failed collective unwinds.
  for (auto& req : root_reqs_) {
    if (req == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);  // a cancelled receive completes locally
    MPI_Request_free(&req);
  }
  bool leak = false;
  for (auto& reply : replies_) {
    int done = 0;
    MPI_Test(&reply->req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&reply->req);
      (void)reply.release();  // MPI may still read the buffer
    }
  }
  if (ring_) {
    for (auto& req : ring_->req) {
      int done = 1;
      if (req != MPI_REQUEST_NULL) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) {
        MPI_Request_free(&req);
        leak = true;
      }
    }
    if (leak) (void)ring_.release();
  }
}

void ArrivalTracker::arrive(std::int64_t seq) {
  own_ = seq;
  if (rank_ == 0) {
    arrived_[0] = seq;
    return;
  }
  const auto slot = static_cast<std::size_t>(seq) % kRing;
  MPI_Request& req = ring_->req[slot];
  // The announcement kRing collectives ago: 8 bytes, sent eagerly, so it completed long since.
  if (req != MPI_REQUEST_NULL) check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (arrival)");
  ring_->buf[slot] = seq;
  check(MPI_Isend(&ring_->buf[slot], 1, MPI_INT64_T, 0, kTagArrive, comm_, &req),
        "MPI_Isend (arrival)");
}

void ArrivalTracker::service() {
  if (rank_ != 0) return;
  auto& idx = scratch_idx_;
  auto& st = scratch_status_;
  for (;;) {
    int n = 0;
    check(MPI_Testsome(size_, root_reqs_.data(), &n, idx.data(), st.data()), "MPI_Testsome");
    if (n == MPI_UNDEFINED || n == 0) break;
    for (int k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(idx[static_cast<std::size_t>(k)]);
      if (i == 0) {
        // A rank whose collective timed out asks who has arrived: answer with the table, tagged
        // with the collective it asked about (a late answer to an older question is recognised).
        auto reply = std::make_unique<Reply>();
        reply->buf.reserve(arrived_.size() + 1);
        reply->buf.push_back(root_bufs_[0]);
        reply->buf.insert(reply->buf.end(), arrived_.begin(), arrived_.end());
        check(MPI_Isend(reply->buf.data(), static_cast<int>(reply->buf.size()), MPI_INT64_T,
                        st[static_cast<std::size_t>(k)].MPI_SOURCE, kTagReply, comm_, &reply->req),
              "MPI_Isend (stall reply)");
        replies_.push_back(std::move(reply));
      } else {
        arrived_[i] = std::max(arrived_[i], root_bufs_[i]);
      }
      check(MPI_Start(&root_reqs_[i]), "MPI_Start");
    }
  }
  while (!replies_.empty()) {
    int done = 0;
    check(MPI_Test(&replies_.front()->req, &done, MPI_STATUS_IGNORE), "MPI_Test (stall reply)");
    if (!done) break;
    replies_.pop_front();
  }
}

ArrivalTracker::Answer ArrivalTracker::arrivals(std::int64_t seq, double grace_s,
                                                const std::function<bool()>& completed,
                                                std::vector<std::int64_t>& table) {
  if (rank_ == 0) {
    service();
    table = arrived_;
    table[0] = own_;
    return Answer::known;
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  query_buf_ = seq;
  MPI_Request query = MPI_REQUEST_NULL, reply = MPI_REQUEST_NULL;
  std::vector<std::int64_t> buf(static_cast<std::size_t>(size_) + 1);
  check(MPI_Isend(&query_buf_, 1, MPI_INT64_T, 0, kTagQuery, comm_, &query), "MPI_Isend (query)");
  auto post = [&] {
    check(MPI_Irecv(buf.data(), size_ + 1, MPI_INT64_T, 0, kTagReply, comm_, &reply),
          "MPI_Irecv (stall reply)");
  };
  auto finish = [&](Answer a) {
    if (reply != MPI_REQUEST_NULL) {
      MPI_Cancel(&reply);
      MPI_Wait(&reply, MPI_STATUS_IGNORE);
    }
    int done = 0;
    MPI_Test(&query, &done, MPI_STATUS_IGNORE);
    if (!done) MPI_Request_free(&query);  // query_buf_ is a member: it outlives the send
    return a;
  };
  post();
  while (Clock::now() < deadline) {
    int done = 0;
    check(MPI_Test(&reply, &done, MPI_STATUS_IGNORE), "MPI_Test (stall reply)");
    if (done) {
      if (buf[0] == seq) {
        table.assign(buf.begin() + 1, buf.end());
        return finish(Answer::known);
      }
      post();  // the answer to an earlier question that resolved itself
      continue;
    }
    if (completed()) return finish(Answer::completed);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return finish(Answer::no_answer);
}

}  // namespace ddp::comm::detail
