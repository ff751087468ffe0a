// The report rank 0 prints when start-up failed on some ranks (runtime/error_agreement.hpp): each
// distinct message once, with the lowest failing rank and the ranks that failed alike.
#include <gtest/gtest.h>

#include "ddp/runtime/error_agreement.hpp"

namespace ddp::runtime {
namespace {

TEST(DescribeFailures, NothingWhenNoRankFailed) {
  EXPECT_EQ(describe_failures({std::nullopt, std::nullopt}), "");
}

TEST(DescribeFailures, OneRankNamesItself) {
  EXPECT_EQ(describe_failures({std::nullopt, std::string("bad option")}),
            "ddp_train: error (rank 1 of 2): bad option\n");
}

TEST(DescribeFailures, EveryRankAlikeIsSaidOnce) {
  EXPECT_EQ(
      describe_failures({std::string("x.toml:3: unknown key"), std::string("x.toml:3: unknown key"),
                         std::string("x.toml:3: unknown key")}),
      "ddp_train: error (rank 0 of 3; every rank alike): x.toml:3: unknown key\n");
}

TEST(DescribeFailures, DistinctMessagesEachOnceWithTheirRanks) {
  EXPECT_EQ(describe_failures({std::nullopt, std::string("a"), std::string("b"), std::string("a")}),
            "ddp_train: error (rank 1 of 4; ranks 1,3 alike): a\n"
            "ddp_train: error (rank 2 of 4): b\n");
}

TEST(DescribeFailures, AnEmptyMessageDefersToTheRankThatSaysWhy) {
  // Ranks 1-2 only know that rank 0 could not start the run; rank 0 says why.
  EXPECT_EQ(
      describe_failures({std::string("run.dir holds another run"), std::string(), std::string()}),
      "ddp_train: error (rank 0 of 3): run.dir holds another run\n");
  EXPECT_NE(describe_failures({std::nullopt, std::string()}), "");
}

}  // namespace
}  // namespace ddp::runtime
