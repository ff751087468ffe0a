#include "ddp/train/batch_feed.hpp"

#include <cstring>

#include "ddp/error.hpp"

namespace ddp::train {

BatchFeed::BatchFeed(backend::Backend& be, std::int64_t sample_floats, std::int64_t max_batch)
    : gpu_(dynamic_cast<backend::CudaBackend*>(&be)),
      sample_floats_(sample_floats),
      max_batch_(max_batch) {
  if (!gpu_) return;
  const int d = gpu_->device_index();
  const auto image_bytes = static_cast<std::size_t>(sample_floats * max_batch) * sizeof(float);
  const auto label_bytes = static_cast<std::size_t>(max_batch) * sizeof(std::int32_t);
  for (Slot& s : slots_) {
    s.images_host = backend::PinnedBuffer(d, image_bytes);
    s.labels_host = backend::PinnedBuffer(d, label_bytes);
    s.images = backend::DeviceBuffer(d, image_bytes);
    s.labels = backend::DeviceBuffer(d, label_bytes);
  }
}

void BatchFeed::begin(data::BatchLoader& loader) {
  loader_ = &loader;
  primed_ = false;
  current_ = 0;
  for (Slot& s : slots_) s.full = false;
}

void BatchFeed::stage(Slot& slot) {
  slot.full = false;
  const auto b = loader_->next();
  if (!b) return;
  if (b->size > max_batch_)
    throw Error("internal: a batch of " + std::to_string(b->size) + " exceeds the feed's " +
                std::to_string(max_batch_));
  // The device slot was last read by the step enqueued before this call, and the pinned slot was
  // last read by an upload that may still run: order the copy stream after the first and wait for
  // the second before overwriting either.
  gpu_->copy_waits_for_compute();
  gpu_->wait_uploads();
  const auto image_bytes = static_cast<std::size_t>(b->size * sample_floats_) * sizeof(float);
  const auto label_bytes = static_cast<std::size_t>(b->size) * sizeof(std::int32_t);
  std::memcpy(slot.images_host.data(), b->images, image_bytes);
  std::memcpy(slot.labels_host.data(), b->labels, label_bytes);
  gpu_->upload_async(slot.images_host.data(), slot.images.data(), image_bytes);
  gpu_->upload_async(slot.labels_host.data(), slot.labels.data(), label_bytes);
  slot.batch = *b;
  slot.batch.images = slot.images.floats();
  slot.batch.labels = slot.labels.as<std::int32_t>();
  slot.full = true;
}

std::optional<data::Batch> BatchFeed::next() {
  if (!loader_) throw Error("internal: BatchFeed::next before begin");
  if (!gpu_) return loader_->next();
  if (!primed_) {
    primed_ = true;
    stage(slots_[current_]);
  }
  Slot& s = slots_[current_];
  if (!s.full) return std::nullopt;
  // Kernels enqueued from now on see this batch; the host does not wait.
  gpu_->compute_waits_for_uploads();
  const data::Batch out = s.batch;
  s.full = false;
  // The following batch travels while the GPU computes this one.
  current_ = 1 - current_;
  stage(slots_[current_]);
  return out;
}

}  // namespace ddp::train
