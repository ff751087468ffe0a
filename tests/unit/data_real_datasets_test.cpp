// The readers on the real datasets: Debian's Fashion-MNIST and the shared CIFAR-10 copy. Each test
// skips, saying why, where its files are absent.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "ddp/data/readers.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data {
namespace {

namespace fs = std::filesystem;

std::vector<int> class_counts(const SampleSet& ds) {
  std::vector<int> counts(static_cast<std::size_t>(ds.num_classes()), 0);
  for (const Label l : ds.labels()) ++counts[static_cast<std::size_t>(l)];
  return counts;
}

TEST(DataRealDatasets, FashionMnist) {
  const fs::path root = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(root / "train-images-idx3-ubyte.gz") ||
      !fs::exists(root / "t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not found in " << root
                 << " (apt-get install dataset-fashion-mnist)";
  }
  const SampleSet train = read_dataset("fashion_mnist", root, Split::train);
  const SampleSet test = read_dataset("fashion_mnist", root, Split::test);
  ASSERT_EQ(train.size(), 60000);
  ASSERT_EQ(test.size(), 10000);
  for (const SampleSet* ds : {&train, &test}) {
    EXPECT_EQ(ds->channels(), 1);
    EXPECT_EQ(ds->height(), 28);
    EXPECT_EQ(ds->width(), 28);
    EXPECT_EQ(ds->num_classes(), 10);
  }
  // The dataset is balanced: 6000 / 1000 images per class.
  const auto tc = class_counts(train), ec = class_counts(test);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(tc[c], 6000) << "class " << c;
    EXPECT_EQ(ec[c], 1000) << "class " << c;
  }
  EXPECT_EQ(train.label(0), 9);  // the first training image is an ankle boot
  // The commonly quoted statistics of the training set.
  const Normalization n = compute_normalization(train);
  EXPECT_NEAR(n.mean[0], 0.2860, 1e-3);
  EXPECT_NEAR(n.std[0], 0.3530, 1e-3);
}

TEST(DataRealDatasets, Cifar10) {
  const fs::path root = fs::path(DDP_SHARED_DATA_DIR) / "cifar-10-batches-bin";
  if (!fs::exists(root / "data_batch_1.bin")) {
    GTEST_SKIP() << "CIFAR-10 binary not found in " << root;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const SampleSet train = read_dataset("cifar10", root, Split::train);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ info     ] read CIFAR-10 train ("
            << static_cast<double>(train.pixels().size()) / 1e6 << " MB) in " << seconds * 1e3
            << " ms\n";
  const SampleSet test = read_dataset("cifar10", root, Split::test);
  ASSERT_EQ(train.size(), 50000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.channels(), 3);
  EXPECT_EQ(train.height(), 32);
  EXPECT_EQ(train.width(), 32);
  const auto tc = class_counts(train), ec = class_counts(test);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(tc[c], 5000) << "class " << c;
    EXPECT_EQ(ec[c], 1000) << "class " << c;
  }
  EXPECT_EQ(train.label(0), 6);  // frog
  EXPECT_EQ(test.label(0), 3);   // cat
  // The well-known per-channel statistics of the training set (population std).
  const Normalization n = compute_normalization(train);
  const double mean[] = {0.4914, 0.4822, 0.4465}, sd[] = {0.2470, 0.2435, 0.2616};
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(n.mean[c], mean[c], 1e-3) << "channel " << c;
    EXPECT_NEAR(n.std[c], sd[c], 1e-3) << "channel " << c;
  }
}

}  // namespace
}  // namespace ddp::data
