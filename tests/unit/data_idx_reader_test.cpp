// IDX (MNIST-style) reader: raw and gzip decoding, directory layout, and every malformed input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;
using test_util::Bytes;
using test_util::data_error_of;
using test_util::idx_images;
using test_util::idx_labels;
using test_util::pattern;
using test_util::put_be32;
using test_util::read_file;
using test_util::TempDir;
using test_util::write_file;
using test_util::write_gz;
using ::testing::HasSubstr;

void expect_idx_pattern(const SampleSet& ds, std::int64_t n, std::int64_t rows, std::int64_t cols) {
  ASSERT_EQ(ds.size(), n);
  EXPECT_EQ(ds.channels(), 1);
  EXPECT_EQ(ds.height(), rows);
  EXPECT_EQ(ds.width(), cols);
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(ds.label(i), i % 10);
    for (std::int64_t y = 0; y < rows; ++y)
      for (std::int64_t x = 0; x < cols; ++x)
        ASSERT_EQ(ds.image(i)[static_cast<std::size_t>(y * cols + x)], pattern(i, 0, y, x));
  }
}

TEST(DataIdxReader, DecodesRaw) {
  TempDir dir;
  write_file(dir / "img", idx_images(13, 4, 5));
  write_file(dir / "lbl", idx_labels(13));
  expect_idx_pattern(read_idx(dir / "img", dir / "lbl"), 13, 4, 5);
}

TEST(DataIdxReader, GzipEqualsRaw) {
  TempDir dir;
  write_file(dir / "img", idx_images(13, 4, 5));
  write_file(dir / "lbl", idx_labels(13));
  write_gz(dir / "img.gz", idx_images(13, 4, 5));
  write_gz(dir / "lbl.gz", idx_labels(13));
  const SampleSet raw = read_idx(dir / "img", dir / "lbl");
  const SampleSet gz = read_idx(dir / "img.gz", dir / "lbl.gz");
  ASSERT_EQ(raw.size(), gz.size());
  EXPECT_TRUE(std::equal(raw.pixels().begin(), raw.pixels().end(), gz.pixels().begin()));
  EXPECT_TRUE(std::equal(raw.labels().begin(), raw.labels().end(), gz.labels().begin()));
}

TEST(DataIdxReader, GzipDetectedByContentNotName) {
  TempDir dir;
  write_gz(dir / "images.raw", idx_images(3, 2, 2));  // gzip without .gz
  write_file(dir / "labels.gz", idx_labels(3));       // raw despite .gz
  expect_idx_pattern(read_idx(dir / "images.raw", dir / "labels.gz"), 3, 2, 2);
}

TEST(DataIdxReader, MultiMemberGzip) {
  // `cat a.gz b.gz` is a valid gzip file whose content is a + b.
  TempDir dir;
  const Bytes all = idx_images(6, 3, 3);
  const Bytes a(all.begin(), all.begin() + 20), b(all.begin() + 20, all.end());
  write_gz(dir / "a.gz", a);
  write_gz(dir / "b.gz", b);
  Bytes cat = read_file(dir / "a.gz");
  const Bytes tail = read_file(dir / "b.gz");
  cat.insert(cat.end(), tail.begin(), tail.end());
  write_file(dir / "img.gz", cat);
  write_file(dir / "lbl", idx_labels(6));
  expect_idx_pattern(read_idx(dir / "img.gz", dir / "lbl"), 6, 3, 3);
}

TEST(DataIdxReader, MissingFile) {
  TempDir dir;
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img").string()));
  EXPECT_THAT(msg, HasSubstr("no such file"));
}

TEST(DataIdxReader, EmptyFile) {
  TempDir dir;
  write_file(dir / "img", {});
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img").string()));
  EXPECT_THAT(msg, HasSubstr("is empty"));
  EXPECT_THAT(msg, HasSubstr("0x00000803"));
}

TEST(DataIdxReader, ShortHeader) {
  TempDir dir;
  Bytes b;
  put_be32(b, 0x00000803);
  put_be32(b, 3);
  write_file(dir / "img", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("8 bytes is too short for the 16-byte IDX image header"));
}

TEST(DataIdxReader, WrongMagic) {
  TempDir dir;
  Bytes b = idx_images(3, 2, 2);
  b[3] = 0x04;
  write_file(dir / "img", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img").string()));
  EXPECT_THAT(msg, HasSubstr("bad IDX magic number 0x00000804; expected 0x00000803"));
}

TEST(DataIdxReader, UnsupportedElementType) {
  TempDir dir;
  Bytes b = idx_images(3, 2, 2);
  b[2] = 0x0D;  // float
  write_file(dir / "img", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("element type 0x0000000D is not supported"));
}

TEST(DataIdxReader, SwappedFiles) {
  TempDir dir;
  write_file(dir / "img", idx_images(3, 2, 2));
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "lbl", dir / "img"); });
  EXPECT_THAT(msg, HasSubstr("bad IDX magic number"));
  EXPECT_THAT(msg, HasSubstr("swapped"));
}

TEST(DataIdxReader, ImagesTruncated) {
  TempDir dir;
  Bytes b = idx_images(3, 4, 5);
  b.resize(b.size() - 7);
  write_file(dir / "img", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img").string()));
  EXPECT_THAT(msg, HasSubstr("the header says 3 images of 4x5 (76 bytes including the 16-byte "
                             "header), but the file holds 69 bytes; it is truncated"));
}

TEST(DataIdxReader, ImagesTruncatedInsideGzip) {
  TempDir dir;
  Bytes b = idx_images(3, 4, 5);
  b.resize(b.size() - 7);
  write_gz(dir / "img.gz", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img.gz", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("holds 69 bytes (after gzip decompression); it is truncated"));
}

TEST(DataIdxReader, TrailingBytes) {
  TempDir dir;
  Bytes b = idx_labels(3);
  b.push_back(1);
  write_file(dir / "img", idx_images(3, 2, 2));
  write_file(dir / "lbl", b);
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "lbl").string()));
  EXPECT_THAT(msg, HasSubstr("the header says 3 labels"));
  EXPECT_THAT(msg, HasSubstr("1 unexpected trailing bytes"));
}

TEST(DataIdxReader, ZeroImages) {
  TempDir dir;
  write_file(dir / "img", idx_images(0, 2, 2));
  write_file(dir / "lbl", idx_labels(0));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("the header says 0 images of 2x2"));
}

TEST(DataIdxReader, ImpossibleHeaderSize) {
  TempDir dir;
  Bytes b;
  for (std::uint32_t v : {0x00000803u, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}) put_be32(b, v);
  write_file(dir / "img", b);
  write_file(dir / "lbl", idx_labels(3));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("an impossible size"));
}

TEST(DataIdxReader, CountMismatch) {
  TempDir dir;
  write_file(dir / "img", idx_images(3, 2, 2));
  write_file(dir / "lbl", idx_labels(2));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img").string() + "' holds 3 images but"));
  EXPECT_THAT(msg, HasSubstr((dir / "lbl").string() + "' holds 2 labels"));
}

TEST(DataIdxReader, LabelOutOfRange) {
  TempDir dir;
  Bytes b = idx_labels(3);
  b[8 + 1] = 10;
  write_file(dir / "img", idx_images(3, 2, 2));
  write_file(dir / "lbl", b);
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "lbl").string()));
  EXPECT_THAT(msg, HasSubstr("label 10 at index 1 (byte offset 9) is out of range; expected 0..9"));
  // With more classes the same file is fine.
  EXPECT_EQ(read_idx(dir / "img", dir / "lbl", 11).label(1), 10);
}

TEST(DataIdxReader, CorruptGzip) {
  TempDir dir;
  write_gz(dir / "img.gz", idx_images(50, 8, 8));
  Bytes b = read_file(dir / "img.gz");
  for (std::size_t i = 20; i < b.size() - 20; i += 7) b[i] ^= 0x5a;
  write_file(dir / "img.gz", b);
  write_file(dir / "lbl", idx_labels(50));
  const std::string msg = data_error_of([&] { read_idx(dir / "img.gz", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img.gz").string()));
  EXPECT_THAT(msg, HasSubstr("corrupt gzip stream"));
}

TEST(DataIdxReader, CorruptGzipChecksum) {
  TempDir dir;
  write_gz(dir / "img.gz", idx_images(5, 4, 4));
  Bytes b = read_file(dir / "img.gz");
  b[b.size() - 6] ^= 0xff;  // inside the CRC-32 of the trailer
  write_file(dir / "img.gz", b);
  write_file(dir / "lbl", idx_labels(5));
  const std::string msg = data_error_of([&] { read_idx(dir / "img.gz", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr("corrupt gzip stream"));
  EXPECT_THAT(msg, HasSubstr("incorrect data check"));
}

TEST(DataIdxReader, TruncatedGzip) {
  TempDir dir;
  write_gz(dir / "img.gz", idx_images(50, 8, 8));
  Bytes b = read_file(dir / "img.gz");
  b.resize(b.size() / 2);
  write_file(dir / "img.gz", b);
  write_file(dir / "lbl", idx_labels(50));
  const std::string msg = data_error_of([&] { read_idx(dir / "img.gz", dir / "lbl"); });
  EXPECT_THAT(msg, HasSubstr((dir / "img.gz").string()));
  EXPECT_THAT(msg, HasSubstr("truncated gzip stream"));
}

TEST(DataIdxReader, GzipTrailingGarbage) {
  TempDir dir;
  write_gz(dir / "lbl.gz", idx_labels(3));
  Bytes b = read_file(dir / "lbl.gz");
  b.push_back(0x42);
  write_file(dir / "lbl.gz", b);
  write_file(dir / "img", idx_images(3, 2, 2));
  const std::string msg = data_error_of([&] { read_idx(dir / "img", dir / "lbl.gz"); });
  EXPECT_THAT(msg, HasSubstr("1 unexpected bytes after the end of the compressed data"));
}

TEST(DataMnistDir, FindsRawGzipAndDottedNames) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", idx_images(7, 3, 2));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels(7));
  write_gz(dir / "t10k-images.idx3-ubyte.gz", idx_images(4, 3, 2));
  write_file(dir / "t10k-labels.idx1-ubyte", idx_labels(4));
  expect_idx_pattern(read_mnist_dir(dir.path(), Split::train), 7, 3, 2);
  expect_idx_pattern(read_mnist_dir(dir.path(), Split::test), 4, 3, 2);
  EXPECT_EQ(read_dataset("mnist", dir.path(), Split::test).size(), 4);
  EXPECT_EQ(read_dataset("fashion_mnist", dir.path(), Split::train).size(), 7);
}

TEST(DataMnistDir, MissingFileListsExpectedNames) {
  TempDir dir;
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_images(7, 3, 2));
  const std::string msg = data_error_of([&] { read_mnist_dir(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "train-labels-idx1-ubyte").string() + "' (or .gz)"));
  EXPECT_THAT(msg, HasSubstr("no such file"));
  EXPECT_THAT(msg, HasSubstr("t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte"));
}

TEST(DataMnistDir, MissingDirectory) {
  TempDir dir;
  const std::string msg = data_error_of([&] { read_mnist_dir(dir / "absent", Split::test); });
  EXPECT_THAT(msg, HasSubstr((dir / "absent").string()));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte"));
  const std::string fm =
      data_error_of([&] { read_dataset("fashion_mnist", dir / "absent", Split::test); });
  EXPECT_THAT(fm, HasSubstr("dataset-fashion-mnist"));
}

}  // namespace
}  // namespace ddp::data
