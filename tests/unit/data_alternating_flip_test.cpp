// data.flip = "alternating": every sample's flip inverts from one epoch to the next, depends only
// on (seed, sample, epoch), and leaves the crop's draws as they are.
#include <gtest/gtest.h>

#include <vector>

#include "data_test_util.hpp"
#include "ddp/data/flip_schedule.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/data/transform_description.hpp"

namespace ddp::data {
namespace {

TEST(AlternatingFlip, InvertsEveryEpochAndDependsOnSeedSampleEpochOnly) {
  const std::int64_t n = 4000;
  std::int64_t flipped = 0, differ_by_seed = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool first = alternating_flip(7, 0, i);
    flipped += first;
    differ_by_seed += first != alternating_flip(8, 0, i);
    for (std::uint64_t e = 0; e < 6; ++e) {
      ASSERT_NE(alternating_flip(7, e, i), alternating_flip(7, e + 1, i)) << i << " " << e;
      ASSERT_EQ(alternating_flip(7, e, i), alternating_flip(7, e + 2, i)) << i << " " << e;
    }
  }
  // A fair coin per sample (4000 draws: 5 standard deviations is 0.04).
  EXPECT_NEAR(static_cast<double>(flipped) / n, 0.5, 0.04);
  EXPECT_NEAR(static_cast<double>(differ_by_seed) / n, 0.5, 0.04);
}

// The loader's images: the same sample in consecutive epochs is itself and its mirror; with a
// random crop the crop is the one data.flip = "none" cuts, mirrored or not.
TEST(AlternatingFlip, LoaderImagesAlternateAndKeepTheirCrops) {
  const SampleSet ds = test_util::pattern_dataset(64, 3, 8, 8);
  const Normalization norm{{0.5f}, {0.25f}};
  std::vector<std::int64_t> idx(64);
  for (std::int64_t i = 0; i < 64; ++i) idx[static_cast<std::size_t>(i)] = i;
  const auto images = [&](const std::string& flip, std::int64_t padding, std::uint64_t epoch) {
    Options o;
    o.augment = true;
    o.crop_padding = padding;
    o.flip = flip;
    std::vector<float> out(64 * 3 * 8 * 8);
    std::vector<std::int32_t> labels(64);
    fill_batch(ds, idx, norm, train_augmentation(o), 5, epoch, out.data(), labels.data());
    return out;
  };
  const auto mirrored = [](const std::vector<float>& img, std::int64_t sample) {
    std::vector<float> out(3 * 8 * 8);
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t y = 0; y < 8; ++y)
        for (std::int64_t x = 0; x < 8; ++x)
          out[static_cast<std::size_t>((c * 8 + y) * 8 + x)] =
              img[static_cast<std::size_t>(((sample * 3 + c) * 8 + y) * 8 + 7 - x)];
    return out;
  };
  const auto plain = [](const std::vector<float>& img, std::int64_t sample) {
    const auto* p = img.data() + sample * 3 * 8 * 8;
    return std::vector<float>(p, p + 3 * 8 * 8);
  };
  const auto e0 = images("alternating", 0, 0), e1 = images("alternating", 0, 1),
             e2 = images("alternating", 0, 2), none = images("none", 0, 0);
  EXPECT_EQ(e0, e2);
  for (std::int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(plain(e1, i), mirrored(e0, i)) << i;
    EXPECT_EQ(plain(e0, i), alternating_flip(5, 0, i) ? mirrored(none, i) : plain(none, i)) << i;
  }
  for (std::uint64_t epoch : {0u, 3u}) {
    const auto alt = images("alternating", 2, epoch), cropped = images("none", 2, epoch);
    for (std::int64_t i = 0; i < 64; ++i)
      EXPECT_EQ(plain(alt, i),
                alternating_flip(5, epoch, i) ? mirrored(cropped, i) : plain(cropped, i))
          << i;
  }
}

// The start-up line names the flip data.flip chose.
TEST(AlternatingFlip, StartUpLineSaysWhichFlip) {
  Options o;
  o.augment = true;
  const Normalization norm{{0.5f}, {0.25f}};
  o.flip = "alternating";
  EXPECT_EQ(describe_transforms(o, norm),
            "transforms: train RandomCrop(padding=4), AlternatingHorizontalFlip(), "
            "Normalize(mean=(0.5), std=(0.25)); eval Normalize(mean=(0.5), std=(0.25))\n");
  o.flip = "none";
  EXPECT_EQ(describe_transforms(o, norm),
            "transforms: train RandomCrop(padding=4), Normalize(mean=(0.5), std=(0.25)); eval "
            "Normalize(mean=(0.5), std=(0.25))\n");
}

}  // namespace
}  // namespace ddp::data
