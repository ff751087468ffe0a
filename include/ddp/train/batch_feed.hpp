#pragma once
// Hands the trainer its batches in the backend's memory. On the CPU that is the loader's buffers
// as they are. On a GPU (a backend that is a DeviceQueue): a ring of three slots, each a pinned
// host buffer and a device buffer. A step is
//   b = take();       // batch k: the compute stream waits (on the device) for its upload
//   enqueue forward and backward of b
//   prefetch();       // batch k+1: loader wait, copy into pinned memory, upload on the copy stream
//   enqueue the gradient wait and the update
// so batch k+1 is staged while the GPU computes step k. The host waits only for work at least two
// steps old (the upload and the step that last used the slot it refills), which has long finished
// unless the host is more than two steps ahead of the GPU.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/device_queue.hpp"
#include "ddp/data/loader.hpp"

namespace ddp::train {

class BatchFeed {
 public:
  // sample_floats: c*h*w of one sample; max_batch: the largest batch any loader will hand out.
  BatchFeed(backend::Backend& be, std::int64_t sample_floats, std::int64_t max_batch);
  // The same on an explicit queue (tests record its calls); nullptr: host memory, no slots.
  BatchFeed(backend::DeviceQueue* queue, std::int64_t sample_floats, std::int64_t max_batch);
  // Hands the slots' events back to the queue (a feed is rebuilt when the batch size grows).
  ~BatchFeed();
  BatchFeed(const BatchFeed&) = delete;
  BatchFeed& operator=(const BatchFeed&) = delete;

  // Starts feeding from `loader` (started already), which must outlive the feed's use of it.
  void begin(data::BatchLoader& loader);
  // The next batch (nullopt at the end); images and labels are backend memory, valid until the
  // next take(). On a GPU, stages this batch first if no prefetch() did.
  std::optional<data::Batch> take();
  // Stages the batch after the one take() returned, to be uploaded while the device computes.
  // Call it once the step's device work is enqueued. No-op on the CPU and at the end.
  void prefetch();

  static constexpr int kSlots = 3;

 private:
  struct Slot {
    std::shared_ptr<void> images_host, labels_host, images, labels;
    backend::DeviceQueue::EventId uploaded = -1;  // copy stream: this slot's upload is done
    backend::DeviceQueue::EventId consumed = -1;  // compute stream: the step reading it is done
    bool recorded = false;                        // `consumed` recorded at least once
    bool uploaded_once = false;                   // `uploaded` recorded at least once
    data::Batch batch;
    bool full = false;
  };
  // Takes the loader's next batch into `slot` and starts its upload.
  void stage(Slot& slot);

  backend::DeviceQueue* queue_ = nullptr;  // null: the backend computes on host memory
  data::BatchLoader* loader_ = nullptr;
  std::int64_t sample_floats_ = 0, max_batch_ = 0;
  std::array<Slot, kSlots> slots_;
  int taken_ = -1;      // the slot take() returned last (-1: none yet this pass)
  int staged_ = -1;     // the slot prefetch() filled, not yet taken (-1: none)
  bool ended_ = false;  // the loader ran dry
};

}  // namespace ddp::train
