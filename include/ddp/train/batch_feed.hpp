#pragma once
// Hands the trainer its batches in the backend's memory. On the CPU that is the loader's buffers
// as they are. On a GPU: two pinned host slots and two device slots; while the GPU computes step k,
// batch k+1 is copied into a pinned slot and uploaded on the copy stream, and the compute stream
// waits for an upload (on the GPU, not the host) only when it needs that batch.
#include <cstdint>
#include <optional>

#include "ddp/backend/backend.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/data/loader.hpp"

namespace ddp::train {

class BatchFeed {
 public:
  // sample_floats: c*h*w of one sample; max_batch: the largest batch any loader will hand out.
  BatchFeed(backend::Backend& be, std::int64_t sample_floats, std::int64_t max_batch);

  // Starts feeding from `loader` (started already), which must outlive the feed's use of it.
  void begin(data::BatchLoader& loader);
  // The next batch; images and labels are backend memory, valid until the next call.
  std::optional<data::Batch> next();

 private:
  struct Slot {
    backend::PinnedBuffer images_host, labels_host;
    backend::DeviceBuffer images, labels;
    data::Batch batch;
    bool full = false;
  };
  // Takes the loader's next batch into `slot` and starts its upload.
  void stage(Slot& slot);

  backend::CudaBackend* gpu_ = nullptr;  // null: the backend computes on host memory
  data::BatchLoader* loader_ = nullptr;
  std::int64_t sample_floats_ = 0, max_batch_ = 0;
  Slot slots_[2];
  int current_ = 0;
  bool primed_ = false;
};

}  // namespace ddp::train
