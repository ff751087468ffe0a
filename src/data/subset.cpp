#include "ddp/data/subset.hpp"

#include <algorithm>
#include <utility>

#include "ddp/error.hpp"

// rng.hpp uses unsigned __int128, which -Wpedantic flags; it is a GCC/Clang extension we rely on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data {

std::vector<std::int64_t> random_subset(std::int64_t n, std::int64_t k, std::uint64_t seed,
                                        Split split) {
  if (n < 0 || k < 0)
    throw ConfigError("random_subset: " + std::to_string(k) + " of " + std::to_string(n) +
                      " samples; both must be >= 0");
  k = std::min(k, n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  // Only the first k positions are drawn: k draws, whatever n.
  CounterRng rng(hash_words(seed, static_cast<std::uint64_t>(RngStream::subset),
                            static_cast<std::uint64_t>(split)));
  for (std::int64_t i = 0; i < k; ++i) {
    const auto j = i + static_cast<std::int64_t>(rng.next_below(static_cast<std::uint64_t>(n - i)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  order.resize(static_cast<std::size_t>(k));
  // File order: the subset is a set; ascending indices keep reads sequential.
  std::sort(order.begin(), order.end());
  return order;
}

Limit Limit::of(const Options& opt, Split split, std::uint64_t seed) {
  return Limit{.count = split == Split::train ? opt.train_limit : opt.test_limit,
               .pick = opt.limit_subset,
               .seed = seed,
               .split = split};
}

std::vector<std::int64_t> Limit::kept(std::int64_t n) const {
  const char* key = split == Split::train ? "data.train_limit" : "data.test_limit";
  if (count < 0)
    throw ConfigError(std::string(key) + " = " + std::to_string(count) + " must be >= 0");
  if (count == 0 || count >= n) return {};
  if (pick != "random" && pick != "first")
    throw ConfigError("data.limit_subset = '" + pick + "': expected random or first");
  if (pick == "random") return random_subset(n, count, seed, split);
  std::vector<std::int64_t> first(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) first[static_cast<std::size_t>(i)] = i;
  return first;
}

std::string Limit::origin(const std::string& origin, std::int64_t n) const {
  if (pick == "first")
    return origin + " (first " + std::to_string(count) + " of " + std::to_string(n) + " samples)";
  return origin + " (" + std::to_string(count) + " of " + std::to_string(n) +
         " samples, a random subset by train.seed " + std::to_string(seed) + ")";
}

SampleSet limit_samples(const SampleSet& ds, const Limit& limit) {
  const std::vector<std::int64_t> idx = limit.kept(ds.size());
  if (idx.empty()) return ds;
  // "first" keeps a view of the leading samples (no copy); its origin is head()'s.
  if (limit.pick == "first") return ds.head(limit.count);
  return ds.gather(idx, limit.origin(ds.origin(), ds.size()));
}

SampleSet limit_samples(const SampleSet& ds, std::int64_t limit, const std::string& pick,
                        std::uint64_t seed, Split split) {
  return limit_samples(ds, Limit{.count = limit, .pick = pick, .seed = seed, .split = split});
}

int classes_present(const SampleSet& ds) {
  std::vector<bool> seen(static_cast<std::size_t>(ds.num_classes()), false);
  for (const Label l : ds.labels()) seen[static_cast<std::size_t>(l)] = true;
  return static_cast<int>(std::count(seen.begin(), seen.end(), true));
}

}  // namespace ddp::data
