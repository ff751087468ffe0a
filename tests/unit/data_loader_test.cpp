// The prefetching batch loader: same batches as a direct fill_batch, in order, with and without
// the worker thread, across epochs and restarts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "data_test_util.hpp"
#include "ddp/data/loader.hpp"

namespace ddp::data {
namespace {

using test_util::data_error_of;
using test_util::pattern_dataset;
using ::testing::HasSubstr;

const Normalization kNorm{{0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}};

Augmentation crop_flip() {
  Augmentation a;
  a.random_crop = true;
  a.crop_padding = 1;
  a.hflip = true;
  return a;
}

struct Expected {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

Expected expected(const SampleSet& ds, const RankBatch& rb, const Augmentation& aug,
                  std::uint64_t seed, std::uint64_t epoch) {
  Expected e;
  e.images.resize(rb.indices.size() * static_cast<std::size_t>(ds.image_bytes()));
  e.labels.resize(rb.indices.size());
  fill_batch(ds, rb.indices, kNorm, aug, seed, epoch, e.images.data(), e.labels.data());
  return e;
}

void expect_batch(const SampleSet& ds, const Batch& b, const RankBatch& rb, const Augmentation& aug,
                  std::uint64_t seed, std::uint64_t epoch) {
  ASSERT_EQ(b.size, static_cast<std::int64_t>(rb.indices.size()));
  EXPECT_EQ(b.global_size, rb.global_size);
  EXPECT_EQ(b.global_offset, rb.global_offset);
  const Expected e = expected(ds, rb, aug, seed, epoch);
  ASSERT_NE(b.images, nullptr);
  ASSERT_NE(b.labels, nullptr);
  EXPECT_TRUE(std::equal(e.images.begin(), e.images.end(), b.images));
  EXPECT_TRUE(std::equal(e.labels.begin(), e.labels.end(), b.labels));
}

SamplerOptions opts(std::int64_t n, std::int64_t g, int world = 1, int rank = 0) {
  SamplerOptions o;
  o.dataset_size = n;
  o.global_batch = g;
  o.world_size = world;
  o.rank = rank;
  o.seed = 31;
  return o;
}

class DataLoader : public ::testing::TestWithParam<bool> {};

TEST_P(DataLoader, YieldsTheSamplerBatchesInOrderOverEpochs) {
  const SampleSet ds = pattern_dataset(23, 3, 4, 4);
  const Augmentation aug = crop_flip();
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, aug, 31, 5, GetParam());
  EXPECT_FALSE(loader.next().has_value());  // nothing started yet
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    const auto batches = epoch_batches(opts(23, 5), epoch);
    loader.start(batches, epoch);
    for (const RankBatch& rb : batches) {
      const auto b = loader.next();
      ASSERT_TRUE(b.has_value());
      expect_batch(ds, *b, rb, aug, 31, epoch);
    }
    EXPECT_FALSE(loader.next().has_value());
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST_P(DataLoader, RestartBeforeTheEpochEnds) {
  const SampleSet ds = pattern_dataset(40, 3, 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, crop_flip(), 31, 4, GetParam());
  loader.start(epoch_batches(opts(40, 4), 0), 0);
  ASSERT_TRUE(loader.next().has_value());
  ASSERT_TRUE(loader.next().has_value());
  const auto batches = epoch_batches(opts(40, 4), 1);
  loader.start(batches, 1);
  for (const RankBatch& rb : batches) {
    const auto b = loader.next();
    ASSERT_TRUE(b.has_value());
    expect_batch(ds, *b, rb, crop_flip(), 31, 1);
  }
  EXPECT_FALSE(loader.next().has_value());
}

TEST_P(DataLoader, BatchStaysValidUntilTheNextCall) {
  const SampleSet ds = pattern_dataset(30, 3, 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, crop_flip(), 31, 3, GetParam());
  const auto batches = epoch_batches(opts(30, 3), 0);
  loader.start(batches, 0);
  const auto b0 = loader.next();
  ASSERT_TRUE(b0.has_value());
  // Give the worker time to fill whatever it can; the held batch must not change.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  expect_batch(ds, *b0, batches[0], crop_flip(), 31, 0);
  // Not even when a new epoch starts before the next next().
  loader.start(epoch_batches(opts(30, 3), 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  expect_batch(ds, *b0, batches[0], crop_flip(), 31, 0);
}

TEST_P(DataLoader, RankSlicesIncludingEmptyOnes) {
  // 8 samples, global batch 6 over 3 ranks: the last global batch gives rank 0 nothing.
  const SampleSet ds = pattern_dataset(8, 3, 4, 4);
  for (int r = 0; r < 3; ++r) {
    const InMemoryDataset held(ds);
    BatchLoader loader(held, kNorm, {}, 31, 2, GetParam());
    const auto batches = epoch_batches(opts(8, 6, 3, r), 2);
    loader.start(batches, 2);
    for (const RankBatch& rb : batches) {
      const auto b = loader.next();
      ASSERT_TRUE(b.has_value());
      expect_batch(ds, *b, rb, {}, 31, 2);
    }
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST_P(DataLoader, DatasetSmallerThanTheBatch) {
  const SampleSet ds = pattern_dataset(3, 3, 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, crop_flip(), 31, 16, GetParam());
  const auto batches = epoch_batches(opts(3, 16), 0);
  ASSERT_EQ(batches.size(), 1u);
  loader.start(batches, 0);
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->size, 3);
  expect_batch(ds, *b, batches[0], crop_flip(), 31, 0);
  EXPECT_FALSE(loader.next().has_value());
}

TEST_P(DataLoader, RejectsBadBatchesUpFront) {
  const SampleSet ds = pattern_dataset(10, 3, 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, {}, 31, 4, GetParam());
  EXPECT_THAT(data_error_of([&] { loader.start(epoch_batches(opts(10, 5), 0), 0); }),
              HasSubstr("has 5 samples, more than the max_batch of 4"));
  RankBatch bad;
  bad.indices = {1, 10};
  bad.global_size = 2;
  EXPECT_THAT(data_error_of([&] { loader.start({bad}, 0); }),
              HasSubstr("sample index 10, out of range"));
  // The loader is still usable afterwards.
  const auto batches = epoch_batches(opts(10, 4), 0);
  loader.start(batches, 0);
  const auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  expect_batch(ds, *b, batches[0], {}, 31, 0);
}

TEST_P(DataLoader, DestroyedMidEpoch) {
  const SampleSet ds = pattern_dataset(50, 3, 4, 4);
  for (int k = 0; k < 20; ++k) {
    const InMemoryDataset held(ds);
    BatchLoader loader(held, kNorm, crop_flip(), 31, 5, GetParam());
    loader.start(epoch_batches(opts(50, 5), 0), 0);
    if (k % 2) (void)loader.next();
  }  // joins without hanging
}

TEST_P(DataLoader, ManyShortEpochs) {
  // Rapid restarts and hand-overs: a workout for the synchronisation under ThreadSanitizer.
  const SampleSet ds = pattern_dataset(17, 3, 4, 4);
  const InMemoryDataset held(ds);
  BatchLoader loader(held, kNorm, crop_flip(), 31, 2, GetParam());
  for (std::uint64_t epoch = 0; epoch < 60; ++epoch) {
    const auto batches = epoch_batches(opts(17, 2), epoch);
    loader.start(batches, epoch);
    const std::size_t take = epoch % 3 == 0 ? batches.size() : epoch % batches.size();
    for (std::size_t i = 0; i < take; ++i) {
      const auto b = loader.next();
      ASSERT_TRUE(b.has_value());
      expect_batch(ds, *b, batches[i], crop_flip(), 31, epoch);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Prefetch, DataLoader, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Prefetch" : "Synchronous";
                         });

TEST(DataLoaderConstruction, RejectsBadSettings) {
  const SampleSet ds = pattern_dataset(4, 3, 2, 2);
  EXPECT_THROW(BatchLoader(InMemoryDataset(ds), kNorm, {}, 0, 0, true), ddp::ConfigError);
  EXPECT_THAT(data_error_of([&] {
                BatchLoader(InMemoryDataset(ds), {{0.5f, 0.5f}, {1}}, {}, 0, 4, true);
              }),
              HasSubstr("mean has 2 entries"));
}

}  // namespace
}  // namespace ddp::data
