// pack --val-fraction's choice of validation samples: stratified by class (rounded, one sample of
// each class kept for training), a pure function of (seed, labels).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "ddp/data/pack.hpp"

namespace ddp::data {
namespace {

std::vector<std::int32_t> labels_of(const std::map<std::int32_t, int>& counts) {
  std::vector<std::int32_t> labels;
  // Interleaved, as a CSV list may give them.
  for (bool more = true; more;) {
    more = false;
    for (const auto& [label, n] : counts) {
      const auto have = std::count(labels.begin(), labels.end(), label);
      if (have < n) {
        labels.push_back(label);
        more = true;
      }
    }
  }
  return labels;
}

TEST(ValidationSplit, StratifiedAndRounded) {
  const auto labels = labels_of({{0, 10}, {1, 7}, {2, 1}, {3, 2}, {5, 100}});
  const auto val = validation_split(labels, 0.3, 0);
  std::map<std::int32_t, int> taken;
  for (std::size_t i = 0; i < labels.size(); ++i) taken[labels[i]] += val[i] ? 1 : 0;
  EXPECT_EQ(taken[0], 3);
  EXPECT_EQ(taken[1], 2);  // round(2.1)
  EXPECT_EQ(taken[2], 0);  // a class of one stays in training
  EXPECT_EQ(taken[3], 1);  // round(0.6), one left for training
  EXPECT_EQ(taken[5], 30);
}

TEST(ValidationSplit, SeededAndPure) {
  const auto labels = labels_of({{0, 50}, {1, 50}});
  EXPECT_EQ(validation_split(labels, 0.2, 7), validation_split(labels, 0.2, 7));
  EXPECT_NE(validation_split(labels, 0.2, 7), validation_split(labels, 0.2, 8));
  // A larger fraction takes a superset: each class's order is fixed by the seed.
  const auto small = validation_split(labels, 0.1, 7), large = validation_split(labels, 0.3, 7);
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (small[i]) EXPECT_TRUE(large[i]) << i;
}

}  // namespace
}  // namespace ddp::data
