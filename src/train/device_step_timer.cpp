#include "ddp/train/device_step_timer.hpp"

#include "ddp/error.hpp"

namespace ddp::train {

using Stream = backend::DeviceQueue::Stream;

DeviceStepTimer::DeviceStepTimer(backend::DeviceQueue& queue, int depth) : queue_(queue) {
  if (depth < 1) throw Error("internal: DeviceStepTimer depth must be >= 1");
  ring_.resize(static_cast<std::size_t>(depth));
  for (Marks& m : ring_) {
    m.start = queue_.new_event(true);
    m.backward = queue_.new_event(true);
    m.ready = queue_.new_event(true);
  }
}

void DeviceStepTimer::start() {
  if (open_) throw Error("internal: DeviceStepTimer::start twice");
  if (count_ == ring_.size()) {
    // The host is a whole ring ahead: wait for the oldest step, then keep its times.
    queue_.host_waits(ring_[first_].ready);
    pending_.push_back(read(ring_[first_]));
    first_ = (first_ + 1) % ring_.size();
    --count_;
  }
  queue_.record(ring_[(first_ + count_) % ring_.size()].start, Stream::compute);
  open_ = true;
}

void DeviceStepTimer::backward_done() {
  if (!open_) throw Error("internal: DeviceStepTimer::backward_done outside a step");
  queue_.record(ring_[(first_ + count_) % ring_.size()].backward, Stream::compute);
}

void DeviceStepTimer::gradients_ready(std::int64_t samples) {
  if (!open_) throw Error("internal: DeviceStepTimer::gradients_ready outside a step");
  Marks& m = ring_[(first_ + count_) % ring_.size()];
  queue_.record(m.ready, Stream::compute);
  m.samples = samples;
  ++count_;
  open_ = false;
}

DeviceStepTimer::StepTimes DeviceStepTimer::read(const Marks& m) {
  StepTimes t;
  t.compute_s = queue_.elapsed_s(m.start, m.backward);
  t.wait_s = queue_.elapsed_s(m.backward, m.ready);
  t.samples = m.samples;
  return t;
}

std::vector<DeviceStepTimer::StepTimes> DeviceStepTimer::collect(bool wait_for_all) {
  std::vector<StepTimes> out = std::move(pending_);
  pending_.clear();
  while (count_ > 0) {
    const Marks& m = ring_[first_];
    if (wait_for_all)
      queue_.host_waits(m.ready);
    else if (!queue_.finished(m.ready))
      break;
    out.push_back(read(m));
    first_ = (first_ + 1) % ring_.size();
    --count_;
  }
  return out;
}

}  // namespace ddp::train
