// fill_batch with data.train_size: random-resized crops + flips whose draws depend only on
// (seed, epoch, sample index), so a batch split over ranks (or loader calls) gives the same bytes;
// the evaluation path equals torchvision's Resize + CenterCrop; encoded sets of varying sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/sample_set.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"
#include "torchvision_oracle.hpp"

namespace ddp::data {
namespace {

using test_util::pattern_dataset;
using test_util::read_file;
using test_util::run_oracle;
using test_util::TempDir;

Normalization unit_norm() {
  return Normalization{{0.0f}, {1.0f}};  // floats are p / 255
}

Augmentation train_aug(std::int64_t side) {
  Options o;
  o.train_size = side;
  o.augment = true;
  return train_augmentation(o);
}

std::vector<float> fill(const SampleSet& ds, const std::vector<std::int64_t>& idx,
                        const Augmentation& aug, std::uint64_t epoch) {
  std::vector<float> out(idx.size() * static_cast<std::size_t>(output_sample_floats(ds, aug)));
  std::vector<std::int32_t> labels(idx.size());
  fill_batch(ds, idx, unit_norm(), aug, 42, epoch, out.data(), labels.data());
  return out;
}

TEST(SizedTransform, DrawsDependOnlyOnSeedEpochAndIndex) {
  const SampleSet ds = pattern_dataset(6, 3, 50, 70, 10);
  const Augmentation aug = train_aug(24);
  ASSERT_EQ(output_sample_floats(ds, aug), 3 * 24 * 24);
  const std::vector<std::int64_t> all = {5, 0, 3, 1, 4, 2};
  const auto whole = fill(ds, all, aug, 1);
  // The same samples in two halves (two ranks, or two loader calls): the same bytes.
  auto halves = fill(ds, {5, 0, 3}, aug, 1);
  const auto second = fill(ds, {1, 4, 2}, aug, 1);
  halves.insert(halves.end(), second.begin(), second.end());
  EXPECT_TRUE(whole == halves);
  // Another epoch draws other crops.
  EXPECT_FALSE(whole == fill(ds, all, aug, 2));
}

TEST(SizedTransform, ConfigKeysAgreeOrNameTheConflict) {
  Options o;
  o.train_size = 32;
  EXPECT_EQ(transform_output_side(o), 32);
  EXPECT_EQ(eval_augmentation(o).eval_resize, 37);  // ceil(32 * 8 / 7)
  o.eval_crop = 28;
  try {
    transform_output_side(o);
    FAIL() << "eval_crop != train_size accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.eval_crop = 28 differs from data.train_size = 32"),
              std::string::npos)
        << e.what();
  }
  o.eval_crop = 32;
  o.eval_resize = 30;
  EXPECT_THROW(transform_output_side(o), ConfigError);
  Options off;
  off.eval_crop = 32;
  EXPECT_THROW(transform_output_side(off), ConfigError);
  // Without data.augment, training takes the evaluation transform.
  Options plain;
  plain.train_size = 32;
  EXPECT_FALSE(train_augmentation(plain).random_resized_crop);
  EXPECT_EQ(train_augmentation(plain).eval_resize, 37);
}

TEST(SizedTransform, EncodedSetOfVaryingSizesEvaluatesAsTorchvision) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  const std::vector<std::pair<int, int>> shapes = {{60, 90}, {143, 75}, {37, 37}, {300, 200}};
  std::string cmds;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto jpg = (dir / (std::to_string(k) + ".jpg")).string();
    cmds += "image " + std::to_string(k) + " " + std::to_string(shapes[k].first) + " " +
            std::to_string(shapes[k].second) + " 3 " + jpg + "\neval " + jpg + " 37 32 " +
            (dir / (std::to_string(k) + ".bin")).string() + "\n";
  }
  run_oracle(py, dir, cmds);
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> offsets{0};
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto b = read_file(dir / (std::to_string(k) + ".jpg"));
    bytes.insert(bytes.end(), b.begin(), b.end());
    offsets.push_back(bytes.size());
  }
  const SampleSet ds = SampleSet::encoded("test.h5", 3, 2, bytes, offsets, {0, 1, 1, 0});
  Options o;
  o.train_size = 32;
  const std::vector<std::int64_t> idx = {0, 1, 2, 3};
  const auto out = fill(ds, idx, eval_augmentation(o), 0);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto want = read_file(dir / (std::to_string(k) + ".bin"));
    ASSERT_EQ(want.size(), 3u * 32 * 32);
    std::size_t mismatches = 0;
    for (std::size_t p = 0; p < want.size(); ++p)
      if (out[k * want.size() + p] != static_cast<float>(want[p]) * (1.0f / 255.0f)) ++mismatches;
    EXPECT_EQ(mismatches, 0u) << "sample " << k;
  }
  // Training crops decode too (scaled or not), and are a function of (seed, epoch, index).
  Augmentation aug = train_aug(32);
  const auto a = fill(ds, idx, aug, 3);
  aug.scaled_decode = false;
  const auto b = fill(ds, idx, aug, 3);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == fill(ds, idx, train_aug(32), 3));
  // A varying-size set without train_size is refused, saying what to set.
  try {
    fill(ds, idx, Augmentation{}, 0);
    FAIL() << "an encoded set without data.train_size was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("set data.train_size"), std::string::npos) << e.what();
  }
}

TEST(SizedTransform, CorruptEncodedSampleIsNamed) {
  // Sample 1 claims to be a JPEG (FF D8 FF) but ends there: the error names the set and sample
  // (TurboJPEG reads its header as 0x0, refused as an implausible size).
  const std::vector<std::uint8_t> bytes = {0x89, 'P', 'N', 'G', 0xFF, 0xD8, 0xFF, 0xE0};
  const SampleSet ds = SampleSet::encoded("'bad.h5'", 3, 2, bytes, {0, 4, 8}, {0, 1});
  for (const Augmentation& aug : {train_aug(16), eval_augmentation([] {
                                    Options o;
                                    o.train_size = 16;
                                    return o;
                                  }())}) {
    try {
      fill(ds, {1}, aug, 0);
      FAIL() << "a corrupt JPEG decoded";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("'bad.h5': sample 1: "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ddp::data
