// metrics.jsonl's per-rank array: appended after the fields that existed before it, which keep
// their text (tests and scripts grep them), one object per rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ddp/train/metrics.hpp"

namespace ddp::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(MetricsRanks, ARanksArrayFollowsTheUnchangedFields) {
  EpochMetrics m;
  m.epoch = 2;
  m.steps = 8;
  m.images_per_s = 1000.0;
  const std::string before = to_json(m);
  EXPECT_THAT(before, Not(HasSubstr("ranks")));
  RankSpeed a;
  a.rank = 0;
  a.host = "ws-a";
  a.threads = 2;
  a.cpus = "0-1";
  a.share = 96;
  a.steps = 8;
  a.samples = 768;
  a.compute_s = 1.5;
  a.wait_s = 0.25;
  a.train_s = 2.0;
  a.timed_samples = 768;
  a.timed_compute_s = 1.5;
  RankSpeed b = a;
  b.rank = 1;
  b.host = "ws\"b";  // quoted in the JSON
  b.share = 32;
  b.samples = 256;
  m.ranks = {a, b};
  const std::string after = to_json(m);
  ASSERT_THAT(after, StartsWith(before.substr(0, before.size() - 1) + ", \"ranks\": [{"));
  EXPECT_THAT(after,
              HasSubstr("{\"rank\": 0, \"host\": \"ws-a\", \"threads\": 2, \"cpus\": \"0-1\", "
                        "\"share\": 96, \"samples\": 768, \"compute_s\": 1.5, \"wait_s\": 0.25, "
                        "\"images_per_s\": 384, \"compute_ms_per_sample\": 1.953125}"));
  EXPECT_THAT(after, HasSubstr("{\"rank\": 1, \"host\": \"ws\\\"b\", "));
  EXPECT_THAT(after, HasSubstr("\"images_per_s\": 128, "));
  EXPECT_EQ(after.back(), '}');
  EXPECT_EQ(after.substr(after.size() - 3), "}]}");
}

}  // namespace
}  // namespace ddp::train
