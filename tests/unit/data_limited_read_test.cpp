// Limited reads (data.train_limit / data.test_limit): the CIFAR and IDX readers read only the kept
// samples, and give exactly what reading every sample and then limiting gives (pixels, labels,
// order, origin, the source's size), for random and first subsets, raw and gzipped files,
// subsets that cross files and gzip pieces; bad files are still refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "data_test_util.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/subset.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;
using test_util::Bytes;
using test_util::cifar10_records;
using test_util::data_error_of;
using test_util::idx_images;
using test_util::idx_labels;
using test_util::TempDir;
using test_util::write_file;
using test_util::write_gz;
using ::testing::HasSubstr;

void expect_same_as_limited(const LimitedSet& got, const SampleSet& all, const Limit& limit) {
  const SampleSet want = limit_samples(all, limit);
  EXPECT_EQ(got.source_size, all.size());
  EXPECT_EQ(got.samples.origin(), want.origin());
  ASSERT_EQ(got.samples.size(), want.size());
  EXPECT_EQ(got.samples.channels(), want.channels());
  EXPECT_EQ(got.samples.height(), want.height());
  EXPECT_EQ(got.samples.width(), want.width());
  EXPECT_EQ(got.samples.num_classes(), want.num_classes());
  EXPECT_TRUE(std::ranges::equal(got.samples.labels(), want.labels()));
  EXPECT_TRUE(std::ranges::equal(got.samples.pixels(), want.pixels()));
}

std::vector<Limit> limits_to_try(Split split) {
  std::vector<Limit> out;
  for (const std::int64_t count : {0, 1, 5, 37, 59, 60, 61, 1000})
    for (const char* pick : {"random", "first"})
      for (const std::uint64_t seed : {1u, 42u})
        out.push_back(Limit{.count = count, .pick = pick, .seed = seed, .split = split});
  return out;
}

// Batch files of 7, 20, 1, 12 and 20 records: random subsets fall in several of them.
void write_uneven_cifar10(const fs::path& dir) {
  const std::int64_t counts[] = {7, 20, 1, 12, 20};
  std::int64_t first = 0;
  for (int b = 0; b < 5; ++b) {
    write_file(dir / ("data_batch_" + std::to_string(b + 1) + ".bin"),
               cifar10_records(first, counts[b]));
    first += counts[b];
  }
  write_file(dir / "test_batch.bin", cifar10_records(100, 9));
}

TEST(DataLimitedRead, Cifar10KeptRecordsAcrossFiles) {
  TempDir dir;
  write_uneven_cifar10(dir.path());
  for (const Split split : {Split::train, Split::test}) {
    const SampleSet all = read_cifar10(dir.path(), split);
    for (const Limit& limit : limits_to_try(split)) {
      SCOPED_TRACE(std::to_string(limit.count) + " " + limit.pick);
      expect_same_as_limited(read_cifar10(dir.path(), split, limit), all, limit);
    }
  }
}

TEST(DataLimitedRead, Cifar10CorruptKeptLabelIsNamed) {
  TempDir dir;
  write_uneven_cifar10(dir.path());
  Bytes b = cifar10_records(7, 20);
  b[3 * 3073] = 10;  // record 3 of data_batch_2.bin: sample 10
  write_file(dir / "data_batch_2.bin", b);
  const Limit first{.count = 12, .pick = "first", .seed = 1, .split = Split::train};
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train, first); });
  EXPECT_THAT(msg, HasSubstr("data_batch_2.bin"));
  EXPECT_THAT(msg, HasSubstr("record 3 (byte offset 9219) has label 10"));
  // A truncated file is refused before anything is read, whatever the limit keeps.
  write_file(dir / "data_batch_5.bin", Bytes(100, 0));
  EXPECT_THAT(data_error_of([&] { read_cifar10(dir.path(), Split::train, first); }),
              HasSubstr("is not a multiple of the 3073-byte CIFAR-10 record"));
}

TEST(DataLimitedRead, IdxRawAndGzip) {
  TempDir dir;
  write_file(dir / "img", idx_images(60, 5, 7));
  write_file(dir / "lbl", idx_labels(60));
  write_gz(dir / "img.gz", idx_images(60, 5, 7));
  for (const char* images : {"img", "img.gz"}) {
    const SampleSet all = read_idx(dir / images, dir / "lbl");
    for (const Limit& limit : limits_to_try(Split::train)) {
      SCOPED_TRACE(std::string(images) + " " + std::to_string(limit.count) + " " + limit.pick);
      expect_same_as_limited(read_idx(dir / images, dir / "lbl", 10, limit), all, limit);
    }
  }
}

// Images of 64 KiB: the 1 MiB pieces of decompressed output end inside images.
TEST(DataLimitedRead, GzipImagesSpanningPieces) {
  TempDir dir;
  write_gz(dir / "img.gz", idx_images(60, 256, 256));
  write_file(dir / "lbl", idx_labels(60));
  const SampleSet all = read_idx(dir / "img.gz", dir / "lbl");
  for (const std::int64_t count : {1, 17, 59}) {
    const Limit limit{.count = count, .pick = "random", .seed = 3, .split = Split::test};
    expect_same_as_limited(read_idx(dir / "img.gz", dir / "lbl", 10, limit), all, limit);
  }
}

TEST(DataLimitedRead, IdxBadFilesStillRefused) {
  TempDir dir;
  const Limit limit{.count = 2, .pick = "first", .seed = 1, .split = Split::train};
  write_file(dir / "lbl", idx_labels(3));
  // Cut short, raw and gzipped: the size is checked although the kept images are all there.
  Bytes cut = idx_images(3, 4, 5);
  cut.resize(cut.size() - 7);
  write_file(dir / "img", cut);
  write_gz(dir / "img.gz", cut);
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "img", dir / "lbl", 10, limit); }),
              HasSubstr("but the file holds 69 bytes; it is truncated"));
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "img.gz", dir / "lbl", 10, limit); }),
              HasSubstr("holds 69 bytes (after gzip decompression); it is truncated"));
  // A gzip stream cut after the kept images: the stream's end is still checked.
  write_gz(dir / "whole.gz", idx_images(3, 4, 5));
  Bytes gz = test_util::read_file(dir / "whole.gz");
  gz.resize(gz.size() - 6);
  write_file(dir / "cut.gz", gz);
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "cut.gz", dir / "lbl", 10, limit); }),
              HasSubstr("truncated gzip stream"));
  // Swapped files, and images that do not match the labels' count.
  write_file(dir / "img4", idx_images(4, 4, 5));
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "lbl", dir / "img4", 10, limit); }),
              HasSubstr("bad IDX magic"));
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "img4", dir / "lbl", 10, limit); }),
              HasSubstr("holds 4 images but"));
  write_gz(dir / "img4.gz", idx_images(4, 4, 5));
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "img4.gz", dir / "lbl", 10, limit); }),
              HasSubstr("holds 4 images but"));
  // Empty (a failed download), raw and gzipped, and shorter than a header.
  write_file(dir / "empty", Bytes{});
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "empty", dir / "lbl", 10, limit); }),
              HasSubstr("the file is empty (0 bytes); expected an IDX image file"));
  // A header that claims 3 images of 65536 x 65536 (gzip of 64 bytes): refused by its size, not
  // by an allocation of its claim.
  Bytes huge;
  for (const std::uint32_t v : {0x803u, 3u, 65536u, 65536u}) test_util::put_be32(huge, v);
  huge.resize(64, 7);
  write_gz(dir / "huge.gz", huge);
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "huge.gz", dir / "lbl", 10, limit); }),
              HasSubstr("the header says 3 images of 65536x65536"));
  // Shorter than a header, gzipped.
  write_gz(dir / "short.gz", Bytes{0, 0, 8, 3, 0});
  EXPECT_THAT(data_error_of([&] { read_idx(dir / "short.gz", dir / "lbl", 10, limit); }),
              HasSubstr("is too short for the 16-byte IDX image header"));
}

// read_limited: the registry's readers as a run calls them (data.train_limit and limit_subset).
TEST(DataLimitedRead, ReadLimitedFollowsTheOptions) {
  TempDir dir;
  write_uneven_cifar10(dir.path());
  Options opt;
  opt.dataset = "cifar10";
  opt.root = dir.path().string();
  opt.train_limit = 13;
  opt.test_limit = 4;
  opt.limit_subset = "random";
  const LimitedSet train = read_limited(opt, Split::train, 42);
  expect_same_as_limited(train, read_cifar10(dir.path(), Split::train),
                         Limit::of(opt, Split::train, 42));
  EXPECT_EQ(train.samples.size(), 13);
  EXPECT_THAT(train.samples.origin(),
              HasSubstr("(13 of 60 samples, a random subset by train.seed 42)"));
  const LimitedSet test = read_limited(opt, Split::test, 42);
  EXPECT_EQ(test.samples.size(), 4);
  EXPECT_EQ(test.source_size, 9);
  opt.train_limit = -1;
  EXPECT_THROW(read_limited(opt, Split::train, 42), ConfigError);
}

}  // namespace
}  // namespace ddp::data
