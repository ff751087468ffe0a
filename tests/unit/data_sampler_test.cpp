// The distributed sampler: permutations, rank slices, and "W ranks x B == 1 rank x W*B".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "ddp/data/sampler.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(DataSampler, EpochOrderIsADeterministicPermutation) {
  for (std::int64_t n : {0, 1, 2, 17, 1000}) {
    const auto a = epoch_order(n, 123, 4, true);
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota(n)) << "n=" << n;
    EXPECT_EQ(a, epoch_order(n, 123, 4, true));
  }
}

TEST(DataSampler, EpochOrderChangesWithEpochAndSeed) {
  const auto e0 = epoch_order(1000, 1, 0, true);
  EXPECT_NE(e0, iota(1000));
  EXPECT_NE(e0, epoch_order(1000, 1, 1, true));
  EXPECT_NE(e0, epoch_order(1000, 2, 0, true));
  EXPECT_EQ(epoch_order(1000, 1, 0, false), iota(1000));
  EXPECT_EQ(epoch_order(1000, 9, 7, false), iota(1000));
}

// data.shuffle_window: chunks in a random order, the samples of each window of N chunks shuffled
// among themselves. Chunks as a random data.train_limit subset leaves them: uneven, out of order.
TEST(DataSampler, ChunkWindowOrderReadsEachWindowsChunksTogether) {
  std::vector<std::int64_t> chunk_of;
  for (std::int64_t i = 0; i < 1000; ++i) chunk_of.push_back((i * 7919) % 1000 / 37);  // 28 chunks
  for (const std::int64_t window : {1, 3, 28, 100}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const auto a = epoch_order_by_chunks(chunk_of, window, 5, 2);
    auto sorted = a;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota(1000));                                // every sample once
    EXPECT_EQ(a, epoch_order_by_chunks(chunk_of, window, 5, 2));  // deterministic
    EXPECT_NE(a, epoch_order_by_chunks(chunk_of, window, 5, 3));  // another epoch, another order
    EXPECT_NE(a, epoch_order_by_chunks(chunk_of, window, 6, 2));
    // Walking the order, a window's chunks are all met before the next window's: the chunks seen
    // so far, counted at each window boundary, are a multiple of the window (or all of them).
    std::set<std::int64_t> seen, window_chunks;
    std::size_t done = 0;
    for (const std::int64_t i : a) {
      const std::int64_t k = chunk_of[static_cast<std::size_t>(i)];
      if (!window_chunks.count(k) && std::ssize(window_chunks) == window) {
        for (const auto c : window_chunks) EXPECT_FALSE(seen.count(c)) << "chunk " << c << " again";
        seen.insert(window_chunks.begin(), window_chunks.end());
        window_chunks.clear();
        ++done;
      }
      EXPECT_FALSE(seen.count(k)) << "chunk " << k << " comes back after its window";
      window_chunks.insert(k);
    }
    EXPECT_EQ(done, static_cast<std::size_t>((28 + window - 1) / window - 1));
    if (window == 1) {  // within one chunk the samples are shuffled, not in index order
      EXPECT_FALSE(std::is_sorted(a.begin(), a.begin() + 30));
    }
  }
  // The sampler takes it with shuffle and a window; ranks together still see each sample once.
  SamplerOptions so;
  so.dataset_size = 1000;
  so.global_batch = 64;
  so.world_size = 2;
  so.seed = 5;
  so.shuffle_window = 3;
  so.chunks = chunk_of;
  std::vector<std::int64_t> all;
  for (int r = 0; r < 2; ++r) {
    so.rank = r;
    for (const auto& b : epoch_batches(so, 2))
      all.insert(all.end(), b.indices.begin(), b.indices.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, iota(1000));
  so.chunks.pop_back();
  EXPECT_THROW(epoch_batches(so, 2), ConfigError);
}

TEST(DataSampler, EpochOrderLooksUniform) {
  // Position of element 0 over many epochs of a 4-permutation: each position about 1/4.
  int counts[4] = {};
  for (std::uint64_t e = 0; e < 4000; ++e) {
    const auto o = epoch_order(4, 77, e, true);
    ++counts[std::find(o.begin(), o.end(), 0) - o.begin()];
  }
  for (int c : counts) {
    EXPECT_GT(c, 880);
    EXPECT_LT(c, 1120);
  }
}

SamplerOptions sampler_opts(std::int64_t n, std::int64_t g, int world, int rank,
                            bool drop_last = false, bool shuffle = true) {
  SamplerOptions o;
  o.dataset_size = n;
  o.global_batch = g;
  o.world_size = world;
  o.rank = rank;
  o.drop_last = drop_last;
  o.shuffle = shuffle;
  o.seed = 2024;
  return o;
}

// The ranks' slices of each global batch, concatenated in rank order, are exactly the one-rank
// batch of W*B samples, and the metadata agrees.
TEST(DataSampler, RanksTogetherEqualOneRankWithTheGlobalBatch) {
  for (std::int64_t n : {1, 2, 7, 10, 23, 100}) {
    for (int world : {1, 2, 3}) {
      for (std::int64_t b : {1, 3, 4}) {
        for (bool drop_last : {false, true}) {
          const std::int64_t g = world * b;
          const auto single = epoch_batches(sampler_opts(n, g, 1, 0, drop_last), 5);
          ASSERT_EQ(static_cast<std::int64_t>(single.size()),
                    steps_per_epoch(sampler_opts(n, g, 1, 0, drop_last)));
          std::vector<std::vector<RankBatch>> ranks;
          for (int r = 0; r < world; ++r) {
            ranks.push_back(epoch_batches(sampler_opts(n, g, world, r, drop_last), 5));
            ASSERT_EQ(ranks.back().size(), single.size());
            ASSERT_EQ(steps_per_epoch(sampler_opts(n, g, world, r, drop_last)),
                      static_cast<std::int64_t>(single.size()));
          }
          for (std::size_t s = 0; s < single.size(); ++s) {
            std::vector<std::int64_t> joined;
            std::int64_t offset = single[s].global_offset;
            std::size_t smallest = SIZE_MAX, largest = 0;
            for (int r = 0; r < world; ++r) {
              const RankBatch& rb = ranks[static_cast<std::size_t>(r)][s];
              EXPECT_EQ(rb.global_size, single[s].global_size);
              EXPECT_EQ(rb.global_offset, offset) << "rank " << r << " step " << s;
              offset += static_cast<std::int64_t>(rb.indices.size());
              joined.insert(joined.end(), rb.indices.begin(), rb.indices.end());
              smallest = std::min(smallest, rb.indices.size());
              largest = std::max(largest, rb.indices.size());
            }
            ASSERT_EQ(joined, single[s].indices)
                << "n=" << n << " W=" << world << " B=" << b << " step " << s;
            EXPECT_LE(largest - smallest, 1u);
          }
        }
      }
    }
  }
}

TEST(DataSampler, EveryRankSampleExactlyOncePerEpoch) {
  for (int world : {1, 2, 3}) {
    std::vector<std::int64_t> seen;
    for (int r = 0; r < world; ++r) {
      for (const RankBatch& rb : epoch_batches(sampler_opts(23, 5, world, r), 9)) {
        seen.insert(seen.end(), rb.indices.begin(), rb.indices.end());
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, iota(23)) << "W=" << world;
  }
}

TEST(DataSampler, LastShortBatchKeptOrDropped) {
  const auto keep = epoch_batches(sampler_opts(10, 4, 1, 0, false, false), 0);
  ASSERT_EQ(keep.size(), 3u);
  EXPECT_EQ(keep[0].indices, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(keep[2].indices, (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(keep[2].global_size, 2);
  EXPECT_EQ(keep[2].global_offset, 8);
  EXPECT_EQ(steps_per_epoch(sampler_opts(10, 4, 1, 0, false)), 3);

  const auto drop = epoch_batches(sampler_opts(10, 4, 1, 0, true, false), 0);
  ASSERT_EQ(drop.size(), 2u);
  EXPECT_EQ(drop[1].indices, (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(steps_per_epoch(sampler_opts(10, 4, 1, 0, true)), 2);
  EXPECT_EQ(steps_per_epoch(sampler_opts(3, 4, 1, 0, true)), 0);
  EXPECT_EQ(steps_per_epoch(sampler_opts(0, 4, 1, 0, false)), 0);
}

TEST(DataSampler, ShortBatchSpreadOverRanks) {
  // A last global batch of 2 over 3 ranks: slices [0,1), [1,2), [2,2) (equal remainders: the
  // lower ranks first).
  const SamplerOptions base = sampler_opts(8, 6, 3, 0, false, false);
  std::vector<std::size_t> sizes;
  for (int r = 0; r < 3; ++r) {
    SamplerOptions o = base;
    o.rank = r;
    const auto b = epoch_batches(o, 0);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].indices.size(), 2u);
    sizes.push_back(b[1].indices.size());
    EXPECT_EQ(b[1].global_size, 2);
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 1, 0}));
}

using Sizes = std::vector<std::int64_t>;

Sizes slices(std::int64_t g, const Sizes& w) {
  return slice_sizes(g, std::span<const std::int64_t>(w));
}
Sizes slices(std::int64_t g, const std::vector<double>& w) {
  return slice_sizes(g, std::span<const double>(w));
}

TEST(DataSampler, SliceSizesRoundLargestRemaindersTiesToTheLowerRank) {
  EXPECT_EQ(slices(192, Sizes{3, 1, 2}), (Sizes{96, 32, 64}));  // exact quotas
  EXPECT_EQ(slices(256, Sizes{1, 1, 1}), (Sizes{86, 85, 85}));  // ties: rank 0 first
  EXPECT_EQ(slices(10, Sizes{1, 1, 1}), (Sizes{4, 3, 3}));
  EXPECT_EQ(slices(11, Sizes{1, 1, 1}), (Sizes{4, 4, 3}));
  // Quotas 2.33 and 4.67: the larger remainder gets the leftover sample, whatever the rank.
  EXPECT_EQ(slices(7, Sizes{1, 2}), (Sizes{2, 5}));
  EXPECT_EQ(slices(7, Sizes{2, 1}), (Sizes{5, 2}));
  // Quotas 2.4, 1.2, 2.4 (sum 6): floors 2, 1, 2 and one left: ranks 0 and 2 tie, rank 0 wins.
  EXPECT_EQ(slices(6, Sizes{2, 1, 2}), (Sizes{3, 1, 2}));
  // Weights are proportions: scaling them changes nothing.
  EXPECT_EQ(slices(100, Sizes{3, 1, 2}), slices(100, Sizes{300, 100, 200}));
  // A quota below one may round to nothing (the trainer refuses that for the configured batch).
  EXPECT_EQ(slices(2, Sizes{1, 1, 1}), (Sizes{1, 1, 0}));
  EXPECT_EQ(slices(5, Sizes{1, 100}), (Sizes{0, 5}));
  EXPECT_EQ(slices(0, Sizes{3, 1, 2}), (Sizes{0, 0, 0}));
}

TEST(DataSampler, SliceSizesOfRealWeights) {
  // 0.5/0.25/0.25 of 10: quotas 5, 2.5, 2.5; the tie goes to rank 1.
  EXPECT_EQ(slices(10, std::vector<double>{0.5, 0.25, 0.25}), (Sizes{5, 3, 2}));
  EXPECT_EQ(slices(192, std::vector<double>{0.5, 0.25, 0.25}), (Sizes{96, 48, 48}));
  EXPECT_EQ(slices(10, std::vector<double>{0.1, 0.2, 0.7}), (Sizes{1, 2, 7}));
  // Whole-number weights give what the integer path gives.
  for (std::int64_t g : {1, 5, 64, 191, 192, 193, 1000})
    EXPECT_EQ(slices(g, std::vector<double>{3, 1, 2}), slices(g, Sizes{3, 1, 2})) << g;
}

TEST(DataSampler, SliceSizesSumToTheBatchAndStayWithinOneOfTheQuota) {
  const std::vector<Sizes> weights = {{1}, {1, 1}, {3, 1, 2}, {5, 7, 11, 13}, {1, 1000, 3}};
  for (const Sizes& w : weights) {
    std::int64_t total = 0;
    for (auto x : w) total += x;
    for (std::int64_t g = 0; g < 300; ++g) {
      const Sizes s = slices(g, w);
      ASSERT_EQ(s.size(), w.size());
      std::int64_t sum = 0;
      for (std::size_t r = 0; r < s.size(); ++r) {
        sum += s[r];
        const double quota = static_cast<double>(g) * static_cast<double>(w[r]) / total;
        EXPECT_GE(static_cast<double>(s[r]), std::floor(quota)) << g << " rank " << r;
        EXPECT_LE(static_cast<double>(s[r]), std::floor(quota) + 1) << g << " rank " << r;
      }
      EXPECT_EQ(sum, g);
    }
  }
}

TEST(DataSampler, SliceSizesRejectNonPositiveWeights) {
  EXPECT_THROW(slices(10, Sizes{}), ddp::ConfigError);
  EXPECT_THROW(slices(10, Sizes{1, 0}), ddp::ConfigError);
  EXPECT_THROW(slices(10, Sizes{1, -2}), ddp::ConfigError);
  EXPECT_THROW(slices(10, std::vector<double>{0.5, 0.0}), ddp::ConfigError);
  EXPECT_THROW(slices(10, std::vector<double>{0.5, std::nan("")}), ddp::ConfigError);
}

// Uneven shares: the ranks' slices, joined in rank order, are still the one-rank batch, each
// sized as slice_sizes says, and the short last batch is cut in the same proportions.
TEST(DataSampler, UnevenSharesTogetherEqualOneRank) {
  const Sizes shares = {96, 32, 64};
  for (std::int64_t n : {192, 500, 1000}) {
    const auto single = epoch_batches(sampler_opts(n, 192, 1, 0), 3);
    std::vector<std::vector<RankBatch>> ranks;
    for (int r = 0; r < 3; ++r) {
      SamplerOptions o = sampler_opts(n, 192, 3, r);
      o.shares = shares;
      ranks.push_back(epoch_batches(o, 3));
      ASSERT_EQ(ranks.back().size(), single.size());
    }
    for (std::size_t s = 0; s < single.size(); ++s) {
      const Sizes want = slices(single[s].global_size, shares);
      std::vector<std::int64_t> joined;
      std::int64_t offset = single[s].global_offset;
      for (std::size_t r = 0; r < 3; ++r) {
        const RankBatch& rb = ranks[r][s];
        EXPECT_EQ(std::ssize(rb.indices), want[r]) << "n=" << n << " step " << s << " rank " << r;
        EXPECT_EQ(rb.global_offset, offset);
        EXPECT_EQ(rb.global_size, single[s].global_size);
        offset += std::ssize(rb.indices);
        joined.insert(joined.end(), rb.indices.begin(), rb.indices.end());
      }
      EXPECT_EQ(joined, single[s].indices) << "n=" << n << " step " << s;
    }
  }
  // 500 = 2 x 192 + 116: the last batch splits 58/19/39.
  SamplerOptions o = sampler_opts(500, 192, 3, 1);
  o.shares = shares;
  EXPECT_EQ(epoch_batches(o, 0).back().indices.size(), 19u);
  EXPECT_EQ(slices(116, shares), (Sizes{58, 19, 39}));
  o.shares = {1, 2};
  EXPECT_THROW(epoch_batches(o, 0), ddp::ConfigError);  // two shares for three ranks
}

TEST(DataSampler, GlobalBatchSizesOfAnEpoch) {
  EXPECT_EQ(global_batch_sizes(sampler_opts(500, 192, 3, 0)), (Sizes{192, 116}));
  EXPECT_EQ(global_batch_sizes(sampler_opts(500, 192, 3, 0, true)), (Sizes{192}));
  EXPECT_EQ(global_batch_sizes(sampler_opts(384, 192, 3, 0)), (Sizes{192}));
  EXPECT_EQ(global_batch_sizes(sampler_opts(100, 192, 3, 0)), (Sizes{100}));
  EXPECT_EQ(global_batch_sizes(sampler_opts(100, 192, 3, 0, true)), (Sizes{}));
}

// Evaluation shards: contiguous, sized by the shares, every test sample on exactly one rank, in
// batches of at most `batch`.
TEST(DataSampler, EvalBatchesShardByShareWithoutPadding) {
  for (const Sizes& shares : {Sizes{}, Sizes{1, 1, 1}, Sizes{96, 32, 64}, Sizes{1, 1, 5}}) {
    for (std::int64_t n : {0, 1, 2, 10, 1001}) {
      std::vector<std::int64_t> seen;
      const Sizes want = slices(n, shares.empty() ? Sizes{1, 1, 1} : shares);
      for (int r = 0; r < 3; ++r) {
        std::int64_t count = 0;
        for (const RankBatch& rb : eval_batches(n, 3, r, shares, 7)) {
          EXPECT_GE(rb.indices.size(), 1u);
          EXPECT_LE(rb.indices.size(), 7u);
          EXPECT_EQ(rb.global_size, std::ssize(rb.indices));
          EXPECT_EQ(rb.global_offset, rb.indices.front());
          count += std::ssize(rb.indices);
          seen.insert(seen.end(), rb.indices.begin(), rb.indices.end());
        }
        EXPECT_EQ(count, want[static_cast<std::size_t>(r)]) << "n=" << n << " rank " << r;
      }
      EXPECT_EQ(seen, iota(n)) << "n=" << n;  // in order: the shards are contiguous
    }
  }
  EXPECT_THROW(eval_batches(10, 3, 0, Sizes{1, 1}, 4), ddp::ConfigError);
  EXPECT_THROW(eval_batches(10, 3, 0, Sizes{}, 0), ddp::ConfigError);
}

TEST(DataSampler, RejectsBadOptions) {
  EXPECT_THROW(epoch_batches(sampler_opts(10, 0, 1, 0), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(sampler_opts(10, 4, 0, 0), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(sampler_opts(10, 4, 2, 2), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(sampler_opts(10, 4, 2, -1), 0), ddp::ConfigError);
  EXPECT_THROW(steps_per_epoch(sampler_opts(-1, 4, 1, 0)), ddp::ConfigError);
  try {
    steps_per_epoch(sampler_opts(10, 4, 2, 5));
    FAIL() << "no ConfigError";
  } catch (const ddp::ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 5 is outside the world of 2 rank(s)"));
  }
}

}  // namespace
}  // namespace ddp::data
