#pragma once
// Data-parallel gradient synchronisation (the `ddp` room): the flat gradient buffer is cut into
// buckets in reverse layer order (PyTorch DDP's reducer: a small first bucket, then up to a cap);
// a bucket's non-blocking all-reduce starts the moment backward has finished the last layer that
// feeds it and is progressed between the remaining layers; everything is waited before the
// optimizer step.
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"

namespace ddp::sync {

struct Bucket {
  std::size_t begin = 0, end = 0;  // range of the flat gradient buffer
  std::size_t lowest_layer = 0;    // the bucket is complete when this layer's backward is done
  std::size_t highest_layer = 0;
};

// Bucket layout for a model: reverse layer order, the first bucket capped at first_cap_bytes, the
// others at cap_bytes (a layer larger than the cap gets a bucket of its own).
std::vector<Bucket> plan_buckets(const nn::Model& model, std::size_t cap_bytes,
                                 std::size_t first_cap_bytes);

struct SyncStats {
  double exposed_s = 0.0;  // time finish() spent waiting for communication
  std::int64_t buckets_launched = 0;
};

class GradientSync {
 public:
  GradientSync(nn::Model& model, comm::Communicator& comm, std::size_t cap_bytes,
               std::size_t first_cap_bytes);

  // Called for each step whose gradients are to be synchronised. `accumulated` (optional, as long
  // as the gradient buffer) is added to each bucket just before it is sent: gradient accumulation
  // over micro-batches synchronises only on the last one.
  void begin(std::span<const float> accumulated = {});
  // The model's backward hook: layer `layer` has final gradients.
  void on_layer_done(std::size_t layer);
  // Launches whatever is left and waits for every bucket.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const SyncStats& stats() const { return stats_; }

 private:
  void launch(std::size_t i);
  void progress();

  nn::Model& model_;
  comm::Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<comm::Request> requests_;
  std::vector<bool> done_;
  std::span<const float> accumulated_;
  std::size_t next_ = 0;
  SyncStats stats_;
};

}  // namespace ddp::sync
