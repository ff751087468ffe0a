#pragma once
// How a rank waits for a non-blocking operation: an MPI request (mpi_comm.cpp), an NCCL
// communicator's asynchronous state or an MPI step of its setup (nccl_comm.cu). Our gradient
// all-reduces (~250 KB every few ms) must not pay for the timeout machinery, so a wait first spins
// on MPI_Test like a blocking MPI_Allreduce would (Open MPI's non-blocking collectives only
// progress inside MPI calls; a gradient bucket takes tens of microseconds), then yields the CPU,
// and only a wait that is clearly long (another rank is evaluating, writing a snapshot, or
// stalled) sleeps, with a capped backoff, to leave the cores to those doing work (and the loader
// threads).
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace ddp::comm::detail {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Backoff(Clock::time_point start = Clock::now()) : start_(start) {}

  void pause() {
    const auto waited = Clock::now() - start_;
    if (waited < kSpin) return;
    if (waited < kYield) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  static constexpr auto kSpin = std::chrono::milliseconds(2);
  static constexpr auto kYield = std::chrono::milliseconds(50);
  static constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  Clock::time_point start_;
  std::chrono::microseconds sleep_{50};
};

}  // namespace ddp::comm::detail
