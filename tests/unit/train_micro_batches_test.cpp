// Micro-batch plans: train.accumulate and train.max_micro_batch together, per rank, and the
// common count sync batch norm needs; the cap train.max_micro_batch = auto derives from memory.
#include <gtest/gtest.h>

#include <vector>

#include "ddp/error.hpp"
#include "ddp/train/micro_batches.hpp"

namespace ddp::train {
namespace {

using Sizes = std::vector<std::int64_t>;

TEST(MicroBatches, CountIsAccumulateOrWhatTheCapNeeds) {
  EXPECT_EQ(micro_batch_count(96, 0, 1), 1);   // no cap
  EXPECT_EQ(micro_batch_count(96, 0, 4), 4);   // train.accumulate alone
  EXPECT_EQ(micro_batch_count(96, 40, 1), 3);  // ceil(96 / 40)
  EXPECT_EQ(micro_batch_count(80, 40, 1), 2);
  EXPECT_EQ(micro_batch_count(81, 40, 1), 3);
  EXPECT_EQ(micro_batch_count(32, 40, 1), 1);
  EXPECT_EQ(micro_batch_count(96, 40, 2), 3);  // max(2, 3)
  EXPECT_EQ(micro_batch_count(96, 40, 5), 5);  // max(5, 3)
  EXPECT_EQ(micro_batch_count(0, 40, 1), 1);   // an empty slice still runs (empty) once
  EXPECT_THROW(micro_batch_count(10, -1, 1), Error);
  EXPECT_THROW(micro_batch_count(10, 0, 0), Error);
}

// The brief's example: shares 96/32/64, cap 40 -> 3, 1 and 2 micro-batches of 32.
TEST(MicroBatches, RanksRunTheirOwnCountsUnlessSyncBnMakesThemOne) {
  const Sizes slices = {96, 32, 64}, caps = {40, 40, 40};
  const Sizes want = {3, 1, 2};
  for (int r = 0; r < 3; ++r) {
    const MicroBatchPlan p = plan_micro_batches(slices, caps, 1, r, false);
    EXPECT_EQ(p.samples, slices[static_cast<std::size_t>(r)]);
    EXPECT_EQ(p.real, want[static_cast<std::size_t>(r)]);
    EXPECT_EQ(p.total, p.real);
    EXPECT_EQ(p.largest(), 32);
    const MicroBatchPlan same = plan_micro_batches(slices, caps, 1, r, true);
    EXPECT_EQ(same.real, p.real);
    EXPECT_EQ(same.total, 3) << "rank " << r;  // the most of any rank
  }
  // Per-rank caps (train.max_micro_batch = auto measures one per rank).
  const MicroBatchPlan p = plan_micro_batches(slices, Sizes{0, 8, 100}, 1, 1, true);
  EXPECT_EQ(p.real, 4);
  EXPECT_EQ(p.total, 4);
  EXPECT_EQ(plan_micro_batches(slices, Sizes{0, 8, 100}, 1, 0, true).total, 4);
  EXPECT_EQ(plan_micro_batches(slices, Sizes{0, 8, 100}, 1, 0, false).total, 1);
  EXPECT_THROW(plan_micro_batches(slices, Sizes{0, 8}, 1, 0, false), Error);
  EXPECT_THROW(plan_micro_batches(slices, caps, 1, 3, false), Error);
}

// The micro-batches cover the slice in order, none above the cap, sizes differing by at most one;
// past the real ones they are empty.
TEST(MicroBatchPlan, RangesCoverTheSliceWithinTheCap) {
  for (std::int64_t n : {0, 1, 7, 32, 64, 95, 96, 97}) {
    for (std::int64_t cap : {0, 1, 3, 40}) {
      for (std::int64_t k : {1, 2, 5}) {
        MicroBatchPlan p;
        p.samples = n;
        p.real = micro_batch_count(n, cap, k);
        p.total = p.real + 2;
        std::int64_t next = 0, smallest = n, largest = 0;
        for (std::int64_t m = 0; m < p.real; ++m) {
          const auto [b, e] = p.range(m);
          EXPECT_EQ(b, next);
          if (cap > 0) EXPECT_LE(e - b, cap) << n << " " << cap << " " << k;
          smallest = std::min(smallest, e - b);
          largest = std::max(largest, e - b);
          next = e;
        }
        EXPECT_EQ(next, n);
        EXPECT_LE(largest - smallest, 1);
        EXPECT_EQ(p.largest(), largest) << n << " " << cap << " " << k;
        for (std::int64_t m = p.real; m < p.total; ++m)
          EXPECT_EQ(p.range(m).first, p.range(m).second);
      }
    }
  }
}

TEST(MicroBatches, CapForMemoryKeepsAFifthBackAndTheFixedPart) {
  const double mib = 1024.0 * 1024.0;
  // 1000 MiB free: 800 usable, 100 fixed, 7 MiB a sample -> 100 samples.
  EXPECT_EQ(micro_batch_cap_for_memory(1000 * mib, 100 * mib, 7 * mib), 100);
  EXPECT_EQ(micro_batch_cap_for_memory(1000 * mib, 0, 8 * mib), 100);
  EXPECT_EQ(micro_batch_cap_for_memory(1000 * mib, 795 * mib, 8 * mib), 0);  // not one sample
  EXPECT_EQ(micro_batch_cap_for_memory(0, 0, 8 * mib), 0);
  EXPECT_EQ(micro_batch_cap_for_memory(1000 * mib, 0, 0), 0);
}

}  // namespace
}  // namespace ddp::train
