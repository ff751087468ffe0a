#pragma once
// Reproducible mode's gradient synchronisation: the exact sum (fixed_point_sum.hpp) of the
// gradients of every chunk of a global batch, whichever rank and thread computed them. Each rank
// hands in its chunks' gradients (host memory, the model's flat layout); per tensor, the largest
// magnitude over all chunks of all ranks is agreed (an all-reduce MAX of magnitude codes), every
// chunk's values become integers under that scale and are added, the integers are summed over the
// ranks (an all-reduce of int64) and converted back once. The same bits on 1 rank or N, with any
// split of the chunks.
//
// Overlapped with backward in buckets as GradientSync is (plan_buckets: reverse layer order, a
// small first bucket): a bucket's two collectives start once every local chunk's backward has
// passed its layers, in one fixed order on every rank (bucket 0's max, its sum, bucket 1's max,
// ...; a sum starts when its max has completed), so that non-blocking collectives always match.
//
// A step, on every rank (a rank without chunks in a step passes none and still takes part):
//   sum.begin(parts, chunk_ids, terms);
//   while the chunks' backward runs: sum.layers_done(lowest layer all parts have finished);
//   auto bad = sum.finish(grads);  // grads = the exact sum; bad names a NaN/inf tensor
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/sync/gradient_sync.hpp"

namespace ddp::sync {

// A tensor whose sum has no fixed-point form: a chunk's gradient held a NaN or an inf.
struct NonFinite {
  std::string tensor;      // "conv1.weight"
  std::int64_t chunk = 0;  // the first chunk (of the global batch) that held one
  std::string kind;        // "NaN" or "inf"
};

class ExactGradientSum {
 public:
  // The tensors and buckets of `model`'s flat gradient; `comm` carries host buffers (MPI).
  // options: bucket caps and comm.overlap (max_micro_batches is not used).
  ExactGradientSum(const nn::Model& model, comm::Communicator& comm, const SyncOptions& options);

  // A step over this rank's chunk gradients `parts` (each the flat gradient's size, alive until
  // finish()), chunk_ids[i] the number of parts[i] in the global batch of `terms` chunks.
  void begin(std::vector<std::span<const float>> parts, std::vector<std::int64_t> chunk_ids,
             std::int64_t terms);
  // Every part's backward has finished layer `layer` and all above it: the buckets complete by
  // then start (overlapped mode, several ranks), and communication progresses.
  void layers_done(std::size_t layer);
  // Starts what has not started, waits, and writes the sum into `out` (the flat gradient, host
  // memory; alignment padding is left as it is). A tensor whose chunks held a NaN or an inf is
  // written as NaN everywhere, and the first such tensor (in the model's order) is returned.
  std::optional<NonFinite> finish(std::span<float> out);

  // Seconds spent waiting for the collectives (in finish()).
  double wait_s() const { return wait_s_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  struct Segment {  // one tensor of the flat gradient
    std::string name;
    std::size_t begin = 0, end = 0;
  };
  struct BucketState {
    std::size_t first_segment = 0, end_segment = 0;
    std::vector<std::int64_t> codes;  // per segment: the magnitude codes (max-reduced)
    std::vector<std::int64_t> acc;    // the bucket's integers (bucket-relative)
    comm::Request max_req, sum_req;
  };

  bool overlapped() const { return communicates_ && overlap_; }
  // Starts the next collectives of the fixed sequence whose conditions hold; `block`: waits for a
  // bucket's max rather than stopping there.
  void advance(bool block);
  void start_max(std::size_t b);
  void start_sum(std::size_t b);

  comm::Communicator& comm_;
  bool communicates_;
  bool overlap_;
  std::vector<Segment> segments_;
  std::vector<Bucket> buckets_;
  std::vector<BucketState> state_;
  // The step.
  std::vector<std::span<const float>> parts_;
  std::vector<std::int64_t> chunk_ids_;
  std::int64_t terms_ = 1;
  std::size_t ready_ = 0;    // buckets whose layers every part has finished
  std::size_t next_op_ = 0;  // the fixed sequence's next collective: bucket next_op_ / 2
  double wait_s_ = 0.0;
};

}  // namespace ddp::sync
