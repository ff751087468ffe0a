// Normalisation statistics, batch filling, and the deterministic crop / flip augmentation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "data_test_util.hpp"
#include "ddp/data/transform.hpp"

namespace ddp::data {
namespace {

using test_util::Bytes;
using test_util::data_error_of;
using test_util::pattern_dataset;
using ::testing::HasSubstr;

// Runs fill_batch and returns the images (labels into *labels if given).
std::vector<float> fill(const SampleSet& ds, const std::vector<std::int64_t>& idx,
                        const Normalization& norm, const Augmentation& aug, std::uint64_t seed,
                        std::uint64_t epoch, std::vector<std::int32_t>* labels = nullptr) {
  std::vector<float> out(idx.size() * static_cast<std::size_t>(ds.image_bytes()), -12345.0f);
  std::vector<std::int32_t> lab(idx.size(), -1);
  fill_batch(ds, idx, norm, aug, seed, epoch, out.data(), lab.data());
  if (labels) *labels = lab;
  return out;
}

double normalised(std::uint8_t p, double mean, double sd) {
  return (p / 255.0 - mean) / sd;
}

// The expected image for sample i under torchvision semantics: pad by P with black (0) pixels, crop
// at (P + dy, P + dx) of the padded image, then flip horizontally if asked.
std::vector<double> reference(const SampleSet& ds, std::int64_t i, const Normalization& n, int dy,
                              int dx, bool flip) {
  const std::int64_t C = ds.channels(), H = ds.height(), W = ds.width();
  std::vector<double> out;
  for (std::int64_t c = 0; c < C; ++c) {
    const double mean = n.mean[n.mean.size() == 1 ? 0 : c], sd = n.std[n.std.size() == 1 ? 0 : c];
    for (std::int64_t y = 0; y < H; ++y) {
      for (std::int64_t x = 0; x < W; ++x) {
        const std::int64_t cx = flip ? W - 1 - x : x;  // column of the crop
        const std::int64_t sy = y + dy, sx = cx + dx;
        const std::uint8_t p = (sy >= 0 && sy < H && sx >= 0 && sx < W)
                                   ? ds.image(i)[static_cast<std::size_t>((c * H + sy) * W + sx)]
                                   : std::uint8_t{0};
        out.push_back(normalised(p, mean, sd));
      }
    }
  }
  return out;
}

bool close(const float* got, const std::vector<double>& want) {
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (std::abs(got[k] - want[k]) > 1e-5 * (1 + std::abs(want[k]))) return false;
  }
  return true;
}

const Normalization kTransformNorm{{0.1f, 0.2f, 0.3f}, {0.5f, 0.25f, 2.0f}};

TEST(DataNormalization, HandCheckedStatistics) {
  // Channel 0: {0, 255, 0, 255} -> mean 0.5, std 0.5. Channel 1: {51, 51, 102, 102} -> 0.3, 0.1.
  const SampleSet ds("hand", 2, 1, 2, 2, Bytes{0, 255, 51, 51, 0, 255, 102, 102},
                     std::vector<Label>{0, 1});
  const Normalization n = compute_normalization(ds);
  ASSERT_EQ(n.mean.size(), 2u);
  ASSERT_EQ(n.std.size(), 2u);
  EXPECT_NEAR(n.mean[0], 0.5, 1e-7);
  EXPECT_NEAR(n.std[0], 0.5, 1e-7);
  EXPECT_NEAR(n.mean[1], 0.3, 1e-7);
  EXPECT_NEAR(n.std[1], 0.1, 1e-7);
}

TEST(DataNormalization, EmptyDatasetIsAnError) {
  const SampleSet ds("nothing", 1, 2, 2, 10, Bytes{}, std::vector<Label>{});
  EXPECT_THAT(data_error_of([&] { compute_normalization(ds); }), HasSubstr("no samples"));
}

TEST(DataFillBatch, NormalisesPerChannelInIndexOrder) {
  const SampleSet ds = pattern_dataset(4, 3, 2, 3);
  std::vector<std::int32_t> labels;
  const std::vector<std::int64_t> idx{3, 0, 3};
  const auto out = fill(ds, idx, kTransformNorm, {}, 1, 2, &labels);
  EXPECT_EQ(labels, (std::vector<std::int32_t>{3, 0, 3}));
  for (std::size_t b = 0; b < idx.size(); ++b) {
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t p = 0; p < 6; ++p) {
        const double want = normalised(ds.image(idx[b])[static_cast<std::size_t>(c * 6 + p)],
                                       kTransformNorm.mean[c], kTransformNorm.std[c]);
        EXPECT_NEAR(out[b * 18 + c * 6 + p], want, 1e-5) << "b=" << b << " c=" << c;
      }
    }
  }
}

TEST(DataFillBatch, SingleMeanAndStdApplyToAllChannels) {
  const SampleSet ds = pattern_dataset(2, 3, 2, 2);
  const Normalization one{{0.25f}, {0.5f}};
  const auto out = fill(ds, {1}, one, {}, 0, 0);
  for (std::size_t k = 0; k < 12; ++k) {
    EXPECT_NEAR(out[k], normalised(ds.image(1)[k], 0.25, 0.5), 1e-5);
  }
}

TEST(DataFillBatch, RejectsBadSettingsAndIndices) {
  const SampleSet ds = pattern_dataset(4, 3, 2, 2);
  float out[12 * 4];
  std::int32_t lab[4];
  const std::vector<std::int64_t> one{0};
  EXPECT_THAT(data_error_of([&] {
                fill_batch(ds, one, {{0.1f, 0.2f}, {1}}, {}, 0, 0, out, lab);
              }),
              HasSubstr("mean has 2 entries, but pattern dataset has 3 channel(s)"));
  EXPECT_THAT(data_error_of([&] {
                fill_batch(ds, one, {{0.1f}, {1, 0, 1}}, {}, 0, 0, out, lab);
              }),
              HasSubstr("std[1] = 0.000000 must be a positive finite number"));
  EXPECT_THAT(data_error_of([&] {
                fill_batch(ds, one, {{}, {1}}, {}, 0, 0, out, lab);
              }),
              HasSubstr("mean has 0 entries"));
  Augmentation neg;
  neg.random_crop = true;
  neg.crop_padding = -1;
  EXPECT_THAT(data_error_of([&] { fill_batch(ds, one, kTransformNorm, neg, 0, 0, out, lab); }),
              HasSubstr("crop_padding = -1 must be >= 0"));
  const std::vector<std::int64_t> bad{1, 4};
  EXPECT_THAT(data_error_of([&] { fill_batch(ds, bad, kTransformNorm, {}, 0, 0, out, lab); }),
              HasSubstr("sample index 4 is out of range for pattern dataset (4 samples)"));
}

Augmentation crop_flip(int padding) {
  Augmentation a;
  a.random_crop = true;
  a.crop_padding = padding;
  a.hflip = true;
  return a;
}

TEST(DataAugment, DependsOnlyOnSeedEpochAndIndex) {
  const SampleSet ds = pattern_dataset(12, 3, 8, 8);
  const Augmentation aug = crop_flip(4);
  const std::size_t img = 3 * 64;
  const auto alone = fill(ds, {5}, kTransformNorm, aug, 42, 3);
  const auto mixed = fill(ds, {1, 5, 9}, kTransformNorm, aug, 42, 3);
  const auto other = fill(ds, {5, 2, 0, 11}, kTransformNorm, aug, 42, 3);
  EXPECT_EQ(std::memcmp(alone.data(), mixed.data() + img, img * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(alone.data(), other.data(), img * sizeof(float)), 0);
  EXPECT_EQ(alone, fill(ds, {5}, kTransformNorm, aug, 42, 3));  // and repeatable
}

TEST(DataAugment, DiffersAcrossEpochsAndSeeds) {
  const SampleSet ds = pattern_dataset(40, 3, 8, 8);
  std::vector<std::int64_t> all(40);
  for (std::int64_t i = 0; i < 40; ++i) all[static_cast<std::size_t>(i)] = i;
  const Augmentation aug = crop_flip(4);
  const auto e0 = fill(ds, all, kTransformNorm, aug, 7, 0);
  const auto e1 = fill(ds, all, kTransformNorm, aug, 7, 1);
  const auto s8 = fill(ds, all, kTransformNorm, aug, 8, 0);
  int epoch_diff = 0, seed_diff = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    epoch_diff +=
        !std::equal(e0.begin() + i * 192, e0.begin() + (i + 1) * 192, e1.begin() + i * 192);
    seed_diff +=
        !std::equal(e0.begin() + i * 192, e0.begin() + (i + 1) * 192, s8.begin() + i * 192);
  }
  // 162 equally likely (crop, flip) outcomes: nearly every sample changes.
  EXPECT_GE(epoch_diff, 30);
  EXPECT_GE(seed_diff, 30);
}

TEST(DataAugment, NoAugmentationIsTheIdentity) {
  const SampleSet ds = pattern_dataset(3, 3, 4, 4);
  const auto a = fill(ds, {0, 1, 2}, kTransformNorm, {}, 1, 1);
  const auto b = fill(ds, {0, 1, 2}, kTransformNorm, {}, 99, 5);
  EXPECT_EQ(a, b);
  for (std::int64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(close(a.data() + i * 48, reference(ds, i, kTransformNorm, 0, 0, false))) << i;
  }
}

// Every output is some torchvision crop (offset in [0, 2P] of the padded image) optionally
// flipped, and over many samples every offset and both flips occur.
TEST(DataAugment, CropAndFlipFollowTorchvisionSemantics) {
  constexpr int P = 2;
  constexpr std::int64_t N = 600;
  const SampleSet ds = pattern_dataset(N, 3, 6, 6);
  std::vector<std::int64_t> all(N);
  for (std::int64_t i = 0; i < N; ++i) all[static_cast<std::size_t>(i)] = i;
  const auto out = fill(ds, all, kTransformNorm, crop_flip(P), 5, 2);
  std::set<int> seen_dy, seen_dx;
  int flips = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    int matches = 0;
    for (int dy = -P; dy <= P; ++dy)
      for (int dx = -P; dx <= P; ++dx)
        for (bool flip : {false, true})
          if (close(out.data() + i * 108, reference(ds, i, kTransformNorm, dy, dx, flip))) {
            ++matches;
            seen_dy.insert(dy);
            seen_dx.insert(dx);
            flips += flip;
          }
    ASSERT_EQ(matches, 1) << "sample " << i << " is not exactly one padded crop (+flip)";
  }
  EXPECT_EQ(seen_dy.size(), 2u * P + 1);
  EXPECT_EQ(seen_dx.size(), 2u * P + 1);
  EXPECT_GT(flips, N * 4 / 10);
  EXPECT_LT(flips, N * 6 / 10);
}

TEST(DataAugment, PaddingIsBlackBeforeNormalisation) {
  // A padding far larger than the 3x3 image: most crops are all padding, whose value must be
  // (0 - mean) / std, the normalised black pixel.
  const SampleSet ds("grey", 1, 3, 3, 2, Bytes(9 * 20, 200), std::vector<Label>(20, 1));
  const Normalization n{{0.4f}, {0.2f}};
  Augmentation aug;
  aug.random_crop = true;
  aug.crop_padding = 30;
  std::vector<std::int64_t> all(20);
  for (std::int64_t i = 0; i < 20; ++i) all[static_cast<std::size_t>(i)] = i;
  const auto out = fill(ds, all, n, aug, 3, 0);
  const float pad = static_cast<float>(-0.4 / 0.2);
  const float grey = static_cast<float>(normalised(200, 0.4, 0.2));
  int pads = 0;
  for (float v : out) {
    ASSERT_TRUE(std::abs(v - pad) < 1e-5f || std::abs(v - grey) < 1e-5f) << v;
    pads += std::abs(v - pad) < 1e-5f;
  }
  EXPECT_GT(pads, 150);
}

TEST(DataAugment, FlipAloneMirrorsAboutHalfTheSamples) {
  constexpr std::int64_t N = 1000;
  const SampleSet ds = pattern_dataset(N, 1, 2, 5);
  std::vector<std::int64_t> all(N);
  for (std::int64_t i = 0; i < N; ++i) all[static_cast<std::size_t>(i)] = i;
  Augmentation aug;
  aug.hflip = true;
  const Normalization n{{0.5f}, {0.25f}};
  const auto out = fill(ds, all, n, aug, 11, 4);
  int flipped = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const bool same = close(out.data() + i * 10, reference(ds, i, n, 0, 0, false));
    const bool mirrored = close(out.data() + i * 10, reference(ds, i, n, 0, 0, true));
    ASSERT_NE(same, mirrored) << "sample " << i;
    flipped += mirrored;
  }
  EXPECT_GT(flipped, 440);
  EXPECT_LT(flipped, 560);
}

TEST(DataAugment, CropAloneNeverFlips) {
  constexpr std::int64_t N = 200;
  const SampleSet ds = pattern_dataset(N, 1, 5, 5);
  std::vector<std::int64_t> all(N);
  for (std::int64_t i = 0; i < N; ++i) all[static_cast<std::size_t>(i)] = i;
  Augmentation aug;
  aug.random_crop = true;
  aug.crop_padding = 1;
  const Normalization n{{0.5f}, {0.25f}};
  const auto out = fill(ds, all, n, aug, 1, 1);
  for (std::int64_t i = 0; i < N; ++i) {
    bool found = false;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
        found = found || close(out.data() + i * 25, reference(ds, i, n, dy, dx, false));
    EXPECT_TRUE(found) << "sample " << i;
  }
}

}  // namespace
}  // namespace ddp::data
