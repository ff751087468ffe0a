#include "ddp/data/loader.hpp"

#include <string>
#include <utility>

#include "ddp/error.hpp"
#include "transform/transform_check.hpp"

// Protocol (all shared state under mu_): the worker fills batch `produced_` into a free slot — one
// neither ready nor held — outside the lock, flagged by filling_; the consumer takes the ready slot
// holding batch `consumed_` and holds it until its next next() call. Two slots give double
// buffering: the worker fills batch k+1 while the consumer computes on batch k. start() waits out a
// fill in progress, so batches_ and the slot being filled never change under the worker's feet, and
// leaves the held slot alone, so the consumer's last Batch stays valid across a restart.

namespace ddp::data {

BatchLoader::BatchLoader(const Dataset& ds, Normalization norm, Augmentation aug,
                         std::uint64_t seed, std::int64_t max_batch, bool prefetch)
    : ds_(ds),
      set_(ds.samples()),
      norm_(std::move(norm)),
      aug_(aug),
      seed_(seed),
      max_batch_(max_batch),
      prefetch_(prefetch) {
  // Reject bad settings here, on the caller's thread, rather than later from the worker.
  detail::validate_transform(set_, norm_, aug_);
  if (max_batch_ < 1) {
    throw ConfigError("batch loader: max_batch = " + std::to_string(max_batch_) +
                      " must be at least 1");
  }
  for (Slot& s : slots_) {
    s.images.resize(static_cast<std::size_t>(max_batch_ * output_sample_floats(set_, aug_)));
    s.labels.resize(static_cast<std::size_t>(max_batch_));
  }
  if (prefetch_) worker_ = std::thread(&BatchLoader::worker_loop, this);
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void BatchLoader::start(std::vector<RankBatch> batches, std::uint64_t epoch) {
  // Validate the whole epoch up front so a bad batch fails here, not halfway through the epoch.
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const RankBatch& rb = batches[b];
    if (static_cast<std::int64_t>(rb.indices.size()) > max_batch_) {
      throw DataError("batch loader: batch " + std::to_string(b) + " has " +
                      std::to_string(rb.indices.size()) + " samples, more than the max_batch of " +
                      std::to_string(max_batch_) + " the loader was built for");
    }
    for (const std::int64_t idx : rb.indices) {
      if (idx < 0 || idx >= set_.size()) {
        throw DataError("batch loader: batch " + std::to_string(b) + " holds sample index " +
                        std::to_string(idx) + ", out of range for " + set_.origin() + " (" +
                        std::to_string(set_.size()) + " samples)");
      }
    }
  }
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !filling_; });
    batches_ = std::move(batches);
    epoch_ = epoch;
    produced_ = 0;
    consumed_ = 0;
    ++generation_;
    error_ = nullptr;
    for (Slot& s : slots_) s.ready = false;
  }
  cv_.notify_all();
}

int BatchLoader::free_slot() const {
  for (int i = 0; i < 2; ++i) {
    if (!slots_[i].ready && i != held_) return i;
  }
  return -1;
}

void BatchLoader::fill(Slot& slot, const RankBatch& rb, const RankBatch* next,
                       std::uint64_t epoch) {
  ds_.stage(rb.indices);
  if (next) ds_.prefetch(next->indices);  // read while this batch is converted and used
  struct Release {
    const Dataset& ds;
    std::span<const std::int64_t> idx;
    ~Release() { ds.release(idx); }
  } release{ds_, rb.indices};
  fill_batch(set_, rb.indices, norm_, aug_, seed_, epoch, slot.images.data(), slot.labels.data());
  slot.batch.size = static_cast<std::int64_t>(rb.indices.size());
  slot.batch.global_size = rb.global_size;
  slot.batch.global_offset = rb.global_offset;
  slot.batch.images = slot.images.data();
  slot.batch.labels = slot.labels.data();
}

void BatchLoader::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk,
             [&] { return stop_ || (!error_ && produced_ < batches_.size() && free_slot() >= 0); });
    if (stop_) return;
    Slot& slot = slots_[free_slot()];
    const std::size_t k = produced_;
    const RankBatch& rb = batches_[k];  // stable: start() waits while filling_
    const RankBatch* after = k + 1 < batches_.size() ? &batches_[k + 1] : nullptr;
    const std::uint64_t epoch = epoch_;
    filling_ = true;
    lk.unlock();
    std::exception_ptr err;
    try {
      fill(slot, rb, after, epoch);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    filling_ = false;
    if (err) {
      error_ = err;  // batches before k are still delivered; next() rethrows at batch k
    } else {
      slot.index = k;
      slot.ready = true;
      ++produced_;
    }
    cv_.notify_all();
  }
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lk(mu_);
  held_ = -1;  // the Batch handed out last time may now be overwritten
  if (consumed_ >= batches_.size()) {
    lk.unlock();
    cv_.notify_all();
    return std::nullopt;
  }
  if (!prefetch_) {
    // No worker: fill synchronously (the lock is uncontended; it keeps one code path for state).
    Slot& slot = slots_[0];
    fill(slot, batches_[consumed_],
         consumed_ + 1 < batches_.size() ? &batches_[consumed_ + 1] : nullptr, epoch_);
    held_ = 0;
    ++consumed_;
    return slot.batch;
  }
  cv_.notify_all();  // the released slot may be what the worker waits for
  int s = -1;
  cv_.wait(lk, [&] {
    for (int i = 0; i < 2; ++i) {
      if (slots_[i].ready && slots_[i].index == consumed_) {
        s = i;
        return true;
      }
    }
    return error_ != nullptr;
  });
  if (s < 0) std::rethrow_exception(error_);
  slots_[s].ready = false;
  held_ = s;
  ++consumed_;
  return slots_[s].batch;
}

}  // namespace ddp::data
