// The stall report's wording and the options behind it (pure functions, no MPI).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ddp/comm/comm_options.hpp"
#include "ddp/comm/stall_report.hpp"
#include "ddp/error.hpp"

namespace ddp::comm {
namespace {

using ::testing::HasSubstr;

TEST(CommStallReport, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(253952), "248 KiB");
  EXPECT_EQ(format_bytes(3u << 19), "1.5 MiB");
  EXPECT_EQ(format_bytes(std::size_t{2} << 30), "2.0 GiB");
}

TEST(CommStallReport, MissingRanksAreThoseBehind) {
  const std::vector<std::int64_t> arrived = {7, 6, 7, 3, 8};
  EXPECT_EQ(missing_ranks(arrived, 7), (std::vector<int>{1, 3}));
  EXPECT_TRUE(missing_ranks(arrived, 3).empty());
  EXPECT_EQ(missing_ranks(arrived, 9), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(CommStallReport, RankListShortensRuns) {
  EXPECT_EQ(format_rank_list({}), "");
  EXPECT_EQ(format_rank_list({2}), "2");
  EXPECT_EQ(format_rank_list({1, 2}), "1, 2");
  EXPECT_EQ(format_rank_list({0, 1, 2, 5, 7, 8}), "0-2, 5, 7, 8");
}

TEST(CommStallReport, DescribesTheCollectiveAndTheMissingRanks) {
  const CollectiveInfo c{12, "allreduce", 253952};
  EXPECT_EQ(
      describe_stall(c, 5, {2}, true),
      "collective #12 (allreduce, 248 KiB) did not complete within 5 s; ranks not arrived: 2");
  EXPECT_EQ(describe_stall(c, 0.5, {1, 3}, true),
            "collective #12 (allreduce, 248 KiB) did not complete within 0.5 s; ranks not "
            "arrived: 1, 3");
}

TEST(CommStallReport, SaysWhenTheSetIsUnknownOrEmpty) {
  const CollectiveInfo barrier{3, "barrier", 0};
  EXPECT_EQ(describe_stall(barrier, 300, {}, false, "why"),
            "collective #3 (barrier) did not complete within 300 s; ranks not arrived: could not "
            "be determined (why)");
  EXPECT_THAT(describe_stall(barrier, 300, {0}, false), HasSubstr("ranks not arrived: 0 at least"));
  EXPECT_THAT(describe_stall(barrier, 300, {}, true), HasSubstr("every rank started it"));
}

TEST(CommOptions, TimeoutParsing) {
  EXPECT_FALSE(parse_timeout_s(nullptr, "X").has_value());
  EXPECT_FALSE(parse_timeout_s("", "X").has_value());
  EXPECT_EQ(parse_timeout_s("5", "X"), 5.0);
  EXPECT_EQ(parse_timeout_s("0.25", "X"), 0.25);
  EXPECT_EQ(parse_timeout_s("0", "X"), 0.0);
  EXPECT_THROW(parse_timeout_s("-1", "X"), ConfigError);
  EXPECT_THROW(parse_timeout_s("5s", "X"), ConfigError);
  EXPECT_THROW(parse_timeout_s("inf", "X"), ConfigError);
  try {
    parse_timeout_s("abc", "DDP_COMM_TIMEOUT_S");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DDP_COMM_TIMEOUT_S = 'abc'"));
  }
}

TEST(CommOptions, DefaultTimeoutAndEnvironment) {
  EXPECT_EQ(CommOptions{}.timeout_s, 300.0);
  setenv("DDP_COMM_TIMEOUT_S", "7.5", 1);
  EXPECT_EQ(comm_options_from_env().timeout_s, 7.5);
  EXPECT_EQ(comm_options_from_env(60).timeout_s, 7.5);  // the environment beats the config
  unsetenv("DDP_COMM_TIMEOUT_S");
  EXPECT_EQ(comm_options_from_env().timeout_s, CommOptions::kDefaultTimeoutS);
  EXPECT_EQ(comm_options_from_env(60).timeout_s, 60.0);
}

TEST(CommOptions, StallFaultParsing) {
  EXPECT_FALSE(parse_stall_fault(nullptr, "3").has_value());
  EXPECT_FALSE(parse_stall_fault("", nullptr).has_value());
  const auto f = parse_stall_fault("1", nullptr);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->at, 1);
  EXPECT_EQ(parse_stall_fault("2", "40")->at, 40);
  EXPECT_THROW(parse_stall_fault("x", nullptr), ConfigError);
  EXPECT_THROW(parse_stall_fault("-1", nullptr), ConfigError);
  EXPECT_THROW(parse_stall_fault("1", "0"), ConfigError);
  EXPECT_THROW(parse_stall_fault("1", "k"), ConfigError);
}

}  // namespace
}  // namespace ddp::comm
