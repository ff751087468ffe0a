#include "ddp/train/chunk_plan.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "ddp/error.hpp"

namespace ddp::train {

std::int64_t chunk_count(std::int64_t g, std::int64_t chunk) {
  if (g < 0 || chunk < 1)
    throw Error("internal: chunk_count(" + std::to_string(g) + ", " + std::to_string(chunk) + ")");
  return (g + chunk - 1) / chunk;
}

std::vector<std::int64_t> chunks_per_rank(std::int64_t g, std::int64_t chunk,
                                          std::span<const std::int64_t> weights) {
  return data::slice_sizes(chunk_count(g, chunk), weights);
}

ChunkRun rank_chunks(std::int64_t g, std::int64_t chunk, std::span<const std::int64_t> weights,
                     int rank) {
  if (rank < 0 || rank >= std::ssize(weights))
    throw Error("internal: rank_chunks for rank " + std::to_string(rank) + " of " +
                std::to_string(weights.size()));
  const auto counts = chunks_per_rank(g, chunk, weights);
  ChunkRun run;
  run.total = chunk_count(g, chunk);
  run.first = std::accumulate(counts.begin(), counts.begin() + rank, std::int64_t{0});
  run.count = counts[static_cast<std::size_t>(rank)];
  run.begin = std::min(g, run.first * chunk);
  run.end = std::min(g, (run.first + run.count) * chunk);
  return run;
}

std::pair<std::int64_t, std::int64_t> chunk_in_slice(const ChunkRun& run, std::int64_t chunk,
                                                     std::int64_t m) {
  if (m < 0 || m >= run.count)
    throw Error("internal: chunk " + std::to_string(m) + " of a run of " +
                std::to_string(run.count));
  const std::int64_t n = run.end - run.begin;
  return {std::min(n, m * chunk), std::min(n, (m + 1) * chunk)};
}

std::vector<data::RankBatch> chunk_batches(const data::SamplerOptions& opt, std::int64_t chunk,
                                           std::uint64_t epoch) {
  // The whole global batches: the sampler's order and sizes for one rank of one.
  data::SamplerOptions whole = opt;
  whole.world_size = 1;
  whole.rank = 0;
  whole.shares.clear();
  std::vector<data::RankBatch> batches = data::epoch_batches(whole, epoch);
  const std::vector<std::int64_t> weights =
      opt.shares.empty() ? data::equal_shares(opt.world_size) : opt.shares;
  for (auto& b : batches) {
    const ChunkRun run = rank_chunks(b.global_size, chunk, weights, opt.rank);
    b.indices.erase(b.indices.begin() + run.end, b.indices.end());
    b.indices.erase(b.indices.begin(), b.indices.begin() + run.begin);
    b.global_offset += run.begin;
  }
  return batches;
}

}  // namespace ddp::train
