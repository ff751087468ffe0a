// Auto shares, the predicted step time, the re-balance decision and the straggler report: pure
// functions of a gathered speed table. The gathering itself runs over real MPI ranks in
// tests/integration/test_rank_metrics.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "ddp/error.hpp"
#include "ddp/rng.hpp"
#include "ddp/train/rank_balance.hpp"

namespace ddp::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Shares = std::vector<std::int64_t>;

TEST(AutoShares, EqualSpeedsSplitEvenlyWithTiesToTheLowerRanks) {
  EXPECT_EQ(auto_shares({2e-3, 2e-3, 2e-3}, 192), (Shares{64, 64, 64}));
  EXPECT_EQ(auto_shares({1.0, 1.0, 1.0}, 10), (Shares{4, 3, 3}));
  EXPECT_EQ(auto_shares({1.0, 1.0, 1.0}, 11), (Shares{4, 4, 3}));
  EXPECT_EQ(auto_shares({1.0, 1.0}, 5), (Shares{3, 2}));
}

TEST(AutoShares, ProportionalToSpeed) {
  // One rank alone on a core, two sharing one: half, a quarter, a quarter.
  EXPECT_EQ(auto_shares({1e-3, 2e-3, 2e-3}, 192), (Shares{96, 48, 48}));
  // Speeds 3 : 1 : 2.
  EXPECT_EQ(auto_shares({1.0 / 3, 1.0, 1.0 / 2}, 192), (Shares{96, 32, 64}));
}

TEST(AutoShares, LargestRemainderGetsTheLeftoverSamples) {
  // Quotas 2.6, 3.3, 4.1 of 10: floors 2 + 3 + 4, the one left over goes to the .6.
  EXPECT_EQ(auto_shares({1 / 2.6, 1 / 3.3, 1 / 4.1}, 10), (Shares{3, 3, 4}));
  // Quotas 1.45, 2.9, 5.65 of 10: floors 1 + 2 + 5, then .9 and .65.
  EXPECT_EQ(auto_shares({1 / 1.45, 1 / 2.9, 1 / 5.65}, 10), (Shares{1, 3, 6}));
}

TEST(AutoShares, EveryRankKeepsAtLeastOneSample) {
  EXPECT_EQ(auto_shares({1.0, 1000.0}, 4), (Shares{3, 1}));
  EXPECT_EQ(auto_shares({1.0, 1e6, 1e6}, 3), (Shares{1, 1, 1}));
  // Quotas 2.4988, 2.4988, 0.0025 of 5: rounding gives 3, 2, 0; the sample for rank 2 comes from
  // rank 0, whose 3 exceeds its quota most.
  EXPECT_EQ(auto_shares({1.0, 1.0, 1000.0}, 5), (Shares{2, 2, 1}));
}

TEST(AutoShares, AlwaysSumToTheBatchWithASampleEach) {
  // Times over four orders of magnitude, world sizes 1..9, batches from the world size up.
  std::uint64_t state = 12345;
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t n = 1 + hash_words(state, 1) % 9;
    std::vector<double> t(n);
    for (std::size_t r = 0; r < n; ++r)
      t[r] = 1e-4 * std::pow(10.0, static_cast<double>(hash_words(state, 2, r) % 4000) / 1000.0);
    state = hash_words(state, 3);
    const auto batch = static_cast<std::int64_t>(n + hash_words(state, 4) % 300);
    const auto s = auto_shares(t, batch);
    ASSERT_EQ(s.size(), n);
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), std::int64_t{0}), batch) << "trial " << trial;
    for (std::size_t r = 0; r < n; ++r) {
      EXPECT_GE(s[r], 1) << "trial " << trial << " rank " << r;
      // A faster rank never gets fewer samples than a slower one.
      for (std::size_t q = 0; q < n; ++q)
        if (t[r] < t[q]) EXPECT_GE(s[r], s[q]) << "trial " << trial;
    }
  }
}

TEST(AutoShares, RefusesWhatCannotBeSplit) {
  try {
    auto_shares({1.0, 1.0, 1.0}, 2);
    FAIL() << "a batch of 2 over 3 ranks was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train.global_batch"));
  }
  EXPECT_THROW(auto_shares({1.0, 0.0}, 8), Error);
  EXPECT_THROW(auto_shares({1.0, -1.0}, 8), Error);
  EXPECT_THROW(auto_shares({1.0, std::numeric_limits<double>::quiet_NaN()}, 8), Error);
  EXPECT_THROW(auto_shares({}, 8), Error);
}

TEST(PredictedStep, TheSlowestRankSetsThePace) {
  EXPECT_DOUBLE_EQ(predicted_step_s({2, 2}, {1.0, 3.0}), 6.0);
  EXPECT_DOUBLE_EQ(predicted_step_s({3, 1}, {1.0, 3.0}), 3.0);
  EXPECT_THROW(predicted_step_s({1, 2, 3}, {1.0, 1.0}), Error);
}

TEST(ShouldRebalance, OnlyWhenTheStepShortensByMoreThanTheThreshold) {
  // 6 s -> 3 s: half.
  EXPECT_TRUE(should_rebalance({2, 2}, {3, 1}, {1.0, 3.0}, 0.05));
  EXPECT_FALSE(should_rebalance({2, 2}, {3, 1}, {1.0, 3.0}, 0.5));  // exactly 50%: not more
  EXPECT_TRUE(should_rebalance({2, 2}, {3, 1}, {1.0, 3.0}, 0.49));
  EXPECT_FALSE(should_rebalance({3, 1}, {2, 2}, {1.0, 3.0}, 0.05));  // worse
  EXPECT_FALSE(should_rebalance({2, 2}, {2, 2}, {1.0, 3.0}, 0.0));   // the same
  // 100 -> 97 samples' time: 3%, under the default 5%.
  EXPECT_FALSE(should_rebalance({100, 100}, {103, 97}, {1.0, 1.0}, kDefaultRebalanceThreshold));
}

// A table as the trainer gathers it: per-sample times and shares.
std::vector<RankSpeed> table(const std::vector<double>& per_sample_s, const Shares& shares) {
  std::vector<RankSpeed> t;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    RankSpeed s;
    s.rank = static_cast<int>(r);
    s.host = r < 2 ? "ws-a" : "ws-b";
    s.threads = 1;
    s.cpus = r == 0 ? "0" : "1";
    s.share = shares[r];
    s.steps = 10;
    s.samples = 10 * shares[r];
    s.timed_samples = 9 * shares[r];
    s.timed_compute_s = per_sample_s[r] * static_cast<double>(s.timed_samples);
    s.compute_s = s.timed_compute_s * 10 / 9;
    s.train_s = 1.0;
    t.push_back(s);
  }
  return t;
}

TEST(RebalancedShares, ProposesAutoSharesOnlyWhenTheyPayOff) {
  const auto slow = table({1e-3, 2e-3, 2e-3}, {64, 64, 64});
  const auto next = rebalanced_shares(slow, kDefaultRebalanceThreshold);
  ASSERT_TRUE(next.has_value());
  EXPECT_THAT(*next, ElementsAre(96, 48, 48));
  // Already balanced: nothing to do.
  EXPECT_FALSE(rebalanced_shares(table({1e-3, 2e-3, 2e-3}, {96, 48, 48}), 0.05).has_value());
  // 4% apart: under the threshold.
  EXPECT_FALSE(rebalanced_shares(table({1e-3, 1.04e-3}, {64, 64}), 0.05).has_value());
  EXPECT_TRUE(rebalanced_shares(table({1e-3, 1.04e-3}, {64, 64}), 0.01).has_value());
  // A rank that timed nothing: no speed to balance by.
  auto blind = slow;
  blind[1].timed_samples = 0;
  EXPECT_FALSE(rebalanced_shares(blind, 0.0).has_value());
}

TEST(StragglerReport, NamesEverySlowRankWithThePredictedGain) {
  // Ranks 1 and 2 at half speed: auto gives 95/47/50 of 192, the slowest 95 x 1 ms.
  EXPECT_EQ(straggler_report(table({1e-3, 2e-3, 1.9e-3}, {64, 64, 64}), 0.05, false),
            "stragglers: rank 1 (ws-a, 1 thread, CPUs 1) computes 2.00x and rank 2 (ws-b, 1 "
            "thread, CPUs 1) 1.90x slower per sample than the fastest rank (0); with "
            "rank_shares = auto a step's compute would take ~95.0 ms instead of ~128 ms");
  // 42/22 of 64: max(42 x 2, 22 x 3.8) ms against 32 x 3.8 ms.
  EXPECT_EQ(straggler_report(table({2e-3, 3.8e-3}, {32, 32}), 0.05, false),
            "straggler: rank 1 (ws-a, 1 thread, CPUs 1) computes 1.90x slower per sample than "
            "the fastest rank (0); with rank_shares = auto a step's compute would take ~84.0 ms "
            "instead of ~122 ms");
  auto wide = table({1e-3, 2e-3}, {32, 32});
  wide[1].threads = 4;
  EXPECT_THAT(straggler_report(wide, 0.05, false),
              HasSubstr("straggler: rank 1 (ws-a, 4 threads, CPUs 1) computes 2.00x"));
  // The fastest need not be rank 0; the figures without host, threads or CPUs.
  auto anonymous = table({3e-3, 1e-3}, {8, 8});
  for (auto& s : anonymous)
    s = RankSpeed{s.rank,    "",          0,        "",        s.share,         s.steps,
                  s.samples, s.compute_s, s.wait_s, s.train_s, s.timed_samples, s.timed_compute_s};
  EXPECT_THAT(straggler_report(anonymous, 0.05, false),
              HasSubstr("straggler: rank 0 computes 3.00x slower per sample than the fastest "
                        "rank (1)"));
}

TEST(StragglerReport, SaysThatAutoReBalancesWhenTheRunUsesIt) {
  EXPECT_THAT(straggler_report(table({1e-3, 2e-3}, {32, 32}), 0.05, true),
              HasSubstr("re-balancing the shares (rank_shares = auto): a step's compute takes ~"));
}

TEST(StragglerReport, QuietWithinTwentyPercentOrWhenTheSharesAlreadyFit) {
  EXPECT_EQ(straggler_report(table({1e-3, 1.19e-3}, {64, 64}), 0.05, false), "");
  EXPECT_THAT(straggler_report(table({1e-3, 1.21e-3}, {64, 64}), 0.05, false),
              HasSubstr("rank 1 (ws-a, 1 thread, CPUs 1) computes 1.21x"));
  // Twice as slow but given half the samples: it holds nobody back.
  EXPECT_EQ(straggler_report(table({1e-3, 2e-3, 2e-3}, {96, 48, 48}), 0.05, true), "");
  EXPECT_EQ(straggler_report(table({1e-3, 2e-3, 2e-3}, {96, 48, 48}), 0.05, false), "");
  // One rank, or nothing timed: nothing to compare.
  EXPECT_EQ(straggler_report(table({1e-3}, {64}), 0.05, false), "");
  EXPECT_EQ(straggler_report({}, 0.05, false), "");
}

TEST(StepMeter, LeavesTheWarmUpStepOutOfTheSpeed) {
  StepMeter meter;
  meter.add_step(5.0, 0.5, 10);  // the run's first step: slow
  meter.add_step(1.0, 0.25, 10);
  meter.add_step(2.0, 0.25, 20);
  const RankSpeed e1 = meter.take_epoch(9.0);
  EXPECT_EQ(e1.steps, 3);
  EXPECT_EQ(e1.samples, 40);
  EXPECT_DOUBLE_EQ(e1.compute_s, 8.0);
  EXPECT_DOUBLE_EQ(e1.wait_s, 1.0);
  EXPECT_EQ(e1.timed_samples, 30);
  EXPECT_DOUBLE_EQ(e1.compute_per_sample_s(), 0.1);
  EXPECT_DOUBLE_EQ(e1.images_per_s(), 40.0 / 9.0);
  // The next epoch starts from zero and times every step.
  meter.add_step(3.0, 0.0, 10);
  const RankSpeed e2 = meter.take_epoch(4.0);
  EXPECT_EQ(e2.steps, 1);
  EXPECT_EQ(e2.timed_samples, 10);
  EXPECT_DOUBLE_EQ(e2.compute_per_sample_s(), 0.3);
  EXPECT_DOUBLE_EQ(meter.take_epoch(1.0).compute_per_sample_s(), 0.0);  // nothing trained
}

TEST(StepMeter, AnEpochOfOnlyTheWarmUpStepUsesIt) {
  StepMeter meter;
  meter.add_step(2.0, 0.0, 8);
  const RankSpeed e = meter.take_epoch(2.5);
  EXPECT_EQ(e.timed_samples, 8);
  EXPECT_DOUBLE_EQ(e.compute_per_sample_s(), 0.25);
}

}  // namespace
}  // namespace ddp::train
