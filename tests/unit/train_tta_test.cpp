// Test-time augmentation (eval.tta): the backend's image views against torch's reflect padding,
// crop and flip, and the evaluator's averaged logits against airbench94's infer_mirror /
// infer_mirror_translate run by PyTorch on the same weights and images
// (tests/unit/recipe_torch.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/comm/mpi_comm.hpp"
#include "ddp/data/dataset.hpp"
#include "ddp/data/options.hpp"
#include "ddp/data/transform.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/rng.hpp"
#include "ddp/train/evaluator.hpp"
#include "ddp/train/test_time_augmentation.hpp"
#include "layer_spec_util.hpp"
#include "mpi_test_env.hpp"
#include "recipe_oracle.hpp"

namespace ddp::train {
namespace {

using testutil::L;

TEST(ImageView, MatchesTorchReflectPadCropAndFlip) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  auto be = backend::make_cpu_backend();
  const std::int64_t n = 2, c = 3, h = 5, w = 6, count = n * c * h * w;
  std::vector<float> x(static_cast<std::size_t>(count));
  CounterRng rng(4);
  for (auto& v : x) v = rng.next_float();
  const std::vector<std::array<std::int64_t, 3>> views = {{0, 0, 1},  {-1, -1, 0}, {-1, -1, 1},
                                                          {1, 1, 0},  {1, 1, 1},   {-2, 2, 0},
                                                          {2, -1, 1}, {4, -5, 1}};
  std::string list;
  for (const auto& v : views)
    list += std::to_string(v[0]) + " " + std::to_string(v[1]) + " " + std::to_string(v[2]) + " ";
  oracle.spec("shape = 2 3 5 6\nviews = " + list + "\n");
  oracle.write("images.f32", x);
  ASSERT_TRUE(oracle.run("view"));
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    be->image_view(n, c, h, w, views[i][0], views[i][1], views[i][2] != 0, x.data(), y.data());
    EXPECT_EQ(y, oracle.read<float>("view" + std::to_string(i) + ".f32", y.size()))
        << "view " << views[i][0] << " " << views[i][1] << " " << views[i][2];
  }
}

// conv 3x3 (padding 1) -> relu -> maxpool 2 -> flatten -> linear: the net recipe_torch.py builds.
std::vector<nn::LayerSpec> tta_net() {
  return {L("conv2d", "conv", 4, 3, 1), L("relu", "relu"), L("maxpool", "pool", 0, 2),
          L("flatten", "flat"), L("linear", "fc", 10)};
}

std::vector<float> tta_param(const nn::Model& m, const std::string& name) {
  for (const auto& t : m.named_params())
    if (t.name == name) return {t.tensor.data(), t.tensor.data() + t.tensor.numel()};
  ADD_FAILURE() << "no " << name;
  return {};
}

TEST(TestTimeAugmentation, EvaluatorAveragesLogitsAsAirbench) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  testing::ensure_mpi();
  comm::MpiComm comm(MPI_COMM_WORLD);
  auto be = backend::make_cpu_backend();
  const std::int64_t n = 21, h = 8, w = 8;
  const data::InMemoryDataset test(data::test_util::pattern_dataset(n, 3, h, w));
  const data::Normalization norm{{0.5f}, {0.25f}};
  nn::Model model(tta_net(), Shape{3, h, w}, 10, *be);
  model.init_parameters(8);
  model.reserve(8);
  // The images as the evaluator sees them, for torch.
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  std::vector<float> images(static_cast<std::size_t>(n * 3 * h * w));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  data::fill_batch(test.samples(), all, norm, data::Augmentation{}, 0, 0, images.data(),
                   labels.data());
  oracle.write("images.f32", images);
  oracle.write("conv_w.f32", tta_param(model, "conv.weight"));
  oracle.write("conv_b.f32", tta_param(model, "conv.bias"));
  oracle.write("fc_w.f32", tta_param(model, "fc.weight"));
  oracle.write("fc_b.f32", tta_param(model, "fc.bias"));

  struct Case {
    const char* tta;
    std::int64_t shift;
    int level;
  };
  const std::vector<Case> cases = {
      {"flip", 1, 1}, {"flip_translate", 1, 2}, {"flip_translate", 3, 2}};
  // Every case in one run of the oracle (each start of Python and torch costs seconds).
  std::string list;
  for (const Case& k : cases) list += std::to_string(k.level) + " " + std::to_string(k.shift) + " ";
  oracle.spec("shape = 21 3 8 8\nclasses = 10\ncases = " + list + "\n");
  ASSERT_TRUE(oracle.run("tta"));
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    SCOPED_TRACE(std::string(k.tta) + " shift " + std::to_string(k.shift));
    // Batches of 8: the last one short, as a shard's tail is.
    Evaluator ev(model, *be, test, norm, data::Options{}, 0, comm, {}, 8);
    ev.set_tta(TestTimeAugmentation(EvalOptions{k.tta, k.shift, "auto"}, Shape{3, h, w}));
    std::vector<float> logits;
    const EvalResult e = ev.evaluate(&logits);
    ASSERT_EQ(e.samples, n);
    const auto want = oracle.read<float>("logits" + std::to_string(c) + ".f32", logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i)
      ASSERT_NEAR(logits[i], want[i], 1e-5f * std::max(1.0f, std::abs(want[i]))) << i;
    // The accuracy is the averaged logits' argmax.
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float* row = logits.data() + i * 10;
      correct += std::max_element(row, row + 10) - row == labels[static_cast<std::size_t>(i)];
    }
    EXPECT_DOUBLE_EQ(e.accuracy, static_cast<double>(correct) / static_cast<double>(n));
  }
  // none: the model's own logits.
  Evaluator plain(model, *be, test, norm, data::Options{}, 0, comm, {}, 8);
  std::vector<float> logits;
  plain.evaluate(&logits);
  model.reserve(n);
  const Tensor& direct = model.forward(Tensor::view(images.data(), Shape{n, 3, h, w}),
                                       nn::StepContext{nn::Mode::eval});
  ASSERT_EQ(static_cast<std::int64_t>(logits.size()), direct.numel());
  for (std::size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(logits[i], direct.data()[i], 1e-6f * std::max(1.0f, std::abs(logits[i])));
}

TEST(TestTimeAugmentation, ViewsAndTheirChecks) {
  EXPECT_EQ(TestTimeAugmentation().views().size(), 1u);
  EXPECT_EQ(TestTimeAugmentation(EvalOptions{"flip", 1, "auto"}, Shape{3, 32, 32}).views().size(),
            2u);
  const TestTimeAugmentation t(EvalOptions{"flip_translate", 2, "auto"}, Shape{3, 32, 32});
  ASSERT_EQ(t.views().size(), 6u);
  EXPECT_EQ(t.views()[2].dy, -2);
  EXPECT_EQ(t.views()[5].dx, 2);
  EXPECT_TRUE(t.views()[5].flip);
  // By hand: the identity 1, its mirror 3, the shifted pairs (5, 7) and (9, 11):
  // 0.5 * 2 + 0.5 * mean(6, 10) = 5.
  std::vector<std::vector<float>> v = {{1}, {3}, {5}, {7}, {9}, {11}};
  std::vector<float> out(1);
  t.combine(v, out);
  EXPECT_EQ(out[0], 5.0f);
  try {
    TestTimeAugmentation(EvalOptions{"flip_translate", 8, "auto"}, Shape{3, 8, 32});
    ADD_FAILURE() << "a shift as large as the image was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("eval.tta_shift = 8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp::train
