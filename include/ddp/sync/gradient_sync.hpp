#pragma once
// Data-parallel gradient synchronisation: the only home of gradient accumulation over
// micro-batches and of both all-reduce modes.
//
// Overlapped (comm.overlap): the flat gradient buffer is cut into buckets in reverse layer order
// (PyTorch DDP's reducer: a small first bucket, then up to a cap); during the last micro-batch's
// backward a bucket's non-blocking all-reduce starts the moment backward has finished the last
// layer that feeds it, and is progressed between the remaining layers; finish() waits for all.
// Not overlapped: finish() all-reduces the whole buffer at once (the buckets' ranges one by one
// when parameters are frozen). On one rank nothing travels; the
// micro-batches are still summed.
//
// A step, on every rank (ranks may run different numbers of micro-batches):
//   sync.begin(M);
//   for each of the M micro-batches: forward, loss, model.backward(dl, sync.hook());
//                                    sync.after_micro_batch();
//   sync.finish();  // model.grads() = the sum over every rank's micro-batches
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/tensor.hpp"

namespace ddp::sync {

struct Bucket {
  std::size_t begin = 0, end = 0;  // range of the flat gradient buffer
  std::size_t lowest_layer = 0;    // the bucket is complete when this layer's backward is done
  std::size_t highest_layer = 0;
};

// Bucket layout for a model: reverse layer order, the first bucket capped at first_cap_bytes, the
// others at cap_bytes (a layer larger than the cap gets a bucket of its own). Only the gradients
// of parameters that train are in a bucket: frozen ones (nn::Model::freeze) never travel, and a
// bucket ends where they interrupt the buffer.
std::vector<Bucket> plan_buckets(const nn::Model& model, std::size_t cap_bytes,
                                 std::size_t first_cap_bytes);

struct SyncStats {
  double exposed_s = 0.0;  // time spent waiting for communication (both modes)
  std::int64_t buckets_launched = 0;
};

struct SyncOptions {
  std::size_t cap_bytes = 4u << 20;        // comm.bucket_mb
  std::size_t first_cap_bytes = 1u << 20;  // comm.first_bucket_mb
  bool overlap = true;                     // comm.overlap
  // The most micro-batches a step of this rank will have: above 1, the accumulation buffer is
  // allocated now (a step with more allocates it then).
  std::int64_t max_micro_batches = 1;
};

class GradientSync {
 public:
  // `comm` carries the gradients (buffers in the model backend's memory); one rank: none travel.
  GradientSync(nn::Model& model, comm::Communicator& comm, const SyncOptions& options);

  // Starts a step of `micro_batches` (>= 1) backward passes on this rank.
  void begin(std::int64_t micro_batches);
  // The hook to hand to model.backward (and step_without_samples) for the current micro-batch:
  // during the last one it starts the buckets whose layers are done (overlapped mode).
  const std::function<void(std::size_t)>& hook() const { return hook_; }
  // The current micro-batch's backward is done (its gradients are in model.grads()); all but the
  // last are added to the accumulation buffer.
  void after_micro_batch();
  // Sends whatever has not been sent and waits: model.grads() then holds the sum over every rank
  // and micro-batch of this step.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const SyncStats& stats() const { return stats_; }

  // run.trace: when timing is on, each bucket's all-reduce of the last step from its launch to
  // the moment this rank saw it complete (one entry for the whole buffer when not overlapped; none
  // on one rank). Off, nothing is timed.
  struct BucketTime {
    std::size_t bucket = 0;
    std::chrono::steady_clock::time_point start, end;
  };
  void set_timing(bool on) { timing_ = on; }
  const std::vector<BucketTime>& bucket_times() const { return times_; }

 private:
  void on_layer_done(std::size_t layer);
  void launch(std::size_t i);
  void progress();
  bool last_micro_batch() const { return micro_ + 1 == micro_batches_; }
  std::span<const float> accumulated() const;

  nn::Model& model_;
  comm::Communicator& comm_;
  SyncOptions options_;
  bool communicates_;  // more than one rank
  std::vector<Bucket> buckets_;
  std::vector<comm::Request> requests_;
  std::vector<bool> done_;
  std::size_t next_ = 0;  // buckets launched this step
  Tensor accum_;          // gradient sum of the step's micro-batches before the last
  std::int64_t micro_batches_ = 1, micro_ = 0;
  std::function<void(std::size_t)> hook_;
  SyncStats stats_;
  bool timing_ = false;
  std::vector<BucketTime> times_;  // by bucket index (overlapped) while timing
};

}  // namespace ddp::sync
