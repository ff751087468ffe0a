// A run directory's file kept by rank 0 (train/kept_file.hpp): deleted or replaced under the run,
// it is written again whole at the next write, from what it held.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data_test_util.hpp"
#include "ddp/train/kept_file.hpp"

namespace ddp::train {
namespace {

namespace fs = std::filesystem;
using data::test_util::read_text;
using data::test_util::TempDir;

TEST(KeptFile, AppendsAndComesBackWholeAfterADelete) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  KeptFile f(path, "row 1\n");
  f.append("row 2\n");
  EXPECT_EQ(read_text(path), "row 1\nrow 2\n");
  EXPECT_FALSE(f.restore_if_gone());
  fs::remove(path);
  f.append("row 3\n");
  EXPECT_EQ(read_text(path), "row 1\nrow 2\nrow 3\n");
}

TEST(KeptFile, AReplacedFileIsWrittenAgain) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  KeptFile f(path, "mine\n");
  fs::rename(path, dir / "moved");
  std::ofstream(path) << "someone else's\n";
  f.append("more\n");
  EXPECT_EQ(read_text(path), "mine\nmore\n");
  EXPECT_EQ(read_text(dir / "moved"), "mine\n");
}

TEST(KeptFile, AdoptedFileIsRestoredAndAMissingOneIsNotKept) {
  TempDir dir;
  std::ofstream(dir / "config.toml") << "[train]\nepochs = 3\n";
  KeptFile config = KeptFile::adopt(dir / "config.toml");
  EXPECT_FALSE(config.restore_if_gone());
  fs::remove(dir / "config.toml");
  EXPECT_TRUE(config.restore_if_gone());
  EXPECT_EQ(read_text(dir / "config.toml"), "[train]\nepochs = 3\n");
  KeptFile none = KeptFile::adopt(dir / "absent.toml");
  EXPECT_FALSE(none.restore_if_gone());
  EXPECT_FALSE(fs::exists(dir / "absent.toml"));
}

}  // namespace
}  // namespace ddp::train
