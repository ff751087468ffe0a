#pragma once
// A DeviceQueue on host memory that records the order of calls, for testing what code above a GPU
// backend asks of the device without one: which stream waits for which event, and when the host
// blocks. Its "device" runs only when told: `progress` is the number of recorded events it has
// passed (in record order); host_waits(e) advances it to e (and logs the wait); finished(e) says
// whether it has passed e. Copies are done at once (the tests check which buffer is written
// when). Each record gets a device time: its record index, in milliseconds.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ddp/backend/device_queue.hpp"
#include "ddp/error.hpp"

namespace ddp::testutil {

class RecordingDeviceQueue : public backend::DeviceQueue {
 public:
  struct Call {
    std::string what;  // "record", "stream_waits", "host_waits", "copy"
    EventId event = -1;
    Stream stream = Stream::compute;
    int phase = 0;  // the caller's phase counter at the call (e.g. the step)
    // For waits: the phase and stream of the event's latest record at the time of the call
    // (-1: never recorded).
    int target_phase = -1;
    Stream target_stream = Stream::compute;
  };
  std::vector<Call> calls;
  int phase = 0;             // set by the test
  std::size_t progress = 0;  // records the device has passed

  std::shared_ptr<void> pinned_bytes(std::size_t bytes) override { return zeroed(bytes); }
  std::shared_ptr<void> device_bytes(std::size_t bytes) override { return zeroed(bytes); }
  void copy_to_device_async(const void* pinned, void* device, std::size_t bytes) override {
    std::memcpy(device, pinned, bytes);
    calls.push_back({"copy", -1, Stream::copy, phase});
  }
  EventId new_event(bool timing) override {
    events_.push_back(EventState{timing});
    ++live_events;
    return static_cast<EventId>(events_.size() - 1);
  }
  // Never handed out again here, so a use after release is caught (at() throws).
  void release_event(EventId e) override {
    at(e).released = true;
    --live_events;
  }
  int live_events = 0;  // made and not released
  void record(EventId e, Stream s) override {
    auto& ev = at(e);
    ev.record_index = records_++;
    ev.recorded_phase = phase;
    ev.stream = s;
    calls.push_back({"record", e, s, phase});
  }
  void stream_waits(Stream s, EventId e) override {
    const auto& ev = at(e);
    calls.push_back({"stream_waits", e, s, phase, target_phase(ev), ev.stream});
  }
  void host_waits(EventId e) override {
    auto& ev = at(e);
    calls.push_back({"host_waits", e, ev.stream, phase, target_phase(ev), ev.stream});
    if (ev.record_index >= 0 && progress <= static_cast<std::size_t>(ev.record_index))
      progress = static_cast<std::size_t>(ev.record_index) + 1;
  }
  bool finished(EventId e) override {
    const auto& ev = at(e);
    return ev.record_index < 0 || static_cast<std::size_t>(ev.record_index) < progress;
  }
  double elapsed_s(EventId from, EventId to) override {
    const auto &a = at(from), &b = at(to);
    if (!a.timing || !b.timing) throw Error("elapsed_s on an event made without timing");
    if (!finished(from) || !finished(to)) throw Error("elapsed_s on an unfinished event");
    return (b.record_index - a.record_index) * 1e-3;
  }

 private:
  struct EventState {
    bool timing = false;
    bool released = false;
    long record_index = -1;
    int recorded_phase = -1;
    Stream stream = Stream::compute;
  };
  static int target_phase(const EventState& ev) {
    return ev.record_index < 0 ? -1 : ev.recorded_phase;
  }
  EventState& at(EventId e) {
    if (e < 0 || static_cast<std::size_t>(e) >= events_.size())
      throw Error("no event " + std::to_string(e));
    if (events_[static_cast<std::size_t>(e)].released)
      throw Error("event " + std::to_string(e) + " used after its release");
    return events_[static_cast<std::size_t>(e)];
  }
  static std::shared_ptr<void> zeroed(std::size_t bytes) {
    return std::shared_ptr<void>(std::calloc(bytes > 0 ? bytes : 1, 1), std::free);
  }
  std::vector<EventState> events_;
  long records_ = 0;
};

}  // namespace ddp::testutil
