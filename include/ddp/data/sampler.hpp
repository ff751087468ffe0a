#pragma once
// The distributed sampler: the global sample order is a permutation from (seed, epoch); each global
// batch is cut into disjoint, contiguous per-rank slices sized by the ranks' shares, so "N ranks
// with any shares" sees exactly the samples of "1 rank x the global batch". The test set is cut
// into evaluation shards the same way. No padding, no duplicates.
#include <cstdint>
#include <span>
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
  // Each rank's weight in the split of every global batch (world_size values, each > 0), usually
  // the slice sizes of the configured global batch; empty: equal.
  std::vector<std::int64_t> shares;
  // With shuffle: a window > 0 and each sample's chunk (dataset_size values) order the epoch by
  // epoch_order_by_chunks instead of a full permutation.
  std::int64_t shuffle_window = 0;
  std::vector<std::int64_t> chunks;
};

struct RankBatch {
  std::vector<std::int64_t> indices;  // this rank's samples (dataset indices), may be empty
  std::int64_t global_size = 0;       // samples in the whole global batch (for loss weighting)
  std::int64_t global_offset = 0;     // position of this rank's first sample within the epoch order
};

// Permutation of [0, n) from (seed, epoch); identity when shuffle is false.
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::uint64_t epoch,
                                      bool shuffle);

// A shuffle that reads a chunked file (packed_stream.hpp) one window of chunks at a time: the
// distinct chunks of `chunk_of` (each dataset index's chunk) in a random order from (seed,
// epoch); then, `window` chunks at a time, the samples of those chunks in a random order among
// themselves. Every sample once; a function of (seed, epoch, window, the chunk layout) only.
std::vector<std::int64_t> epoch_order_by_chunks(std::span<const std::int64_t> chunk_of,
                                                std::int64_t window, std::uint64_t seed,
                                                std::uint64_t epoch);

// How g samples split over ranks weighted by `weights` (each > 0): integers summing to g, each
// rank's exact quota g * w / sum(w) rounded down, and the samples left over going one each to the
// largest remainders (equal remainders: the lower rank first). Exact integer arithmetic, so every
// rank computes the same split. A rank whose quota is below 1 may get 0.
std::vector<std::int64_t> slice_sizes(std::int64_t g, std::span<const std::int64_t> weights);
// The same for real-valued weights (a configuration's shares such as [0.5, 0.25, 0.25]).
std::vector<std::int64_t> slice_sizes(std::int64_t g, std::span<const double> weights);
// `world` equal weights.
std::vector<std::int64_t> equal_shares(int world);

// This rank's batches for one epoch: global batch b (g samples) gives rank r the slice that starts
// after the slices of ranks 0..r-1, sized by slice_sizes(g, shares). A short last batch is cut by
// the same rule and may leave a rank without samples.
std::vector<RankBatch> epoch_batches(const SamplerOptions& opt, std::uint64_t epoch);

// Number of optimizer steps per epoch.
std::int64_t steps_per_epoch(const SamplerOptions& opt);

// The sizes of the global batches of an epoch: the configured one and, without drop_last, a
// shorter last one (each size once, the configured first).
std::vector<std::int64_t> global_batch_sizes(const SamplerOptions& opt);

// Evaluation: this rank's shard of a test set of `n` samples (in order, without padding: every
// sample is on exactly one rank), sized by slice_sizes(n, shares) so that a rank with a larger
// training share evaluates more, in batches of at most `batch` samples. `shares` empty: equal.
std::vector<RankBatch> eval_batches(std::int64_t n, int world_size, int rank,
                                    std::span<const std::int64_t> shares, std::int64_t batch);

}  // namespace ddp::data
