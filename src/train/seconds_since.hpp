#pragma once
// Seconds on the steady clock since a moment: the trainer's, the step's and the snapshots' timings.
#include <chrono>

namespace ddp::train {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ddp::train
