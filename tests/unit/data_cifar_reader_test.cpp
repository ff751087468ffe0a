// CIFAR-10 / CIFAR-100 binary readers: decoding, file order, and every malformed-input error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.hpp"
#include "ddp/data/readers.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;
using test_util::Bytes;
using test_util::cifar100_records;
using test_util::cifar10_records;
using test_util::data_error_of;
using test_util::pattern;
using test_util::TempDir;
using test_util::write_file;
using ::testing::HasSubstr;

// Batch files with 2, 3, 1, 2, 4 records (12 in all) and a 3-record test file; sample i carries
// pattern(i, ...) and label i % 10, so order and placement are both checkable.
void write_cifar10(const fs::path& dir) {
  const std::int64_t counts[] = {2, 3, 1, 2, 4};
  std::int64_t first = 0;
  for (int b = 0; b < 5; ++b) {
    write_file(dir / ("data_batch_" + std::to_string(b + 1) + ".bin"),
               cifar10_records(first, counts[b]));
    first += counts[b];
  }
  write_file(dir / "test_batch.bin", cifar10_records(100, 3));
}

void expect_pattern_image(const SampleSet& ds, std::int64_t i, std::int64_t sample) {
  const auto img = ds.image(i);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        ASSERT_EQ(img[static_cast<std::size_t>(c * 1024 + y * 32 + x)], pattern(sample, c, y, x))
            << "image " << i << " c=" << c << " y=" << y << " x=" << x;
}

TEST(DataCifar10Reader, DecodesAndConcatenatesBatchesInOrder) {
  TempDir dir;
  write_cifar10(dir.path());
  const SampleSet train = read_cifar10(dir.path(), Split::train);
  ASSERT_EQ(train.size(), 12);
  EXPECT_EQ(train.channels(), 3);
  EXPECT_EQ(train.height(), 32);
  EXPECT_EQ(train.width(), 32);
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(train.pixels().size(), 12u * 3072u);
  for (std::int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(train.label(i), i % 10);
    expect_pattern_image(train, i, i);
  }
  const SampleSet test = read_cifar10(dir.path(), Split::test);
  ASSERT_EQ(test.size(), 3);
  for (std::int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(test.label(i), (100 + i) % 10);
    expect_pattern_image(test, i, 100 + i);
  }
}

TEST(DataCifar10Reader, RedGreenBluePlanesBecomeChannels012) {
  TempDir dir;
  Bytes rec{7};
  for (int v : {10, 20, 30}) rec.insert(rec.end(), 1024, static_cast<std::uint8_t>(v));
  write_file(dir / "test_batch.bin", rec);
  const SampleSet ds = read_cifar10(dir.path(), Split::test);
  ASSERT_EQ(ds.size(), 1);
  EXPECT_EQ(ds.label(0), 7);
  EXPECT_EQ(ds.image(0)[0], 10);
  EXPECT_EQ(ds.image(0)[1023], 10);
  EXPECT_EQ(ds.image(0)[1024], 20);
  EXPECT_EQ(ds.image(0)[2048], 30);
  EXPECT_EQ(ds.image(0)[3071], 30);
}

TEST(DataCifar10Reader, MissingDirectory) {
  TempDir dir;
  const fs::path root = dir / "nope";
  const std::string msg = data_error_of([&] { read_cifar10(root, Split::train); });
  EXPECT_THAT(msg, HasSubstr(root.string()));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
  EXPECT_THAT(msg, HasSubstr("data_batch_1.bin"));
}

TEST(DataCifar10Reader, RootIsAFile) {
  TempDir dir;
  write_file(dir / "file", {1, 2, 3});
  const std::string msg = data_error_of([&] { read_cifar10(dir / "file", Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "file").string()));
  EXPECT_THAT(msg, HasSubstr("is not a directory"));
}

TEST(DataCifar10Reader, MissingBatchFileListsExpectedFiles) {
  TempDir dir;
  write_cifar10(dir.path());
  fs::remove(dir / "data_batch_3.bin");
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "data_batch_3.bin").string()));
  EXPECT_THAT(msg, HasSubstr("no such file"));
  EXPECT_THAT(msg, HasSubstr("data_batch_1.bin ... data_batch_5.bin and test_batch.bin"));
}

TEST(DataCifar10Reader, ParentDirectoryHint) {
  TempDir dir;
  fs::create_directory(dir / "cifar-10-batches-bin");
  write_cifar10(dir / "cifar-10-batches-bin");
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("set the data root to that directory"));
}

TEST(DataCifar10Reader, PythonVersionHint) {
  TempDir dir;
  write_file(dir / "test_batch", {1, 2, 3});
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::test); });
  EXPECT_THAT(msg, HasSubstr("Python (pickle) version"));
}

TEST(DataCifar10Reader, EmptyFile) {
  TempDir dir;
  write_cifar10(dir.path());
  write_file(dir / "data_batch_2.bin", {});
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "data_batch_2.bin").string()));
  EXPECT_THAT(msg, HasSubstr("is empty (0 bytes)"));
}

TEST(DataCifar10Reader, TruncatedFile) {
  TempDir dir;
  write_cifar10(dir.path());
  Bytes b = cifar10_records(0, 2);
  b.pop_back();
  write_file(dir / "data_batch_5.bin", b);
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "data_batch_5.bin").string()));
  EXPECT_THAT(msg, HasSubstr("6145 bytes is not a multiple of the 3073-byte CIFAR-10 record"));
  EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST(DataCifar10Reader, Cifar100FileInCifar10Directory) {
  TempDir dir;
  write_file(dir / "test_batch.bin", cifar100_records(0, 2));
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::test); });
  EXPECT_THAT(msg, HasSubstr("is this a CIFAR-100 file?"));
}

TEST(DataCifar10Reader, LabelOutOfRangeNamesRecordAndValue) {
  TempDir dir;
  write_cifar10(dir.path());
  Bytes b = cifar10_records(0, 3);
  b[2 * 3073] = 10;  // record 2's label
  write_file(dir / "data_batch_4.bin", b);
  const std::string msg = data_error_of([&] { read_cifar10(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "data_batch_4.bin").string()));
  EXPECT_THAT(msg, HasSubstr("record 2 (byte offset 6146) has label 10"));
  EXPECT_THAT(msg, HasSubstr("0..9"));
}

TEST(DataCifar10Reader, ReadsMoreThanOneChunk) {
  // 4096 records per read chunk: 5000 records exercise a chunk boundary and record offsets in it.
  TempDir dir;
  write_file(dir / "test_batch.bin", cifar10_records(0, 5000));
  const SampleSet ds = read_cifar10(dir.path(), Split::test);
  ASSERT_EQ(ds.size(), 5000);
  for (std::int64_t i : {0, 4095, 4096, 4999}) {
    EXPECT_EQ(ds.label(i), i % 10);
    expect_pattern_image(ds, i, i);
  }
}

TEST(DataCifar100Reader, UsesFineLabels) {
  TempDir dir;
  write_file(dir / "train.bin", cifar100_records(0, 5));
  write_file(dir / "test.bin", cifar100_records(50, 2));
  const SampleSet train = read_cifar100(dir.path(), Split::train);
  ASSERT_EQ(train.size(), 5);
  EXPECT_EQ(train.num_classes(), 100);
  for (std::int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(train.label(i), (i * 7) % 100);
    expect_pattern_image(train, i, i);
  }
  const SampleSet test = read_cifar100(dir.path(), Split::test);
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(test.label(1), (51 * 7) % 100);
  expect_pattern_image(test, 1, 51);
}

TEST(DataCifar100Reader, MissingFile) {
  TempDir dir;
  write_file(dir / "train.bin", cifar100_records(0, 1));
  const std::string msg = data_error_of([&] { read_cifar100(dir.path(), Split::test); });
  EXPECT_THAT(msg, HasSubstr((dir / "test.bin").string()));
  EXPECT_THAT(msg, HasSubstr("train.bin and test.bin"));
}

TEST(DataCifar100Reader, WrongRecordSize) {
  TempDir dir;
  write_file(dir / "train.bin", cifar10_records(0, 2));  // 6146 bytes
  const std::string msg = data_error_of([&] { read_cifar100(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("6146 bytes is not a multiple of the 3074-byte CIFAR-100 record"));
  EXPECT_THAT(msg, HasSubstr("is this a CIFAR-10 file?"));
}

TEST(DataCifar100Reader, FineLabelOutOfRange) {
  TempDir dir;
  Bytes b = cifar100_records(0, 2);
  b[3074 + 1] = 100;
  write_file(dir / "train.bin", b);
  const std::string msg = data_error_of([&] { read_cifar100(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr((dir / "train.bin").string()));
  EXPECT_THAT(msg, HasSubstr("record 1 (byte offset 3074) has label 100"));
  EXPECT_THAT(msg, HasSubstr("0..99"));
}

TEST(DataCifar100Reader, CoarseLabelOutOfRange) {
  TempDir dir;
  Bytes b = cifar100_records(0, 2);
  b[0] = 20;
  write_file(dir / "train.bin", b);
  const std::string msg = data_error_of([&] { read_cifar100(dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("record 0 (byte offset 0) has coarse label 20"));
  EXPECT_THAT(msg, HasSubstr("0..19"));
}

TEST(DataReadDataset, DispatchesOnName) {
  TempDir dir;
  write_cifar10(dir.path());
  EXPECT_EQ(read_dataset("cifar10", dir.path(), Split::train).size(), 12);
  write_file(dir / "test.bin", cifar100_records(0, 4));
  EXPECT_EQ(read_dataset("cifar100", dir.path(), Split::test).num_classes(), 100);
}

TEST(DataReadDataset, UnknownNameListsValidNames) {
  TempDir dir;
  const std::string msg =
      data_error_of([&] { read_dataset("imagenet", dir.path(), Split::train); });
  EXPECT_THAT(msg, HasSubstr("unknown dataset 'imagenet'"));
  EXPECT_THAT(msg, HasSubstr("cifar10, cifar100, mnist, fashion_mnist"));
  EXPECT_THAT(data_error_of([&] { read_dataset("CIFAR-10", dir.path(), Split::train); }),
              HasSubstr("did you mean 'cifar10'?"));
  EXPECT_THAT(data_error_of([&] { read_dataset("fashion-mnist", dir.path(), Split::train); }),
              HasSubstr("did you mean 'fashion_mnist'?"));
}

}  // namespace
}  // namespace ddp::data
