// The batch plan: how the configuration cuts every global batch into rank slices and micro-batches,
// and what each rank allocates for. A value computed from its inputs alone, so every case here is
// the trainer's decision for that rank of that world, without data, device or MPI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "ddp/train/batch_plan.hpp"

namespace ddp::train {
namespace {

using ::testing::HasSubstr;
using Sizes = std::vector<std::int64_t>;

Options train_options(std::int64_t batch_size, std::int64_t global_batch = 0,
                      std::int64_t accumulate = 1) {
  Options o;
  o.batch_size = batch_size;
  o.global_batch = global_batch;
  o.accumulate = accumulate;
  return o;
}

Options with_shares(Options o, std::vector<double> shares) {
  o.rank_shares = {"", std::move(shares)};
  return o;
}

Options with_cap(Options o, double cap) {
  o.max_micro_batch = {"", {cap}};
  return o;
}

// The message of the ConfigError the plan throws for rank 0 of `world`.
std::string config_error(const Options& o, int world) {
  try {
    BatchPlan(o, false, world, 0, 0, false);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BatchPlan, EqualSharesOfBatchSizeTimesRanks) {
  for (int r = 0; r < 3; ++r) {
    const BatchPlan p(train_options(64), false, 3, r, 0, false);
    EXPECT_EQ(p.global_batch(), 192);
    EXPECT_EQ(p.shares(), (Sizes{64, 64, 64}));
    EXPECT_EQ(p.caps(), (Sizes{0, 0, 0}));
    EXPECT_EQ(p.rank_batch(), 64);
    EXPECT_EQ(p.micro_batch(), 64);
    EXPECT_EQ(p.max_micro_batches(), 1);
    EXPECT_FALSE(p.same_micro_count());
    const MicroBatchPlan s = p.step(192);
    EXPECT_EQ(s.samples, 64);
    EXPECT_EQ(s.total, 1);
  }
}

// train.global_batch is kept whatever the world; the remainder goes to the lower ranks.
TEST(BatchPlan, GlobalBatchSplitsOverTheRanks) {
  const BatchPlan p(train_options(256, 100), false, 3, 2, 0, false);
  EXPECT_EQ(p.global_batch(), 100);
  EXPECT_EQ(p.shares(), (Sizes{34, 33, 33}));
  EXPECT_EQ(p.rank_batch(), 33);
  EXPECT_EQ(std::accumulate(p.shares().begin(), p.shares().end(), std::int64_t{0}), 100);
}

TEST(BatchPlan, UnevenSharesAreSlicesOfTheGlobalBatch) {
  const auto o = with_shares(train_options(64, 192), {3, 1, 2});
  const Sizes want = {96, 32, 64};
  for (int r = 0; r < 3; ++r) {
    const BatchPlan p(o, false, 3, r, 0, false);
    EXPECT_EQ(p.shares(), want);
    EXPECT_EQ(p.rank_batch(), want[static_cast<std::size_t>(r)]);
    EXPECT_EQ(p.micro_batch(), want[static_cast<std::size_t>(r)]);
  }
  // Real-valued weights take the same largest-remainder rule.
  EXPECT_EQ(BatchPlan(with_shares(train_options(64, 301), {1, 0.333, 1.667}), false, 3, 0, 0, false)
                .shares(),
            (Sizes{100, 34, 167}));
}

TEST(BatchPlan, AccumulateCutsEachSliceIntoMicroBatches) {
  const BatchPlan p(train_options(64, 0, 2), false, 2, 1, 0, false);
  EXPECT_EQ(p.global_batch(), 128);
  EXPECT_EQ(p.rank_batch(), 64);
  EXPECT_EQ(p.micro_batch(), 32);
  EXPECT_EQ(p.max_micro_batches(), 2);
  const MicroBatchPlan s = p.step(128);
  EXPECT_EQ(s.real, 2);
  EXPECT_EQ(s.range(0), (std::pair<std::int64_t, std::int64_t>{0, 32}));
  EXPECT_EQ(s.range(1), (std::pair<std::int64_t, std::int64_t>{32, 64}));
}

// Shares 96/32/64 with a cap of 40: 3, 1 and 2 micro-batches of at most 32.
TEST(BatchPlan, CapsSplitLargeSlices) {
  const auto o = with_cap(with_shares(train_options(64, 192), {3, 1, 2}), 40);
  const Sizes runs = {3, 1, 2};
  for (int r = 0; r < 3; ++r) {
    const BatchPlan p(o, false, 3, r, 0, false);
    EXPECT_EQ(p.caps(), (Sizes{40, 40, 40}));
    EXPECT_EQ(p.micro_batch(), 32) << "rank " << r;
    EXPECT_EQ(p.max_micro_batches(), runs[static_cast<std::size_t>(r)]) << "rank " << r;
    EXPECT_EQ(p.step(192).total, runs[static_cast<std::size_t>(r)]);
  }
}

// With sync batch norm every rank runs as many micro-batches as the one that runs the most (its
// collectives are made by every rank's forward and backward); the extra ones hold no samples.
TEST(BatchPlan, SyncBnRunsTheSameCountOnEveryRank) {
  const auto o = with_cap(with_shares(train_options(64, 192), {3, 1, 2}), 40);
  for (int r = 0; r < 3; ++r) {
    const BatchPlan p(o, true, 3, r, 0, false);
    EXPECT_TRUE(p.same_micro_count());
    EXPECT_EQ(p.max_micro_batches(), 3) << "rank " << r;
    const MicroBatchPlan s = p.step(192);
    EXPECT_EQ(s.total, 3);
    EXPECT_EQ(s.range(s.total - 1).second - s.range(s.total - 1).first, r == 0 ? 32 : 0);
  }
  // One rank has nobody to agree with.
  EXPECT_FALSE(BatchPlan(train_options(64), true, 1, 0, 0, false).same_micro_count());
}

// Measured caps (train.max_micro_batch = auto) replace none; the sizes follow.
TEST(BatchPlan, MeasuredCapsResizeThePlan) {
  Options o = with_shares(train_options(64, 192), {3, 1, 2});
  o.max_micro_batch = {"auto", {}};
  const BatchPlan p(o, true, 3, 0, 0, false);
  EXPECT_EQ(p.caps(), (Sizes{0, 0, 0}));
  EXPECT_EQ(p.micro_batch(), 96);
  const BatchPlan q = p.with_caps({50, 8, 100});
  EXPECT_EQ(p.micro_batch(), 96);  // a value: the original is unchanged
  EXPECT_EQ(q.caps(), (Sizes{50, 8, 100}));
  EXPECT_EQ(q.micro_batch(), 48);       // 96 in 2
  EXPECT_EQ(q.max_micro_batches(), 4);  // rank 1's 32 in 4, which every rank runs
  EXPECT_THROW(p.with_caps({1, 2}), Error);
  EXPECT_THROW(p.with_caps({1, -2, 3}), Error);
}

// An epoch's short last batch is planned too: a cap of 40 cuts a slice of 96 into 3 x 32, but the
// last batch's slice of 40 runs as one micro-batch of 40.
TEST(BatchPlan, ShortLastBatchIsPlanned) {
  const auto o = with_cap(train_options(96), 40);
  const BatchPlan whole(o, false, 1, 0, 0, false);
  EXPECT_EQ(whole.micro_batch(), 32);
  const BatchPlan with_last(o, false, 1, 0, 96 * 5 + 40, false);
  EXPECT_EQ(with_last.micro_batch(), 40);
  EXPECT_EQ(with_last.rank_batch(), 96);
  EXPECT_EQ(with_last.step(40).total, 1);
  // train.drop_last drops the short batch: it is not planned.
  EXPECT_EQ(BatchPlan(o, false, 1, 0, 96 * 5 + 40, true).micro_batch(), 32);
  // The short batch is cut in the shares' proportions; a rank may get none of it and still runs
  // its (empty) micro-batch.
  const BatchPlan r2(with_shares(train_options(64, 192), {3, 1, 2}), false, 3, 1, 192 * 2 + 2,
                     false);
  const MicroBatchPlan s = r2.step(2);
  EXPECT_EQ(s.samples, 0);
  EXPECT_EQ(s.total, 1);
  EXPECT_EQ(BatchPlan(with_shares(train_options(64, 192), {3, 1, 2}), false, 3, 2, 0, false)
                .step(2)
                .samples,
            1);
}

TEST(BatchPlan, NewSharesComeFromWeights) {
  const BatchPlan p(train_options(64, 192, 2), false, 3, 0, 0, false);
  const Sizes next = p.shares_for({3, 1, 2});
  EXPECT_EQ(next, (Sizes{96, 32, 64}));
  EXPECT_TRUE(p.fits(next));
  const BatchPlan q = p.with_shares(next);
  EXPECT_EQ(q.shares(), next);
  EXPECT_EQ(q.rank_batch(), 96);
  EXPECT_EQ(q.micro_batch(), 48);
  // Shares of another global batch, world or below train.accumulate do not fit.
  EXPECT_FALSE(p.fits({96, 32, 63}));
  EXPECT_FALSE(p.fits({96, 96}));
  EXPECT_FALSE(p.fits({190, 1, 1}));
  EXPECT_THROW(p.with_shares({96, 96}), Error);
}

TEST(BatchPlan, SharesForRefusesWhatCannotBeTrained) {
  const BatchPlan p(train_options(64, 192, 2), false, 3, 0, 0, false);
  auto message = [&](const Sizes& w) {
    try {
      p.shares_for(w);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message({1, 2}), "set_rank_shares: 2 share(s) for 3 rank(s)");
  EXPECT_EQ(message({1, 0, 2}), "set_rank_shares: share 0 is not positive");
  EXPECT_EQ(message({1000, 1, 1}),
            "set_rank_shares: shares 1000, 1, 1 give rank 1 0 sample(s) of the global batch of "
            "192, fewer than its 2 micro-batch(es)");
}

TEST(BatchPlan, ConfigurationErrorsNameTheKey) {
  EXPECT_EQ(config_error(train_options(64, 4, 2), 3),
            "train.global_batch = 4 is smaller than 3 ranks x 2 micro-batches (train.accumulate): "
            "every micro-batch needs a sample");
  EXPECT_EQ(config_error(with_shares(train_options(64), {1, 2}), 3),
            "train.rank_shares = [1, 2]: 2 share(s) for 3 rank(s): give one share per rank (or "
            "\"equal\", \"auto\")");
  const std::string none = config_error(with_shares(train_options(64, 10), {1, 1000}), 2);
  EXPECT_THAT(none, HasSubstr("train.rank_shares = [1, 1000]: rank 0 gets no sample of the "
                              "global batch of 10 (train.global_batch): every rank needs at least "
                              "one; a global batch of at least "));
  EXPECT_THAT(none, HasSubstr(" gives each rank one, or raise rank 0's share"));
  // Shares so uneven that no batch gives every rank a sample.
  EXPECT_THAT(config_error(with_shares(train_options(64, 10), {1e-300, 1}), 2),
              HasSubstr("every rank needs at least one; raise rank 0's share"));
  EXPECT_EQ(config_error(with_shares(train_options(64, 10, 2), {1, 1, 8}), 3),
            "train.rank_shares = [1, 1, 8]: rank 0's share of the global batch of 10 is 1 "
            "sample(s), fewer than train.accumulate = 2 micro-batches: every micro-batch needs a "
            "sample");
}

// The smallest global batch the message names does give every rank a sample, and one less does
// not.
TEST(BatchPlan, TheSuggestedGlobalBatchIsTheSmallestThatFits) {
  const auto o = with_shares(train_options(64, 10), {1, 1000});
  const std::string m = config_error(o, 2);
  const auto at = m.find("at least ", m.find("a global batch of at least")) + 9;
  const std::int64_t least = std::stoll(m.substr(at));
  EXPECT_NO_THROW(
      BatchPlan(with_shares(train_options(64, least), {1, 1000}), false, 2, 0, 0, false));
  EXPECT_THROW(
      BatchPlan(with_shares(train_options(64, least - 1), {1, 1000}), false, 2, 0, 0, false),
      ConfigError);
}

// train.max_micro_batch = auto on a GPU: what is free, less the batch slots and the accumulation
// buffer, with a fifth kept back, in samples' activations.
TEST(BatchPlan, AutoCapFromDeviceMemory) {
  DeviceMemoryFigures m;
  m.rank = 2;
  m.free_bytes = 1024.0 * 1024 * 1024;
  m.activations_per_sample = 100000;  // floats
  m.classes = 10;
  m.sample_floats = 3 * 32 * 32;
  m.rank_batch = 256;
  m.gradient_floats = 1000000;
  const double sample = 4.0 * (100000 + 10);
  const double fixed = 4.0 * (2.0 * 256 * 3 * 32 * 32 + 1000000);
  EXPECT_EQ(auto_micro_batch_cap(m),
            static_cast<std::int64_t>((0.8 * m.free_bytes - fixed) / sample));
  m.free_bytes = fixed;  // not one sample fits
  try {
    auto_micro_batch_cap(m);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.max_micro_batch = auto: rank 2's device has 10 MiB "
                                    "free once the model is in it, not enough for the batch "
                                    "slots (10 MiB) and one sample's activations (0 MiB)"));
  }
}

}  // namespace
}  // namespace ddp::train
