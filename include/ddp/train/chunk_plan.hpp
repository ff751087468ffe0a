#pragma once
// Reproducible mode (train.reproducible) defines a step by chunks, not by ranks: every global batch
// is cut into chunks of train.chunk samples in sample order (an epoch's short last batch: full
// chunks, then one short chunk), and each rank takes a contiguous run of whole chunks, the runs in
// rank order, as many as its share gives (largest remainders, as the sampler cuts samples). A
// chunk's gradient is computed alone and the chunks are summed exactly, so which rank (or thread)
// took which chunk cannot change the result. Pure functions: no device, no communicator.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ddp/data/sampler.hpp"

namespace ddp::train {

// Chunks of a global batch of g samples (the last may be short).
std::int64_t chunk_count(std::int64_t g, std::int64_t chunk);

// One rank's chunks of a global batch: chunks [first, first + count), samples [begin, end) of
// the global batch.
struct ChunkRun {
  std::int64_t first = 0, count = 0;
  std::int64_t begin = 0, end = 0;
  std::int64_t total = 0;  // chunks in the whole global batch
};

// Rank `rank`'s run of a global batch of g samples, each rank weighted by `weights` (one positive
// weight per rank).
ChunkRun rank_chunks(std::int64_t g, std::int64_t chunk, std::span<const std::int64_t> weights,
                     int rank);

// Every rank's chunk count of a global batch of g samples.
std::vector<std::int64_t> chunks_per_rank(std::int64_t g, std::int64_t chunk,
                                          std::span<const std::int64_t> weights);

// [begin, end) of chunk m of a run within the rank's slice (its samples in chunk order).
std::pair<std::int64_t, std::int64_t> chunk_in_slice(const ChunkRun& run, std::int64_t chunk,
                                                     std::int64_t m);

// This rank's batches of an epoch in reproducible mode: the sampler's global batches (the same
// order and sizes as without chunks), each cut by rank_chunks with opt.shares as the weights
// (empty: equal) instead of the sampler's sample-exact slices.
std::vector<data::RankBatch> chunk_batches(const data::SamplerOptions& opt, std::int64_t chunk,
                                           std::uint64_t epoch);

}  // namespace ddp::train
