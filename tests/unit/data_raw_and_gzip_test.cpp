// A data file present both raw and gzipped (an extracted copy next to the download): the same
// content is read once, different content is an error naming both files, never a silent choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {
namespace {

using test_util::data_error_of;
using test_util::idx_images;
using test_util::idx_labels;
using test_util::TempDir;
using test_util::write_file;
using test_util::write_gz;
using ::testing::HasSubstr;

// An MNIST-style training split of 12 samples, its images raw and/or gzipped (gz_n images there).
void write_train_split(const TempDir& dir, bool raw_images, bool gz_images, std::uint32_t gz_n) {
  write_file(dir / "train-labels-idx1-ubyte", idx_labels(12));
  if (raw_images) write_file(dir / "train-images-idx3-ubyte", idx_images(12, 4, 5));
  if (gz_images) write_gz(dir / "train-images-idx3-ubyte.gz", idx_images(gz_n, 4, 5));
}

TEST(DataRawAndGzip, OnlyTheGzipCopyIsRead) {
  TempDir dir;
  write_train_split(dir, false, true, 12);
  EXPECT_EQ(read_mnist_dir(dir.path(), Split::train).size(), 12);
}

TEST(DataRawAndGzip, EqualCopiesAreFine) {
  TempDir dir;
  write_train_split(dir, true, true, 12);
  const SampleSet ds = read_mnist_dir(dir.path(), Split::train);
  EXPECT_EQ(ds.size(), 12);
  EXPECT_THAT(ds.origin(), HasSubstr("train-images-idx3-ubyte'"));  // the raw one
}

TEST(DataRawAndGzip, DifferentCopiesAreAnErrorNamingBoth) {
  TempDir dir;
  // The gzipped copy holds other images (here: fewer; a valid file of its own).
  write_file(dir / "train-labels-idx1-ubyte", idx_labels(12));
  write_file(dir / "train-images-idx3-ubyte", idx_images(12, 4, 5));
  auto other = idx_images(12, 4, 5);
  other.back() ^= 0xff;  // one pixel differs
  write_gz(dir / "train-images-idx3-ubyte.gz", other);
  const std::string msg = data_error_of([&] { (void)read_mnist_dir(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte' and "));
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte.gz'"));
  EXPECT_THAT(msg, HasSubstr("hold different data"));
}

TEST(DataRawAndGzip, DifferentLabelCopiesToo) {
  TempDir dir;
  write_train_split(dir, true, false, 0);
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels(11));
  const std::string msg = data_error_of([&] { (void)read_mnist_dir(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("train-labels-idx1-ubyte.gz'"));
}

}  // namespace
}  // namespace ddp::data
