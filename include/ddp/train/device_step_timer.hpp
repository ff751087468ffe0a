#pragma once
// A GPU step's compute and gradient-wait times, measured on the device and read without waiting
// for it. Host clocks cannot tell them apart there: the host only enqueues, so a host-timed wait
// for the all-reduce holds all the forward and backward work still queued before it. Three timing
// events on the compute stream mark each step: its start, the end of its backward, and the point
// where the stream has waited for the all-reduced gradients. A step's times are read once the
// device has passed its events (polled after every step, all of them at the epoch's end).
#include <cstdint>
#include <vector>

#include "ddp/backend/device_queue.hpp"

namespace ddp::train {

class DeviceStepTimer {
 public:
  // depth: the steps whose times may be outstanding; a host further ahead waits for the oldest.
  explicit DeviceStepTimer(backend::DeviceQueue& queue, int depth = 16);

  // Before the step's first forward is enqueued.
  void start();
  // After its last backward is enqueued, before the wait for the gradients.
  void backward_done();
  // After the compute stream has been made to wait for the gradients; `samples`: this rank's.
  void gradients_ready(std::int64_t samples);

  struct StepTimes {
    double compute_s = 0, wait_s = 0;
    std::int64_t samples = 0;
  };
  // The times of the steps the device has finished with, oldest first, each once; with
  // wait_for_all, of every step (waiting for the device).
  std::vector<StepTimes> collect(bool wait_for_all);

 private:
  struct Marks {
    backend::DeviceQueue::EventId start, backward, ready;
    std::int64_t samples = 0;
  };
  StepTimes read(const Marks& m);

  backend::DeviceQueue& queue_;
  std::vector<Marks> ring_;
  std::vector<StepTimes> pending_;     // read early, when the ring was full
  std::size_t first_ = 0, count_ = 0;  // outstanding steps: ring_[first_], ... (count_ of them)
  bool open_ = false;                  // start() called, gradients_ready() not yet
};

}  // namespace ddp::train
