#pragma once
// Who has reached which collective, so that a timed-out collective can name the ranks that never
// arrived. Every rank announces each collective it starts with one 8-byte MPI_Isend to rank 0 (a
// few microseconds, next to a ~250 KB all-reduce); rank 0 keeps the latest index per rank with
// persistent receives that it services whenever it is inside the communicator. A rank whose
// collective times out asks rank 0 for that table; rank 0 answers from any of its own waits. When
// rank 0 itself is the one missing, nobody answers, and the asking rank says so.
#include <mpi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace ddp::comm::detail {

class ArrivalTracker {
 public:
  // `comm` is the communicator's private duplicate (our tags cannot meet anyone else's messages).
  ArrivalTracker(MPI_Comm comm, int rank, int size);
  ~ArrivalTracker();
  ArrivalTracker(const ArrivalTracker&) = delete;
  ArrivalTracker& operator=(const ArrivalTracker&) = delete;

  // This rank starts collective `seq` (1, 2, 3, ... in the same order on every rank).
  void arrive(std::int64_t seq);
  // Rank 0: takes in announcements and answers queries. Others: reaps finished announcements.
  // Cheap; call it whenever the rank is waiting anyway.
  void service();

  enum class Answer { known, no_answer, completed };
  // The highest collective each rank has started (index = rank), as rank 0 knows it. Rank 0 reads
  // its own table; the others ask rank 0 and wait up to `grace_s` for the answer while polling
  // `completed` (when that turns true the question is moot: returns Answer::completed).
  Answer arrivals(std::int64_t seq, double grace_s, const std::function<bool()>& completed,
                  std::vector<std::int64_t>& table);

 private:
  void post_root_receives();

  MPI_Comm comm_;
  int rank_, size_;
  std::int64_t own_ = 0;  // the latest collective this rank started

  // Rank 0: latest index per rank; one persistent receive per other rank, then one for queries.
  std::vector<std::int64_t> arrived_;
  std::vector<MPI_Request> root_reqs_;
  std::vector<std::int64_t> root_bufs_;
  std::vector<int> scratch_idx_;  // MPI_Testsome's outputs, kept to spare an allocation per poll
  std::vector<MPI_Status> scratch_status_;
  struct Reply {
    std::vector<std::int64_t> buf;
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::deque<std::unique_ptr<Reply>> replies_;

  // Other ranks: a ring of announcement buffers (an Isend's buffer must live until it completes).
  static constexpr std::size_t kRing = 64;
  struct Ring {
    std::int64_t buf[kRing] = {};
    MPI_Request req[kRing];
  };
  std::unique_ptr<Ring> ring_;
  std::int64_t query_buf_ = 0;
};

}  // namespace ddp::comm::detail
