// data.train_limit / data.test_limit subsets: random_subset's draws, limit_samples' copies, and
// that a random subset of class-ordered data spans the classes where the first N do not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "data_test_util.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

using test_util::Bytes;
using test_util::pattern;
using test_util::pattern_dataset;

// n samples of 1x2x2 in `classes` blocks: labels 0,0,..,1,1,.. (as a class-sorted file holds them).
SampleSet class_ordered(std::int64_t n, int classes) {
  Bytes px;
  std::vector<Label> lb;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t p = 0; p < 4; ++p) px.push_back(pattern(i, 0, p / 2, p % 2));
    lb.push_back(static_cast<Label>(i * classes / n));
  }
  return SampleSet("sorted.h5", 1, 2, 2, classes, std::move(px), std::move(lb));
}

TEST(DataSubset, AscendingDistinctInRangeAndAPureFunction) {
  const auto a = random_subset(1000, 100, 7, Split::train);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<std::int64_t>(a.begin(), a.end()).size(), 100u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 1000);
  EXPECT_EQ(random_subset(1000, 100, 7, Split::train), a);  // every rank computes the same
  EXPECT_NE(random_subset(1000, 100, 8, Split::train), a);  // the seed chooses
  EXPECT_NE(random_subset(1000, 100, 7, Split::test), a);   // the splits draw independently
  // Not the first 100, nor evenly strided.
  EXPECT_GT(a.back(), 500);
  EXPECT_NE(a[1] - a[0], a[2] - a[1]);
}

TEST(DataSubset, EdgeCounts) {
  EXPECT_TRUE(random_subset(10, 0, 1, Split::train).empty());
  EXPECT_TRUE(random_subset(0, 5, 1, Split::train).empty());
  const auto all = random_subset(6, 9, 1, Split::train);
  EXPECT_EQ(all, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(random_subset(10, -1, 1, Split::train), ConfigError);
}

// Each index is chosen with probability k/n: over 4000 seeds, 5 of 20 gives each index 1000
// picks on average (sd ~27); a biased draw (e.g. swapping with any position) shows far outside.
TEST(DataSubset, EveryIndexEquallyLikely) {
  std::map<std::int64_t, int> picks;
  for (std::uint64_t seed = 0; seed < 4000; ++seed)
    for (const std::int64_t i : random_subset(20, 5, seed, Split::train)) ++picks[i];
  ASSERT_EQ(picks.size(), 20u);
  for (const auto& [i, count] : picks) {
    EXPECT_GT(count, 880) << "index " << i;
    EXPECT_LT(count, 1120) << "index " << i;
  }
}

TEST(DataSubset, RandomSpansTheClassesOfClassOrderedDataWhereFirstDoesNot) {
  const SampleSet ds = class_ordered(10000, 10);
  const SampleSet first = limit_samples(ds, 100, "first", 3, Split::test);
  EXPECT_EQ(first.size(), 100);
  EXPECT_EQ(classes_present(first), 1);
  const SampleSet random = limit_samples(ds, 100, "random", 3, Split::test);
  EXPECT_EQ(random.size(), 100);
  EXPECT_EQ(classes_present(random), 10);
  EXPECT_THAT(random.origin(), ::testing::HasSubstr("sorted.h5 (100 of 10000 samples, a random "
                                                    "subset by train.seed 3)"));
}

TEST(DataSubset, CopiesThePickedSamplesInFileOrder) {
  const SampleSet ds = pattern_dataset(50, 3, 2, 2);
  const SampleSet sub = limit_samples(ds, 8, "random", 11, Split::train);
  const auto idx = random_subset(50, 8, 11, Split::train);
  ASSERT_EQ(sub.size(), 8);
  for (std::int64_t k = 0; k < 8; ++k) {
    const std::int64_t i = idx[static_cast<std::size_t>(k)];
    EXPECT_EQ(sub.label(k), ds.label(i));
    EXPECT_TRUE(std::ranges::equal(sub.image(k), ds.image(i))) << "sample " << i;
  }
}

TEST(DataSubset, NoLimitOrALargeOneKeepsEverything) {
  const SampleSet ds = pattern_dataset(12, 1, 2, 2);
  EXPECT_EQ(limit_samples(ds, 0, "random", 1, Split::train).pixels().data(), ds.pixels().data());
  EXPECT_EQ(limit_samples(ds, 12, "random", 1, Split::train).size(), 12);
  EXPECT_EQ(limit_samples(ds, 99, "first", 1, Split::train).size(), 12);
  EXPECT_THROW(limit_samples(ds, 5, "last", 1, Split::train), ConfigError);
  EXPECT_THROW(limit_samples(ds, -1, "random", 1, Split::train), ConfigError);
}

}  // namespace
}  // namespace ddp::data
