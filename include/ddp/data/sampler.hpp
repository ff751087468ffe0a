#pragma once
// The distributed sampler: the global sample order is a permutation from (seed, epoch); each global
// batch is cut into disjoint per-rank slices, so "N ranks x batch B" sees exactly the samples of
// "1 rank x batch N*B". No padding, no duplicates.
#include <cstdint>
#include <vector>

namespace ddp::data {

struct SamplerOptions {
  std::int64_t dataset_size = 0;
  std::int64_t global_batch = 0;  // samples per optimizer step over all ranks
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  bool drop_last = false;  // drop a last global batch shorter than global_batch
  std::uint64_t seed = 0;
};

struct RankBatch {
  std::vector<std::int64_t> indices;  // this rank's samples (dataset indices), may be empty
  std::int64_t global_size = 0;       // samples in the whole global batch (for loss weighting)
  std::int64_t global_offset = 0;     // position of this rank's first sample within the epoch order
};

// Permutation of [0, n) from (seed, epoch); identity when shuffle is false.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::uint64_t epoch,
                                      bool shuffle);

// This rank's batches for one epoch. A global batch of g samples gives rank r the slice
// [r*g/W, (r+1)*g/W) (integer division), so short batches are spread as evenly as possible.
std::vector<RankBatch> epoch_batches(const SamplerOptions& opt, std::uint64_t epoch);

// Number of optimizer steps per epoch.
std::int64_t steps_per_epoch(const SamplerOptions& opt);

}  // namespace ddp::data
