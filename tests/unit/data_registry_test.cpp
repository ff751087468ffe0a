// The dataset registry: the names config offers, the shape each entry declares equals what its
// reader reads from real files, and packed shapes come from the file's header.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "data_test_util.hpp"
#include "ddp/data/packed_writer.hpp"
#include "ddp/data/registry.hpp"
#include "ddp/error.hpp"

namespace ddp::data {
namespace {

using test_util::TempDir;
using test_util::write_file;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void expect_shape(const DatasetInfo& info, const SampleSet& ds) {
  EXPECT_EQ(ds.num_classes(), info.shape.classes) << info.name;
  EXPECT_EQ(ds.channels(), info.shape.channels) << info.name;
  EXPECT_EQ(ds.height(), info.shape.height) << info.name;
  EXPECT_EQ(ds.width(), info.shape.width) << info.name;
}

TEST(DataRegistry, NamesBuiltinsFirst) {
  EXPECT_THAT(dataset_names(),
              ElementsAre("cifar10", "cifar100", "mnist", "fashion_mnist", "packed"));
  EXPECT_THAT(builtin_dataset_names(),
              ElementsAre("cifar10", "cifar100", "mnist", "fashion_mnist"));
  EXPECT_EQ(find_dataset("mnist").name, "mnist");
  EXPECT_THAT(test_util::data_error_of([] { find_dataset("Fashion-MNIST"); }),
              HasSubstr("did you mean 'fashion_mnist'?"));
}

// Each built-in's declared shape (what config builds the model for before reading a byte) is the
// shape its reader returns.
TEST(DataRegistry, DeclaredShapesAreWhatTheReadersRead) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b)
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin"),
               test_util::cifar10_records(0, 2));
  write_file(dir / "test.bin", test_util::cifar100_records(0, 3));
  write_file(dir / "t10k-images-idx3-ubyte", test_util::idx_images(4, 28, 28));
  write_file(dir / "t10k-labels-idx1-ubyte", test_util::idx_labels(4));
  for (const std::string_view name : builtin_dataset_names()) {
    Options opt;
    opt.dataset = std::string(name);
    opt.root = dir.path().string();
    const Split split = name == "cifar10" ? Split::train : Split::test;
    const SampleSet ds = find_dataset(name).read(opt, split);
    expect_shape(find_dataset(name), ds);
    EXPECT_EQ(dataset_shape(opt).classes, find_dataset(name).shape.classes);
  }
}

TEST(DataRegistry, PackedShapeComesFromTheTrainingFile) {
  TempDir dir;
  packed::Header h;
  h.encoding = packed::Encoding::raw;
  h.channels = 3;
  h.height = 6;
  h.width = 9;
  h.source = "test";
  h.classes = {"a", "b", "c", "d", "e", "f", "g"};
  PackedWriter w(dir / "train.h5", h);
  const std::vector<std::uint8_t> image(3 * 6 * 9, 7);
  for (int i = 0; i < 3; ++i) w.add(image, i, 6, 9);
  w.commit();
  Options opt;
  opt.dataset = "packed";
  EXPECT_THROW(dataset_shape(opt), ConfigError);  // no files named
  opt.train_file = (dir / "train.h5").string();
  opt.test_file = opt.train_file;
  const DatasetShape s = dataset_shape(opt);
  EXPECT_EQ(s.classes, 7);
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.height, 6);
  EXPECT_EQ(s.width, 9);
  const SampleSet ds = find_dataset("packed").read(opt, Split::train);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.num_classes(), 7);
}

}  // namespace
}  // namespace ddp::data
