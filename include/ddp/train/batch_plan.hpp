#pragma once
// How every global batch is cut, decided from the configuration alone: the global batch
// (train.global_batch, else train.batch_size x ranks), each rank's slice of it (train.rank_shares),
// each rank's micro-batch cap (train.max_micro_batch) and train.accumulate; and from them what a
// rank allocates: the largest slice it trains, the largest micro-batch it runs and the most
// micro-batches of one step, over the configured global batch and an epoch's short last one.
// A value: no device, no communicator. The trainer measures (device memory) and gathers (every
// rank's cap), the plan decides.
#include <cstdint>
#include <vector>

#include "ddp/train/micro_batches.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

class BatchPlan {
 public:
  // The configuration's plan for rank `rank` of `world`. dataset_size: the training samples (for
  // the short last batch; 0 plans the configured batch only). train.max_micro_batch: a number is
  // every rank's cap; "auto" is none until with_caps() brings the measured ones. ConfigError for
  // a global batch smaller than world x train.accumulate, a train.rank_shares list that does not
  // fit the world or leaves a rank without a sample (saying which global batch would give each
  // rank one), or a rank's slice smaller than train.accumulate.
  BatchPlan(const Options& train, bool sync_batchnorm, int world, int rank,
            std::int64_t dataset_size, bool drop_last);

  std::int64_t global_batch() const { return global_batch_; }
  std::int64_t accumulate() const { return accumulate_; }
  int world() const { return static_cast<int>(shares_.size()); }
  int rank() const { return rank_; }
  // Every rank's slice of the configured global batch (rank 0 first; they sum to it).
  const std::vector<std::int64_t>& shares() const { return shares_; }
  // Every rank's micro-batch cap (0: none).
  const std::vector<std::int64_t>& caps() const { return caps_; }
  // Sync batch norm on several ranks: every rank runs as many micro-batches as the one that runs
  // the most (its collectives are made by every rank's forward and backward).
  bool same_micro_count() const { return same_micro_count_; }

  // What this rank allocates for: the largest slice it trains, the largest micro-batch it runs,
  // the most micro-batches of one step. A short last batch can give a rank more than its share
  // of the full one (largest remainders), so both sizes are planned.
  std::int64_t rank_batch() const { return rank_batch_; }
  std::int64_t micro_batch() const { return micro_batch_; }
  std::int64_t max_micro_batches() const { return max_micro_batches_; }

  // This rank's micro-batches for a global batch of `global_size` samples.
  MicroBatchPlan step(std::int64_t global_size) const;

  // The slices of the global batch that positive `weights` (one per rank) give, as the sampler cuts
  // batches (largest remainders). Error for a wrong count, a weight <= 0, or a rank left fewer
  // samples than train.accumulate.
  std::vector<std::int64_t> shares_for(const std::vector<std::int64_t>& weights) const;
  // Whether `shares` are slices of this plan's global batch for its world, each at least
  // train.accumulate samples (a snapshot's shares may have been taken with another).
  bool fits(const std::vector<std::int64_t>& shares) const;
  // The same plan with other slices (shares_for's) / with every rank's cap.
  BatchPlan with_shares(std::vector<std::int64_t> shares) const;
  BatchPlan with_caps(std::vector<std::int64_t> caps) const;

 private:
  // rank_batch_, micro_batch_ and max_micro_batches_ for the current shares and caps.
  void size();

  std::int64_t global_batch_ = 0, accumulate_ = 1;
  int rank_ = 0;
  std::vector<std::int64_t> shares_, caps_;
  bool same_micro_count_ = false;
  std::vector<std::int64_t> global_sizes_;  // the configured global batch and a short last one
  std::int64_t rank_batch_ = 1, micro_batch_ = 1, max_micro_batches_ = 1;
};

// What train.max_micro_batch = auto sizes a GPU's micro-batches from.
struct DeviceMemoryFigures {
  int rank = 0;
  // The device's free memory once the weights, gradients and optimizer state are in it.
  double free_bytes = 0;
  double activations_per_sample = 0;  // floats the model keeps per sample (nn::estimate_memory)
  std::int64_t classes = 0;           // the loss gradient's floats per sample
  std::int64_t sample_floats = 0;     // one input image
  std::int64_t rank_batch = 0;        // the batch slots' samples
  std::int64_t gradient_floats = 0;   // the accumulation buffer
};

// The cap the figures give (micro_batch_cap_for_memory over what the batch slots, the accumulation
// buffer and one sample's activations take); ConfigError naming the rank and the sizes when not
// even one sample fits.
std::int64_t auto_micro_batch_cap(const DeviceMemoryFigures& m);

}  // namespace ddp::train
