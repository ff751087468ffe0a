// Step times on the device, read without waiting for it (a recording device queue, no GPU): the
// timer reports only the steps the device has passed, never blocks for them except when the host
// is a whole ring of steps ahead, and splits each step at the end of its backward.
#include "ddp/train/device_step_timer.hpp"

#include <gtest/gtest.h>

#include "recording_device_queue.hpp"

namespace ddp::train {
namespace {

using Stream = backend::DeviceQueue::Stream;
using testutil::RecordingDeviceQueue;

// One step: 3 device records of forward/backward work, then 2 of waiting for the gradients (the
// queue's device time is its record index in ms): compute 3 ms... measured from start to the end
// of backward (start, 2 works, backward: 3 records apart), wait 2 ms (backward, 1 wait, ready).
void step(DeviceStepTimer& t, RecordingDeviceQueue& q, backend::DeviceQueue::EventId work,
          std::int64_t samples) {
  t.start();
  q.record(work, Stream::compute);
  q.record(work, Stream::compute);
  t.backward_done();
  q.record(work, Stream::compute);
  t.gradients_ready(samples);
}

TEST(DeviceStepTimer, ReadsOnlyWhatTheDeviceHasPassedAndWaitsOnlyWhenARingAhead) {
  RecordingDeviceQueue q;
  const auto work = q.new_event(false);
  DeviceStepTimer timer(q, 4);
  for (int s = 0; s < 3; ++s) {
    q.phase = s;
    step(timer, q, work, 8 + s);
  }
  // The device has passed nothing: no times, and no waiting for them.
  EXPECT_TRUE(timer.collect(false).empty());
  for (const auto& c : q.calls) EXPECT_NE(c.what, "host_waits");

  // The device passes the first step (its 6 records: start, 2 works, backward, 1 wait, ready).
  q.progress = 6;
  auto got = timer.collect(false);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_DOUBLE_EQ(got[0].compute_s, 3e-3);
  EXPECT_DOUBLE_EQ(got[0].wait_s, 2e-3);
  EXPECT_EQ(got[0].samples, 8);

  // Six more steps with the device stalled: the ring (4) fills; each further start waits for the
  // oldest outstanding step only, which is 4 steps old.
  for (int s = 3; s < 9; ++s) {
    q.phase = s;
    step(timer, q, work, 8 + s);
  }
  int waits = 0;
  for (const auto& c : q.calls)
    if (c.what == "host_waits") {
      ++waits;
      EXPECT_LE(c.target_phase, c.phase - 4);
    }
  EXPECT_EQ(waits, 4);  // steps 1..4 waited for by the starts of steps 5..8
  got = timer.collect(true);
  ASSERT_EQ(got.size(), 8u);  // steps 1..8, in order, each once
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].samples, 9 + static_cast<std::int64_t>(i));
    EXPECT_DOUBLE_EQ(got[i].compute_s, 3e-3);
    EXPECT_DOUBLE_EQ(got[i].wait_s, 2e-3);
  }
  EXPECT_TRUE(timer.collect(true).empty());
}

TEST(DeviceStepTimer, MisuseIsAnInternalError) {
  RecordingDeviceQueue q;
  DeviceStepTimer timer(q, 2);
  EXPECT_THROW(timer.backward_done(), Error);
  EXPECT_THROW(timer.gradients_ready(1), Error);
  timer.start();
  EXPECT_THROW(timer.start(), Error);
  EXPECT_THROW(DeviceStepTimer(q, 0), Error);
}

}  // namespace
}  // namespace ddp::train
