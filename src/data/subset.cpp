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

SampleSet limit_samples(const SampleSet& ds, std::int64_t limit, const std::string& pick,
                        std::uint64_t seed, Split split) {
  const char* key = split == Split::train ? "data.train_limit" : "data.test_limit";
  if (limit < 0)
    throw ConfigError(std::string(key) + " = " + std::to_string(limit) + " must be >= 0");
  if (limit == 0 || limit >= ds.size()) return ds;
  if (pick == "first") return ds.head(limit);
  if (pick != "random")
    throw ConfigError("data.limit_subset = '" + pick + "': expected random or first");
  const std::vector<std::int64_t> idx = random_subset(ds.size(), limit, seed, split);
  return ds.gather(idx, ds.origin() + " (" + std::to_string(limit) + " of " +
                            std::to_string(ds.size()) + " samples, a random subset by train.seed " +
                            std::to_string(seed) + ")");
}

int classes_present(const SampleSet& ds) {
  std::vector<bool> seen(static_cast<std::size_t>(ds.num_classes()), false);
  for (const Label l : ds.labels()) seen[static_cast<std::size_t>(l)] = true;
  return static_cast<int>(std::count(seen.begin(), seen.end(), true));
}

}  // namespace ddp::data
