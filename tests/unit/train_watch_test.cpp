// The small pieces of run.tensorboard and the progress lines: the TFRecord CRC (checked against
// published CRC-32C check values, masked as TensorFlow's record writer does) and the ETA text.
// The event files themselves are read back by an independent reader in test_tensorboard.sh.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ddp/train/progress_log.hpp"
#include "ddp/train/rank_log.hpp"
#include "ddp/train/tensorboard_writer.hpp"

namespace ddp::train {
namespace {

std::uint32_t mask(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TEST(TensorBoardWriter, MaskedCrc32cOfPublishedCheckValues) {
  // RFC 3720 (iSCSI) B.4 and the usual "123456789" check value of CRC-32C.
  const std::string digits = "123456789";
  EXPECT_EQ(masked_crc32c(digits.data(), digits.size()), mask(0xe3069283u));
  const std::string zeros(32, '\0');
  EXPECT_EQ(masked_crc32c(zeros.data(), zeros.size()), mask(0x8a9136aau));
  const std::string ones(32, '\xff');
  EXPECT_EQ(masked_crc32c(ones.data(), ones.size()), mask(0x62a8ab43u));
  EXPECT_EQ(masked_crc32c("", 0), mask(0u));
}

TEST(ProgressLog, DurationText) {
  EXPECT_EQ(duration_text(0.4), "0s");
  EXPECT_EQ(duration_text(59.0), "59s");
  EXPECT_EQ(duration_text(192.0), "3m12s");
  EXPECT_EQ(duration_text(3900.0), "1h05m");
  EXPECT_EQ(duration_text(-5.0), "0s");
}

// What the process writes through stderr while a RankLog lives reaches the file at once (before
// the RankLog ends: a rank may abort right after), stamped line by line; afterwards stderr is the
// process's own again.
TEST(RankLog, CopiesStderrLinesWithTimestamps) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "rank_log_test";
  std::filesystem::remove_all(dir);
  std::string during;
  {
    RankLog log(dir, 7);
    ASSERT_TRUE(log.active());
    EXPECT_EQ(log.path(), dir / "logs" / "rank_0007.log");
    log.note("start note");
    std::fprintf(stderr, "ddp_train: warning (rank 7 of 8): first\nsecond ");
    std::fprintf(stderr, "part %d\n", 2);
    std::ifstream in(log.path());
    std::stringstream text;
    text << in.rdbuf();
    during = text.str();
  }
  std::fprintf(stderr, "after the log\n");
  std::ifstream in(dir / "logs" / "rank_0007.log");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), during);
  const std::string stamp = R"(\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] )";
  EXPECT_TRUE(std::regex_match(during, std::regex(stamp + "start note\n" + stamp +
                                                  R"(ddp_train: warning \(rank 7 of 8\): first\n)" +
                                                  stamp + "second part 2\n")))
      << during;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddp::train
