#pragma once
// data.train_limit / data.test_limit: which N samples a limited run uses. "random" (the default)
// takes N samples chosen by the seed, so a class-ordered file does not give a one-class subset
// (and a fake accuracy); "first" takes the first N, to compare with tools that do.
#include <cstdint>
#include <string>
#include <vector>

#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/sample_set.hpp"

namespace ddp::data {

// k indices of [0, n), ascending, chosen by (seed, split): the first k positions of a forward
// Fisher-Yates shuffle (position i swaps with i + next_below(n - i)) drawn from
// CounterRng(hash_words(seed, RngStream::subset, split)), then sorted. A pure function of its
// arguments, so every rank and every world size picks the same subset. k >= n: all of [0, n).
std::vector<std::int64_t> random_subset(std::int64_t n, std::int64_t k, std::uint64_t seed,
                                        Split split);

// What a limit keeps of a split's samples: the readers of fixed-size records (CIFAR, IDX) read
// only those, so a run on 256 samples does not read and hold the whole set first.
struct Limit {
  std::int64_t count = 0;       // 0: every sample
  std::string pick = "random";  // data.limit_subset
  std::uint64_t seed = 0;       // train.seed, for "random"
  Split split = Split::train;

  // data.train_limit or data.test_limit as `opt` sets it (a negative count is a ConfigError).
  static Limit of(const Options& opt, Split split, std::uint64_t seed);
  // The kept indices of n samples, ascending ("random": random_subset; "first": 0..count-1);
  // empty when the limit keeps all n.
  std::vector<std::int64_t> kept(std::int64_t n) const;
  // The origin of the kept samples of `origin`'s n: "... (first 256 of 60000 samples)" or
  // "... (256 of 60000 samples, a random subset by train.seed 42)".
  std::string origin(const std::string& origin, std::int64_t n) const;
};

// `ds` limited to `limit` samples (0 or >= its size: `ds` itself), picked by `pick` ("random":
// random_subset with `seed`, in file order; "first": the first `limit`).
SampleSet limit_samples(const SampleSet& ds, std::int64_t limit, const std::string& pick,
                        std::uint64_t seed, Split split);
SampleSet limit_samples(const SampleSet& ds, const Limit& limit);

// How many distinct labels the samples of `ds` carry (for the start-up line of a limited run).
int classes_present(const SampleSet& ds);

}  // namespace ddp::data
