#pragma once
// How a rank's slice of a global batch is cut into micro-batches: train.accumulate asks for k of
// them, train.max_micro_batch caps their size, so a rank runs max(k, ceil(slice / cap)) and
// synchronises once. Ranks may run different numbers, except with sync batch norm, whose every
// forward and backward makes collectives: then all run the most any rank needs, the extra ones
// without samples.
#include <cstdint>
#include <span>
#include <utility>

#include "ddp/train/chunk_plan.hpp"

namespace ddp::train {

// Micro-batches for a slice of n samples: max(accumulate, ceil(n / cap)); cap 0: no cap.
std::int64_t micro_batch_count(std::int64_t n, std::int64_t cap, std::int64_t accumulate);

// One step of one rank.
struct MicroBatchPlan {
  std::int64_t samples = 0;  // the rank's slice
  std::int64_t real = 1;     // micro-batches over the slice (micro_batch_count)
  std::int64_t total = 1;    // micro-batches run: real, then total - real without samples
  // Reproducible mode: the micro-batches are this rank's chunks of train.chunk samples (`chunks`;
  // chunk_in_slice gives their ranges, not range()). 0 otherwise.
  std::int64_t chunk = 0;
  ChunkRun chunks;

  // [begin, end) of micro-batch m within the slice: [m*n/real, (m+1)*n/real), sizes differing by
  // at most one (none above the cap); empty from m = real on.
  std::pair<std::int64_t, std::int64_t> range(std::int64_t m) const;
  std::int64_t largest() const;  // the largest micro-batch
};

// Rank `rank`'s plan for a global batch split into `slices` (every rank's), with every rank's cap
// (`caps`, 0: none). same_count (sync batch norm): total = the most micro-batches of any rank.
MicroBatchPlan plan_micro_batches(std::span<const std::int64_t> slices,
                                  std::span<const std::int64_t> caps, std::int64_t accumulate,
                                  int rank, bool same_count);

// train.max_micro_batch = auto on a GPU: the most samples whose activations fit in `free_bytes`
// (the device's free memory once the parameters, gradients and optimizer state are allocated),
// less `fixed_bytes` the step allocates whatever the micro-batch (the batch slots, the
// accumulation buffer), keeping a fifth back for the libraries' scratch space; `sample_bytes`: one
// sample's activations and loss gradient. 0 when not even one sample fits.
std::int64_t micro_batch_cap_for_memory(double free_bytes, double fixed_bytes, double sample_bytes);

}  // namespace ddp::train
