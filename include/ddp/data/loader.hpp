#pragma once
// A prefetching batch loader: while the trainer computes on batch i, a background thread fills
// batch i+1 (double buffering). Errors on the worker are rethrown on the consumer thread.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ddp/data/dataset.hpp"
#include "ddp/data/sampler.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data {

struct Batch {
  std::int64_t size = 0;         // samples on this rank
  std::int64_t global_size = 0;  // samples in the global batch
  std::int64_t global_offset = 0;
  const float* images = nullptr;  // size * c*h*w floats, valid until the next next() call
  const std::int32_t* labels = nullptr;
};

class BatchLoader {
 public:
  // max_batch: the largest per-rank batch that will be requested (sizes the buffers). Each batch's
  // samples are staged in `ds` before it is filled and released after, and the next batch's are
  // prefetched. `ds` must outlive the loader.
  BatchLoader(const Dataset& ds, Normalization norm, Augmentation aug, std::uint64_t seed,
              std::int64_t max_batch, bool prefetch);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Begins an epoch over the given batches (replacing any unfinished one).
  void start(std::vector<RankBatch> batches, std::uint64_t epoch);
  // The next batch of the epoch, or nullopt at its end.
  std::optional<Batch> next();

 private:
  // Implementation detail: two slots, a worker thread, a mutex and condition variables.
  struct Slot {
    std::vector<float> images;
    std::vector<std::int32_t> labels;
    Batch batch;
    bool ready = false;  // filled with batch `index` of this epoch, not yet handed out
    std::size_t index = 0;
  };
  void worker_loop();
  // next: the batch after rb (its chunks are prefetched when streaming), or null.
  void fill(Slot& slot, const RankBatch& rb, const RankBatch* next, std::uint64_t epoch);
  int free_slot() const;  // a slot neither ready nor held by the consumer, or -1; needs mu_

  const Dataset& ds_;
  const SampleSet& set_;  // ds_.samples()
  Normalization norm_;
  Augmentation aug_;
  std::uint64_t seed_;
  std::int64_t max_batch_;
  bool prefetch_;

  std::vector<RankBatch> batches_;
  std::uint64_t epoch_ = 0;
  std::size_t produced_ = 0;  // batches filled so far this epoch
  std::size_t consumed_ = 0;  // batches handed out so far this epoch
  std::uint64_t generation_ = 0;
  Slot slots_[2];
  int held_ = -1;         // slot whose Batch the consumer holds (valid until its next next())
  bool filling_ = false;  // the worker is filling a slot outside the lock; start() waits for it
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace ddp::data
