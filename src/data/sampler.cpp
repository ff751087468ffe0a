#include "ddp/data/sampler.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "ddp/error.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data {

namespace {

void validate(const SamplerOptions& opt) {
  if (opt.dataset_size < 0) {
    throw ConfigError("sampler: dataset_size = " + std::to_string(opt.dataset_size) +
                      " must be >= 0");
  }
  if (opt.global_batch < 1) {
    throw ConfigError("sampler: the global batch size is " + std::to_string(opt.global_batch) +
                      "; it must be at least 1");
  }
  if (opt.world_size < 1) {
    throw ConfigError("sampler: world_size = " + std::to_string(opt.world_size) +
                      " must be at least 1");
  }
  if (opt.rank < 0 || opt.rank >= opt.world_size) {
    throw ConfigError("sampler: rank " + std::to_string(opt.rank) + " is outside the world of " +
                      std::to_string(opt.world_size) + " rank(s) (valid: 0.." +
                      std::to_string(opt.world_size - 1) + ")");
  }
}

}  // namespace

std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::uint64_t epoch,
                                      bool shuffle) {
  if (n < 0) throw ConfigError("epoch_order: n = " + std::to_string(n) + " must be >= 0");
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  if (!shuffle) return order;
  // Fisher–Yates from the end; every rank computes the same permutation from (seed, epoch).
  CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::shuffle), epoch));
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(rng.next_below(static_cast<std::uint64_t>(i + 1)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

std::int64_t steps_per_epoch(const SamplerOptions& opt) {
  validate(opt);
  const std::int64_t n = opt.dataset_size, g = opt.global_batch;
  return opt.drop_last ? n / g : (n + g - 1) / g;
}

std::vector<RankBatch> epoch_batches(const SamplerOptions& opt, std::uint64_t epoch) {
  const std::int64_t steps = steps_per_epoch(opt);  // validates
  const std::vector<std::int64_t> order =
      epoch_order(opt.dataset_size, opt.seed, epoch, opt.shuffle);
  const std::int64_t world = opt.world_size, r = opt.rank;
  std::vector<RankBatch> batches(static_cast<std::size_t>(steps));
  for (std::int64_t b = 0; b < steps; ++b) {
    const std::int64_t start = b * opt.global_batch;
    const std::int64_t g = std::min(opt.global_batch, opt.dataset_size - start);
    // Rank r's slice [r*g/W, (r+1)*g/W): disjoint, covering, sizes differing by at most one.
    const std::int64_t lo = r * g / world, hi = (r + 1) * g / world;
    RankBatch& rb = batches[static_cast<std::size_t>(b)];
    rb.indices.assign(order.begin() + start + lo, order.begin() + start + hi);
    rb.global_size = g;
    rb.global_offset = start + lo;
  }
  return batches;
}

}  // namespace ddp::data
