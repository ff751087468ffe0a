// RandomResizedCrop / Resize + CenterCrop against torchvision 0.14 on PIL images (the oracle is
// tests/unit/torchvision_transforms.py, run with a python3 that has torchvision; skipped, saying
// so, without one), and TurboJPEG's scaled decoding against the full decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.hpp"
#include "ddp/data/crop_decode.hpp"
#include "ddp/data/image_decode.hpp"
#include "ddp/data/resized_crop.hpp"
#include "torchvision_oracle.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ddp/rng.hpp"
#pragma GCC diagnostic pop

namespace ddp::data {
namespace {

using test_util::read_file;
using test_util::run_oracle;
using test_util::TempDir;
using test_util::text_of;

Image decode_file(const std::filesystem::path& p) {
  const auto bytes = read_file(p);
  return decode_image(bytes, p.string(), 0);
}

std::string box_text(const CropBox& b) {
  return std::to_string(b.top) + " " + std::to_string(b.left) + " " + std::to_string(b.height) +
         " " + std::to_string(b.width);
}

TEST(ResizedCrop, FallbackEqualsTorchvision) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  // Scales above 1 never fit, so every try fails and the centre-crop fallback decides: too tall
  // (ratio clamped to 3/4), too wide (clamped to 4/3), in range (the whole image), odd margins.
  const std::vector<std::pair<int, int>> shapes = {{100, 10}, {10, 100}, {50, 60}, {7, 7},
                                                   {301, 17}, {17, 300}, {33, 45}, {45, 33}};
  std::string cmds;
  for (std::size_t k = 0; k < shapes.size(); ++k)
    cmds += "fallback " + std::to_string(shapes[k].first) + " " + std::to_string(shapes[k].second) +
            " 1.5 2.0 " + (dir / std::to_string(k)).string() + "\n";
  run_oracle(py, dir, cmds);
  CounterRng rng(7);
  const ResizedCropRange range{1.5, 2.0};
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const CropBox b = random_resized_crop_box(shapes[k].first, shapes[k].second, range,
                                              [&] { return rng.next_double(); });
    EXPECT_EQ(box_text(b), text_of(dir / std::to_string(k)))
        << shapes[k].first << "x" << shapes[k].second;
  }
}

TEST(ResizedCrop, SampledBoxesFollowTorchvisionsDistribution) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  constexpr int kDraws = 20000;
  run_oracle(py, dir, "stats 120 200 " + std::to_string(kDraws) + " " + (dir / "s").string());
  double torch_frac = 0, torch_logr = 0;
  std::istringstream(text_of(dir / "s")) >> torch_frac >> torch_logr;
  CounterRng rng(11);
  double frac = 0, logr = 0;
  for (int i = 0; i < kDraws; ++i) {
    const CropBox b = random_resized_crop_box(120, 200, {}, [&] { return rng.next_double(); });
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 120);
    ASSERT_LE(b.left + b.width, 200);
    ASSERT_GE(b.height, 1);
    ASSERT_GE(b.width, 1);
    frac += static_cast<double>(b.height * b.width) / (120.0 * 200.0);
    logr += std::log(static_cast<double>(b.width) / static_cast<double>(b.height));
  }
  // Means of 20000 draws: standard errors are about 0.002 (fraction) and 0.001 (log ratio).
  EXPECT_NEAR(frac / kDraws, torch_frac, 0.01);
  EXPECT_NEAR(logr / kDraws, torch_logr, 0.006);
}

TEST(ResizedCrop, ResizedCropEqualsTorchvisionForAGivenBox) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  const auto rgb = (dir / "rgb.png").string(), grey = (dir / "grey.png").string();
  struct Case {
    std::string file;
    CropBox box;
    int oh, ow;
  };
  const std::vector<Case> cases = {
      {rgb, {0, 0, 97, 131}, 32, 32},    {rgb, {10, 20, 40, 60}, 32, 32},
      {rgb, {5, 7, 13, 11}, 32, 32},     {rgb, {50, 3, 47, 128}, 24, 40},
      {rgb, {1, 1, 96, 130}, 97, 131},   {grey, {3, 9, 60, 33}, 16, 16},
      {grey, {0, 0, 97, 131}, 224, 224}, {rgb, {20, 30, 32, 32}, 32, 32},
  };
  std::string cmds = "image 1 97 131 3 " + rgb + "\nimage 2 97 131 1 " + grey + "\n";
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    cmds += "resized_crop " + c.file + " " + box_text(c.box) + " " + std::to_string(c.oh) + " " +
            std::to_string(c.ow) + " " + (dir / (std::to_string(k) + ".bin")).string() + "\n";
  }
  run_oracle(py, dir, cmds);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const Image out = resized_crop(decode_file(c.file), c.box, c.oh, c.ow);
    EXPECT_EQ(out.height, c.oh);
    EXPECT_EQ(out.width, c.ow);
    EXPECT_TRUE(out.pixels == read_file(dir / (std::to_string(k) + ".bin")))
        << "case " << k << ": " << box_text(c.box);
  }
}

TEST(ResizedCrop, ResizeCenterCropEqualsTorchvision) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  // Shapes giving odd and even margins (Python's round halves to even) and both orientations.
  const std::vector<std::pair<int, int>> shapes = {{97, 131}, {131, 97}, {40, 40},
                                                   {75, 301}, {64, 57},  {33, 34}};
  const std::vector<std::pair<int, int>> sizes = {{36, 32}, {32, 32}, {37, 32}, {40, 29}};
  std::string cmds;
  for (std::size_t s = 0; s < shapes.size(); ++s)
    cmds += "image " + std::to_string(s) + " " + std::to_string(shapes[s].first) + " " +
            std::to_string(shapes[s].second) + " 3 " +
            (dir / (std::to_string(s) + ".png")).string() + "\n";
  for (std::size_t s = 0; s < shapes.size(); ++s)
    for (std::size_t z = 0; z < sizes.size(); ++z)
      cmds += "eval " + (dir / (std::to_string(s) + ".png")).string() + " " +
              std::to_string(sizes[z].first) + " " + std::to_string(sizes[z].second) + " " +
              (dir / (std::to_string(s) + "_" + std::to_string(z) + ".bin")).string() + "\n";
  run_oracle(py, dir, cmds);
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const Image img = decode_file(dir / (std::to_string(s) + ".png"));
    for (std::size_t z = 0; z < sizes.size(); ++z) {
      const Image out = resize_center_crop(img, sizes[z].first, sizes[z].second);
      EXPECT_EQ(out.height, sizes[z].second);
      EXPECT_EQ(out.width, sizes[z].second);
      EXPECT_TRUE(out.pixels ==
                  read_file(dir / (std::to_string(s) + "_" + std::to_string(z) + ".bin")))
          << shapes[s].first << "x" << shapes[s].second << " resize " << sizes[z].first << " crop "
          << sizes[z].second;
    }
  }
}

TEST(ResizedCrop, CenterCropRoundsHalvesToEven) {
  // (h - crop) / 2 = 0.5 and 2.5: Python's round gives 0 and 2.
  EXPECT_EQ(box_text(center_crop_box(33, 34, 32)), "0 1 32 32");
  EXPECT_EQ(box_text(center_crop_box(37, 32, 32)), "2 0 32 32");
  EXPECT_THROW(center_crop_box(31, 40, 32), DataError);
}

TEST(ScaledDecode, PlanShrinksOnlySmallCropsAndCoversTheBox) {
  // A box more than half the image in a dimension: the full decode.
  EXPECT_EQ(plan_scaled_crop(400, 600, {0, 0, 201, 100}, 32, 32).denom, 1);
  // A 100x120 box of a 400x600 image for a 32x32 output: scale 2/8 still gives >= 32 pixels.
  const CropBox box{37, 101, 100, 120};
  const ScaledCrop p = plan_scaled_crop(400, 600, box, 32, 32);
  ASSERT_LT(p.num, p.denom);
  EXPECT_EQ(static_cast<double>(p.num) / p.denom, 0.375);  // 1/4 leaves 25 rows < 32
  // The mapped box covers the scaled box: edges compared in units of 1/denom of a scaled pixel.
  EXPECT_LE(p.box.top * p.denom, box.top * p.num);
  EXPECT_LE(p.box.left * p.denom, box.left * p.num);
  EXPECT_GE((p.box.top + p.box.height) * p.denom, (box.top + box.height) * p.num);
  EXPECT_GE((p.box.left + p.box.width) * p.denom, (box.left + box.width) * p.num);
  EXPECT_GE(p.box.height, 32);
  EXPECT_GE(p.box.width, 32);
  // A small output allows the smallest factor, 1/8.
  EXPECT_EQ(plan_scaled_crop(400, 600, box, 8, 8).denom, 8);
  EXPECT_EQ(plan_scaled_crop(400, 600, box, 8, 8).num, 1);
}

TEST(ScaledDecode, CloseToTheFullDecodeAndExactWhenOff) {
  DDP_REQUIRE_TORCHVISION(py);
  TempDir dir;
  const auto jpg = (dir / "big.jpg").string();
  const CropBox box{61, 83, 150, 190};
  run_oracle(py, dir,
             "image 5 480 640 3 " + jpg + "\nresized_crop " + jpg + " " + box_text(box) +
                 " 32 32 " + (dir / "torch.bin").string() + "\n");
  const auto bytes = read_file(jpg);
  const auto torch_out = read_file(dir / "torch.bin");
  const auto pick = [&](std::int64_t h, std::int64_t w) {
    EXPECT_EQ(h, 480);
    EXPECT_EQ(w, 640);
    return box;
  };
  // Off: TurboJPEG's full decode is PIL's, so the result is torchvision's bit for bit.
  EXPECT_TRUE(decode_resized_crop(bytes, jpg, 3, pick, 32, 32, false).pixels == torch_out);
  // On: decoded at 1/4 scale (box 150x190 -> >= 37x47 pixels); an approximation, close to it.
  const ScaledCrop plan = plan_scaled_crop(480, 640, box, 32, 32);
  EXPECT_EQ(plan.num * 4, plan.denom);
  const Image scaled = decode_jpeg_scaled(bytes, jpg, 3, plan.num, plan.denom);
  EXPECT_EQ(scaled.height, 120);
  EXPECT_EQ(scaled.width, 160);
  const Image approx = decode_resized_crop(bytes, jpg, 3, pick, 32, 32, true);
  ASSERT_EQ(approx.pixels.size(), torch_out.size());
  double diff = 0;
  for (std::size_t i = 0; i < torch_out.size(); ++i)
    diff += std::abs(static_cast<int>(approx.pixels[i]) - static_cast<int>(torch_out[i]));
  diff /= static_cast<double>(torch_out.size());
  RecordProperty("mean_abs_diff_levels", std::to_string(diff));
  EXPECT_GT(diff, 0.0) << "scaled decoding took the full-decode path";
  // The mapped box is at most a scaled pixel off the true one (<= 4 source pixels of 150): a mean
  // error of a few levels on smooth content (2.85 measured when written).
  EXPECT_LT(diff, 8.0);
}

}  // namespace
}  // namespace ddp::data
