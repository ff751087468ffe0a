#include "request_wait.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace ddp::runtime::detail {

bool wait_within(MPI_Request& req, double limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto sleep = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (limit_s > 0 && Clock::now() - start > std::chrono::duration<double>(limit_s)) return false;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(5000));
  }
}

}  // namespace ddp::runtime::detail
