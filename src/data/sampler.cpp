#include "ddp/data/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
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

// Weights and batch sizes stay below 2^31, so g * w fits in 64 bits.
constexpr std::int64_t kMaxWeight = std::int64_t{1} << 31;

// Largest-remainder rounding's last step: `leftover` samples (fewer than the ranks) go one each to
// the ranks that `before` orders first; a stable sort keeps equal remainders in rank order, so
// ties go to the lower rank.
template <class Before>
void give_leftover(std::vector<std::int64_t>& sizes, std::int64_t leftover, Before before) {
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), before);
  for (std::int64_t i = 0; i < leftover; ++i)
    ++sizes[order[static_cast<std::size_t>(i) % order.size()]];
}

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
  if (opt.shuffle && opt.shuffle_window > 0 && std::ssize(opt.chunks) != opt.dataset_size) {
    throw ConfigError("sampler: a chunk-windowed shuffle needs each sample's chunk (" +
                      std::to_string(opt.chunks.size()) + " for " +
                      std::to_string(opt.dataset_size) + " samples)");
  }
  if (!opt.shares.empty() && std::ssize(opt.shares) != opt.world_size) {
    throw ConfigError("sampler: " + std::to_string(opt.shares.size()) + " rank shares for " +
                      std::to_string(opt.world_size) + " rank(s)");
  }
}

std::vector<std::int64_t> shares_of(const SamplerOptions& opt) {
  return opt.shares.empty() ? equal_shares(opt.world_size) : opt.shares;
}

}  // namespace

std::vector<std::int64_t> equal_shares(int world) {
  return std::vector<std::int64_t>(static_cast<std::size_t>(std::max(world, 0)), 1);
}

std::vector<std::int64_t> slice_sizes(std::int64_t g, std::span<const std::int64_t> weights) {
  if (g < 0) throw ConfigError("sampler: a batch of " + std::to_string(g) + " samples");
  if (weights.empty()) throw ConfigError("sampler: no rank shares");
  std::int64_t total = 0;
  for (const std::int64_t w : weights) {
    if (w <= 0) throw ConfigError("sampler: rank share " + std::to_string(w) + " must be > 0");
    // g * w below must not overflow: shares are sizes of a global batch, far below this.
    if (w > kMaxWeight || total > kMaxWeight)
      throw ConfigError("sampler: rank shares above " + std::to_string(kMaxWeight));
    total += w;
  }
  if (g > kMaxWeight)
    throw ConfigError("sampler: a batch of " + std::to_string(g) + " samples is too large");
  const std::size_t world = weights.size();
  std::vector<std::int64_t> sizes(world), remainder(world);
  std::int64_t given = 0;
  for (std::size_t r = 0; r < world; ++r) {
    sizes[r] = g * weights[r] / total;
    remainder[r] = g * weights[r] % total;
    given += sizes[r];
  }
  give_leftover(sizes, g - given,
                [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  return sizes;
}

std::vector<std::int64_t> slice_sizes(std::int64_t g, std::span<const double> weights) {
  if (weights.empty()) throw ConfigError("sampler: no rank shares");
  // Whole-number weights (the usual [3, 1, 2]) take the exact path.
  for (const double w : weights)
    if (!std::isfinite(w) || w <= 0)
      throw ConfigError("sampler: rank share " + std::to_string(w) + " must be > 0");
  std::vector<std::int64_t> whole;
  for (const double w : weights) {
    if (w != std::floor(w) || w > static_cast<double>(kMaxWeight)) break;
    whole.push_back(static_cast<std::int64_t>(w));
  }
  if (whole.size() == weights.size()) return slice_sizes(g, std::span<const std::int64_t>(whole));
  if (g < 0) throw ConfigError("sampler: a batch of " + std::to_string(g) + " samples");
  double total = 0.0;
  for (const double w : weights) total += w;
  const std::size_t world = weights.size();
  std::vector<std::int64_t> sizes(world);
  std::vector<double> remainder(world);
  std::int64_t given = 0;
  for (std::size_t r = 0; r < world; ++r) {
    const double quota = static_cast<double>(g) * (weights[r] / total);
    sizes[r] = std::min(g, static_cast<std::int64_t>(std::floor(quota)));
    remainder[r] = quota - static_cast<double>(sizes[r]);
    given += sizes[r];
  }
  give_leftover(sizes, g - given,
                [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  return sizes;
}

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

std::vector<std::int64_t> epoch_order_by_chunks(std::span<const std::int64_t> chunk_of,
                                                std::int64_t window, std::uint64_t seed,
                                                std::uint64_t epoch) {
  if (window < 1)
    throw ConfigError("epoch_order_by_chunks: window = " + std::to_string(window) +
                      " must be >= 1");
  // The samples of each chunk, in index order; the chunks in ascending order.
  std::vector<std::pair<std::int64_t, std::int64_t>> by_chunk;  // (chunk, index)
  by_chunk.reserve(chunk_of.size());
  for (std::size_t i = 0; i < chunk_of.size(); ++i)
    by_chunk.emplace_back(chunk_of[i], static_cast<std::int64_t>(i));
  std::sort(by_chunk.begin(), by_chunk.end());
  std::vector<std::size_t> starts;  // where each chunk's samples begin in by_chunk
  for (std::size_t i = 0; i < by_chunk.size(); ++i)
    if (i == 0 || by_chunk[i].first != by_chunk[i - 1].first) starts.push_back(i);
  starts.push_back(by_chunk.size());
  const std::size_t chunks = starts.size() - 1;
  std::vector<std::size_t> visit(chunks);
  std::iota(visit.begin(), visit.end(), std::size_t{0});
  CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::shuffle), epoch, 1));
  for (std::size_t i = chunks; i-- > 1;)
    std::swap(visit[i], visit[static_cast<std::size_t>(rng.next_below(i + 1))]);
  std::vector<std::int64_t> order;
  order.reserve(chunk_of.size());
  const auto w = static_cast<std::size_t>(window);
  for (std::size_t first = 0; first < chunks; first += w) {
    const std::size_t begin = order.size();
    for (std::size_t k = first; k < std::min(first + w, chunks); ++k)
      for (std::size_t s = starts[visit[k]]; s < starts[visit[k] + 1]; ++s)
        order.push_back(by_chunk[s].second);
    CounterRng in(hash_words(seed, static_cast<std::uint64_t>(RngStream::shuffle), epoch,
                             2 + static_cast<std::uint64_t>(first / w)));
    for (std::size_t i = order.size() - begin; i-- > 1;)
      std::swap(order[begin + i], order[begin + static_cast<std::size_t>(in.next_below(i + 1))]);
  }
  return order;
}

std::int64_t steps_per_epoch(const SamplerOptions& opt) {
  validate(opt);
  const std::int64_t n = opt.dataset_size, g = opt.global_batch;
  return opt.drop_last ? n / g : (n + g - 1) / g;
}

std::vector<std::int64_t> global_batch_sizes(const SamplerOptions& opt) {
  validate(opt);
  std::vector<std::int64_t> out;
  if (opt.dataset_size >= opt.global_batch) out.push_back(opt.global_batch);
  const std::int64_t last = opt.dataset_size % opt.global_batch;
  if (!opt.drop_last && last > 0) out.push_back(last);
  return out;
}

std::vector<RankBatch> epoch_batches(const SamplerOptions& opt, std::uint64_t epoch) {
  const std::int64_t steps = steps_per_epoch(opt);  // validates
  const std::vector<std::int64_t> order =
      opt.shuffle && opt.shuffle_window > 0
          ? epoch_order_by_chunks(opt.chunks, opt.shuffle_window, opt.seed, epoch)
          : epoch_order(opt.dataset_size, opt.seed, epoch, opt.shuffle);
  const std::vector<std::int64_t> shares = shares_of(opt);
  const auto r = static_cast<std::size_t>(opt.rank);
  std::vector<RankBatch> batches(static_cast<std::size_t>(steps));
  std::vector<std::int64_t> sizes;
  std::int64_t sized_for = -1;
  for (std::int64_t b = 0; b < steps; ++b) {
    const std::int64_t start = b * opt.global_batch;
    const std::int64_t g = std::min(opt.global_batch, opt.dataset_size - start);
    if (g != sized_for) {  // at most twice an epoch: the full batches and a short last one
      sizes = slice_sizes(g, std::span<const std::int64_t>(shares));
      sized_for = g;
    }
    // Rank r's slice starts after the slices of the ranks below it: disjoint and covering.
    const std::int64_t lo =
        std::accumulate(sizes.begin(), sizes.begin() + opt.rank, std::int64_t{0});
    const std::int64_t hi = lo + sizes[r];
    RankBatch& rb = batches[static_cast<std::size_t>(b)];
    rb.indices.assign(order.begin() + start + lo, order.begin() + start + hi);
    rb.global_size = g;
    rb.global_offset = start + lo;
  }
  return batches;
}

std::vector<RankBatch> eval_batches(std::int64_t n, int world_size, int rank,
                                    std::span<const std::int64_t> shares, std::int64_t batch) {
  SamplerOptions opt;
  opt.dataset_size = n;
  opt.global_batch = std::max<std::int64_t>(batch, 1);
  opt.world_size = world_size;
  opt.rank = rank;
  opt.shares.assign(shares.begin(), shares.end());
  validate(opt);
  if (batch < 1)
    throw ConfigError("sampler: evaluation batches of " + std::to_string(batch) + " samples");
  const std::vector<std::int64_t> all = shares_of(opt);
  const std::vector<std::int64_t> sizes = slice_sizes(n, std::span<const std::int64_t>(all));
  const std::int64_t begin = std::accumulate(sizes.begin(), sizes.begin() + rank, std::int64_t{0});
  const std::int64_t end = begin + sizes[static_cast<std::size_t>(rank)];
  std::vector<RankBatch> out;
  for (std::int64_t i = begin; i < end; i += batch) {
    RankBatch rb;
    for (std::int64_t j = i; j < std::min(end, i + batch); ++j) rb.indices.push_back(j);
    rb.global_size = static_cast<std::int64_t>(rb.indices.size());
    rb.global_offset = i;
    out.push_back(std::move(rb));
  }
  return out;
}

}  // namespace ddp::data
