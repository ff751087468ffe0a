#include "ddp/train/batch_feed.hpp"

#include <cstring>

#include "ddp/error.hpp"

namespace ddp::train {

using Stream = backend::DeviceQueue::Stream;

BatchFeed::BatchFeed(backend::Backend& be, std::int64_t sample_floats, std::int64_t max_batch)
    : BatchFeed(be.device() == Device::cpu ? nullptr : dynamic_cast<backend::DeviceQueue*>(&be),
                sample_floats, max_batch) {}

BatchFeed::BatchFeed(backend::DeviceQueue* queue, std::int64_t sample_floats,
                     std::int64_t max_batch)
    : queue_(queue), sample_floats_(sample_floats), max_batch_(max_batch) {
  if (!queue_) return;
  const auto image_bytes = static_cast<std::size_t>(sample_floats * max_batch) * sizeof(float);
  const auto label_bytes = static_cast<std::size_t>(max_batch) * sizeof(std::int32_t);
  for (Slot& s : slots_) {
    s.images_host = queue_->pinned_bytes(image_bytes);
    s.labels_host = queue_->pinned_bytes(label_bytes);
    s.images = queue_->device_bytes(image_bytes);
    s.labels = queue_->device_bytes(label_bytes);
    s.uploaded = queue_->new_event(false);
    s.consumed = queue_->new_event(false);
  }
}

BatchFeed::~BatchFeed() {
  if (!queue_) return;
  for (Slot& s : slots_) {
    if (s.uploaded >= 0) queue_->release_event(s.uploaded);
    if (s.consumed >= 0) queue_->release_event(s.consumed);
  }
}

void BatchFeed::begin(data::BatchLoader& loader) {
  loader_ = &loader;
  // A slot's batch from the previous pass is dropped; its events stay valid (the ring goes on).
  for (Slot& s : slots_) s.full = false;
  staged_ = -1;
  ended_ = false;
}

void BatchFeed::stage(Slot& slot) {
  slot.full = false;
  const auto b = loader_->next();
  if (!b) {
    ended_ = true;
    return;
  }
  if (b->size > max_batch_)
    throw Error("internal: a batch of " + std::to_string(b->size) + " exceeds the feed's " +
                std::to_string(max_batch_));
  // The pinned buffer was last read by this slot's previous upload, two batches ago: done long
  // since, unless the host runs more than two steps ahead (or the batch was staged and never
  // taken). The device buffer was last read by that batch's step: the copy stream waits for it
  // on the device, the host does not.
  if (slot.uploaded_once) queue_->host_waits(slot.uploaded);
  if (slot.recorded) queue_->stream_waits(Stream::copy, slot.consumed);
  const auto image_bytes = static_cast<std::size_t>(b->size * sample_floats_) * sizeof(float);
  const auto label_bytes = static_cast<std::size_t>(b->size) * sizeof(std::int32_t);
  std::memcpy(slot.images_host.get(), b->images, image_bytes);
  std::memcpy(slot.labels_host.get(), b->labels, label_bytes);
  queue_->copy_to_device_async(slot.images_host.get(), slot.images.get(), image_bytes);
  queue_->copy_to_device_async(slot.labels_host.get(), slot.labels.get(), label_bytes);
  queue_->record(slot.uploaded, Stream::copy);
  slot.uploaded_once = true;
  slot.batch = *b;
  slot.batch.images = static_cast<const float*>(slot.images.get());
  slot.batch.labels = static_cast<const std::int32_t*>(slot.labels.get());
  slot.full = true;
}

std::optional<data::Batch> BatchFeed::take() {
  if (!loader_) throw Error("internal: BatchFeed::take before begin");
  if (!queue_) return loader_->next();
  // The step that read the previous slot is enqueued in full by now.
  if (taken_ >= 0) {
    Slot& prev = slots_[static_cast<std::size_t>(taken_)];
    queue_->record(prev.consumed, Stream::compute);
    prev.recorded = true;
  }
  if (staged_ < 0) {
    if (ended_) return std::nullopt;
    staged_ = (taken_ + 1) % kSlots;
    stage(slots_[static_cast<std::size_t>(staged_)]);
  }
  Slot& s = slots_[static_cast<std::size_t>(staged_)];
  taken_ = staged_;
  staged_ = -1;
  if (!s.full) return std::nullopt;
  s.full = false;
  // Kernels enqueued from now on see this batch; the host does not wait.
  queue_->stream_waits(Stream::compute, s.uploaded);
  return s.batch;
}

void BatchFeed::prefetch() {
  if (!queue_ || !loader_ || staged_ >= 0 || ended_) return;
  staged_ = (taken_ + 1) % kSlots;
  stage(slots_[static_cast<std::size_t>(staged_)]);
}

}  // namespace ddp::train
