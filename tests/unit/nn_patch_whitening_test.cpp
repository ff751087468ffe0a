// Patch whitening (conv2d init = "patch_whitening"): the eigen-decomposition against
// torch.linalg.eigh, the filters against airbench94's init_whitening_conv (tests/unit/
// recipe_torch.py, float64) on real CIFAR-10 images, the trainer's step that sets a model's layer,
// and what the filters are for: the layer's outputs over those patches come out decorrelated.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/readers.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/init_whitening.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/rng.hpp"
#include "ddp/train/patch_whitening.hpp"
#include "layer_spec_util.hpp"
#include "recipe_oracle.hpp"

namespace ddp::nn {
namespace {

namespace fs = std::filesystem;
using testutil::L;

TEST(SymmetricEigen, TwoByTwoByHand) {
  // [[2, 1], [1, 2]]: eigenvalues 1 and 3, eigenvectors (1, -1) / sqrt 2 and (1, 1) / sqrt 2.
  const SymmetricEigen e = symmetric_eigen({2, 1, 1, 2}, 2);
  EXPECT_NEAR(e.values[0], 1.0, 1e-15);
  EXPECT_NEAR(e.values[1], 3.0, 1e-15);
  const double r = std::sqrt(0.5);
  // Equal magnitudes: the first entry is made positive.
  EXPECT_NEAR(e.vectors[0], r, 1e-15);
  EXPECT_NEAR(e.vectors[1], -r, 1e-15);
  EXPECT_NEAR(e.vectors[2], r, 1e-15);
  EXPECT_NEAR(e.vectors[3], r, 1e-15);
}

TEST(SymmetricEigen, MatchesTorchEigh) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  const std::int64_t n = 12;
  // B B^T + a diagonal: symmetric positive definite with distinct eigenvalues; only the upper
  // triangle is read, so the lower one gets garbage.
  CounterRng rng(99);
  std::vector<double> b(static_cast<std::size_t>(n * n)), a(static_cast<std::size_t>(n * n));
  for (auto& v : b) v = rng.next_double() - 0.5;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = i == j ? 0.1 * static_cast<double>(i) : 0.0;
      for (std::int64_t k = 0; k < n; ++k) s += b[i * n + k] * b[j * n + k];
      a[i * n + j] = j >= i ? s : 1e6;
    }
  const SymmetricEigen e = symmetric_eigen(a, n);
  oracle.spec("n = 12\n");
  oracle.write("a.f64", a);
  ASSERT_TRUE(oracle.run("eigh"));
  const auto values = oracle.read<double>("values.f64", n);
  const auto vectors = oracle.read<double>("vectors.f64", n * n);
  for (std::int64_t i = 0; i < n; ++i) EXPECT_NEAR(e.values[i], values[i], 1e-12) << i;
  for (std::int64_t i = 0; i < n * n; ++i) EXPECT_NEAR(e.vectors[i], vectors[i], 1e-10) << i;
}

// The first `n` CIFAR-10 test images normalised as airbench does, or empty (and a skip) without
// the data.
std::vector<float> whitening_cifar_images(std::int64_t n, data::SampleSet* set_out = nullptr) {
  const fs::path root = fs::path(DDP_SHARED_DATA_DIR) / "cifar-10-batches-bin";
  if (!fs::exists(root / "test_batch.bin")) return {};
  data::SampleSet set = data::read_cifar10(root, data::Split::test);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  std::vector<float> images(static_cast<std::size_t>(n * 3 * 32 * 32));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  const data::Normalization norm{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  data::fill_batch(set, idx, norm, data::Augmentation{}, 0, 0, images.data(), labels.data());
  if (set_out) *set_out = std::move(set);
  return images;
}

TEST(PatchWhitening, FiltersMatchAirbenchOnCifarPatches) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  const std::int64_t n = 200;
  const auto images = whitening_cifar_images(n);
  if (images.empty()) GTEST_SKIP() << "CIFAR-10 not in " DDP_SHARED_DATA_DIR;
  const std::vector<std::pair<std::int64_t, std::int64_t>> kernels = {{2, 2}, {3, 3}, {2, 3}};
  // All kernels in one run of the oracle (each start of Python and torch costs seconds).
  std::string list;
  for (const auto& [kh, kw] : kernels) list += std::to_string(kh) + " " + std::to_string(kw) + " ";
  oracle.spec("shape = 200 3 32 32\nkernels = " + list + "\neps = 5e-4\n");
  oracle.write("images.f32", images);
  ASSERT_TRUE(oracle.run("whiten"));
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const auto [kh, kw] = kernels[k];
    SCOPED_TRACE(std::to_string(kh) + "x" + std::to_string(kw));
    PatchCovariance cov(3, kh, kw);
    cov.add(images.data(), n, 32, 32);
    EXPECT_EQ(cov.patches(), n * (33 - kh) * (33 - kw));
    const std::int64_t dim = 3 * kh * kw;
    const auto w = whitening_filters(cov.covariance(), dim, 5e-4);
    ASSERT_EQ(static_cast<std::int64_t>(w.size()), 2 * dim * dim);
    const auto want = oracle.read<double>("filters" + std::to_string(k) + ".f64", w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      ASSERT_NEAR(w[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << "value " << i;
  }
}

// The trainer's step: a model whose first conv2d says init = "patch_whitening" gets those filters
// from the training images, and its outputs over them are decorrelated: channel i's mean square is
// lambda_i / (lambda_i + eps) and channels i != j are uncorrelated (the bias starts at 0).
TEST(PatchWhitening, TrainerSetsTheLayerAndItsOutputsAreWhite) {
  data::SampleSet set;
  const std::int64_t n = 100;
  const auto images = whitening_cifar_images(n, &set);
  if (images.empty()) GTEST_SKIP() << "CIFAR-10 not in " DDP_SHARED_DATA_DIR;
  // The dataset of those 100 images, all of which the whitening then reads.
  const data::InMemoryDataset train(set.head(n));
  const data::Normalization norm{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  auto be = backend::make_cpu_backend();
  LayerSpec white = L("conv2d", "whiten", 24, 2);
  white.init = "patch_whitening";
  const std::int64_t per_sample = 24 * 31 * 31;
  Model m({white, L("flatten", "f")}, Shape{3, 32, 32}, per_sample, *be);
  m.init_parameters(3);
  ModelOptions opt;
  opt.whitening_samples = 0;  // all
  const std::string line = train::apply_patch_whitening(m, train, norm, data::Options{}, opt, 3);
  EXPECT_NE(line.find("whiten.weight from 100 training images"), std::string::npos) << line;

  PatchCovariance cov(3, 2, 2);
  cov.add(images.data(), n, 32, 32);
  const auto c = cov.covariance();
  const auto want = whitening_filters(c, 12, 5e-4);
  const auto& w = m.named_params()[0];
  ASSERT_EQ(w.name, "whiten.weight");
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(w.tensor.data()[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i])));

  m.reserve(n);
  const Tensor& y = m.forward(Tensor::view(const_cast<float*>(images.data()), Shape{n, 3, 32, 32}),
                              StepContext{Mode::eval, 0, nullptr});
  const SymmetricEigen e = symmetric_eigen(c, 12);
  const std::int64_t hw = 31 * 31;
  for (std::int64_t i = 0; i < 12; ++i)
    for (std::int64_t j = i; j < 12; ++j) {
      double s = 0.0;
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t p = 0; p < hw; ++p)
          s += static_cast<double>(y.data()[(k * 24 + i) * hw + p]) *
               static_cast<double>(y.data()[(k * 24 + j) * hw + p]);
      s /= static_cast<double>(n * hw);
      const double lambda = e.values[static_cast<std::size_t>(11 - i)];
      const double expect = i == j ? lambda / (lambda + 5e-4) : 0.0;
      EXPECT_NEAR(s, expect, 2e-3) << "channels " << i << ", " << j;
    }
}

TEST(PatchWhitening, RefusesLayersItCannotWhiten) {
  const data::InMemoryDataset train(data::test_util::pattern_dataset(4, 3, 8, 8));
  const data::Normalization norm{{0.5f}, {0.25f}};
  auto be = backend::make_cpu_backend();
  const auto message = [&](std::vector<LayerSpec> specs) {
    Model m(specs, Shape{3, 8, 8}, 2, *be);
    m.init_parameters(1);
    try {
      train::apply_patch_whitening(m, train, norm, data::Options{}, ModelOptions{}, 1);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  LayerSpec white = L("conv2d", "white", 24, 2);
  white.init = "patch_whitening";
  LayerSpec narrow = white;
  narrow.out_channels = 12;  // one sign only
  EXPECT_NE(message({narrow, L("flatten", "f"), L("linear", "fc", 2)}).find("out_channels = 2 x "),
            std::string::npos);
  // Not reading the images: a second convolution.
  LayerSpec later = white;
  later.name = "later";
  EXPECT_NE(message({L("conv2d", "c0", 3, 1), later, L("flatten", "f"), L("linear", "fc", 2)})
                .find("must read the model input"),
            std::string::npos);
  // Without such a layer nothing happens.
  Model plain({L("conv2d", "c0", 3, 1), L("flatten", "f"), L("linear", "fc", 2)}, Shape{3, 8, 8}, 2,
              *be);
  plain.init_parameters(1);
  EXPECT_EQ(train::apply_patch_whitening(plain, train, norm, data::Options{}, ModelOptions{}, 1),
            "");
}

}  // namespace
}  // namespace ddp::nn
