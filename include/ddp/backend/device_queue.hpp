#pragma once
// What code above a GPU backend needs to keep the device busy without waiting for it: page-locked
// host memory, device memory, a copy stream beside the compute stream, and events that order the
// two streams and time work on the device. CudaBackend implements it. Tests implement it on host
// memory to record the order of calls (the batch feed's contract: the host never waits for the
// work of the last two steps).
#include <cstddef>
#include <memory>

namespace ddp::backend {

class DeviceQueue {
 public:
  enum class Stream { compute, copy };
  // An event of this device: made by new_event(), owned (and destroyed) by the queue.
  using EventId = int;

  virtual ~DeviceQueue() = default;

  // Page-locked host memory (the copy stream reads it in place) and device memory, zero-filled,
  // freed when the last handle goes.
  virtual std::shared_ptr<void> pinned_bytes(std::size_t bytes) = 0;
  virtual std::shared_ptr<void> device_bytes(std::size_t bytes) = 0;
  // Enqueues a copy from pinned host memory to the device on the copy stream; returns at once.
  virtual void copy_to_device_async(const void* pinned, void* device, std::size_t bytes) = 0;

  // timing: the event can be used with elapsed_s (costs a little; the feed's are not).
  virtual EventId new_event(bool timing) = 0;
  // Hands e back (its owner is done with it); a later new_event of its kind may return it again.
  // Work already enqueued that records or waits for e is unaffected.
  virtual void release_event(EventId e) = 0;
  // Marks the work enqueued on `s` so far.
  virtual void record(EventId e, Stream s) = 0;
  // Work enqueued on `s` from now on waits (on the device; the host goes on) for e's work.
  virtual void stream_waits(Stream s, EventId e) = 0;
  // Blocks the host until e's work has finished (at once for an event never recorded).
  virtual void host_waits(EventId e) = 0;
  // Whether e's work has finished; never blocks.
  virtual bool finished(EventId e) = 0;
  // Seconds of device time from `from` to `to`, both timing events whose work has finished.
  virtual double elapsed_s(EventId from, EventId to) = 0;
};

}  // namespace ddp::backend
