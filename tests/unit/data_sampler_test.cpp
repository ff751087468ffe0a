// The distributed sampler: permutations, rank slices, and "W ranks x B == 1 rank x W*B".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

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

SamplerOptions opts(std::int64_t n, std::int64_t g, int world, int rank, bool drop_last = false,
                    bool shuffle = true) {
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
          const auto single = epoch_batches(opts(n, g, 1, 0, drop_last), 5);
          ASSERT_EQ(static_cast<std::int64_t>(single.size()),
                    steps_per_epoch(opts(n, g, 1, 0, drop_last)));
          std::vector<std::vector<RankBatch>> ranks;
          for (int r = 0; r < world; ++r) {
            ranks.push_back(epoch_batches(opts(n, g, world, r, drop_last), 5));
            ASSERT_EQ(ranks.back().size(), single.size());
            ASSERT_EQ(steps_per_epoch(opts(n, g, world, r, drop_last)),
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
      for (const RankBatch& rb : epoch_batches(opts(23, 5, world, r), 9)) {
        seen.insert(seen.end(), rb.indices.begin(), rb.indices.end());
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, iota(23)) << "W=" << world;
  }
}

TEST(DataSampler, LastShortBatchKeptOrDropped) {
  const auto keep = epoch_batches(opts(10, 4, 1, 0, false, false), 0);
  ASSERT_EQ(keep.size(), 3u);
  EXPECT_EQ(keep[0].indices, (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(keep[2].indices, (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(keep[2].global_size, 2);
  EXPECT_EQ(keep[2].global_offset, 8);
  EXPECT_EQ(steps_per_epoch(opts(10, 4, 1, 0, false)), 3);

  const auto drop = epoch_batches(opts(10, 4, 1, 0, true, false), 0);
  ASSERT_EQ(drop.size(), 2u);
  EXPECT_EQ(drop[1].indices, (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(steps_per_epoch(opts(10, 4, 1, 0, true)), 2);
  EXPECT_EQ(steps_per_epoch(opts(3, 4, 1, 0, true)), 0);
  EXPECT_EQ(steps_per_epoch(opts(0, 4, 1, 0, false)), 0);
}

TEST(DataSampler, ShortBatchSpreadOverRanks) {
  // A last global batch of 2 over 3 ranks: slices [0,0), [0,1), [1,2).
  const SamplerOptions base = opts(8, 6, 3, 0, false, false);
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
  EXPECT_EQ(sizes, (std::vector<std::size_t>{0, 1, 1}));
}

TEST(DataSampler, RejectsBadOptions) {
  EXPECT_THROW(epoch_batches(opts(10, 0, 1, 0), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(opts(10, 4, 0, 0), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(opts(10, 4, 2, 2), 0), ddp::ConfigError);
  EXPECT_THROW(epoch_batches(opts(10, 4, 2, -1), 0), ddp::ConfigError);
  EXPECT_THROW(steps_per_epoch(opts(-1, 4, 1, 0)), ddp::ConfigError);
  try {
    steps_per_epoch(opts(10, 4, 2, 5));
    FAIL() << "no ConfigError";
  } catch (const ddp::ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 5 is outside the world of 2 rank(s)"));
  }
}

}  // namespace
}  // namespace ddp::data
