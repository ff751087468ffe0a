// The model: flat buffers, layer views, initialisation, shape errors, end-to-end gradients.
#include "ddp/nn/model.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "gradcheck_util.hpp"
#include "layer_spec_util.hpp"

namespace ddp::nn {
namespace {

using testutil::L;
using testutil::small_net;

TEST(Model, FlatBuffersAndNamedViews) {
  auto be = backend::make_cpu_backend();
  Model m(small_net(), Shape{2, 6, 6}, 4, *be);
  ASSERT_EQ(m.named_params().size(), 8u);
  EXPECT_EQ(m.named_params()[0].name, "conv1.weight");
  EXPECT_EQ(m.named_params()[0].tensor.shape(), (Shape{3, 2, 3, 3}));
  EXPECT_EQ(m.named_params()[4].name, "fc1.weight");
  EXPECT_EQ(m.named_params()[4].tensor.shape(), (Shape{5, 27}));
  EXPECT_EQ(m.named_buffers()[0].name, "bn1.running_mean");
  EXPECT_EQ(m.num_parameters(), 3 * 2 * 9 + 3 + 3 + 3 + 5 * 27 + 5 + 4 * 5 + 4);
  for (const auto& p : m.named_params()) {
    EXPECT_EQ(p.offset % 16, 0u) << p.name;
    EXPECT_EQ(p.tensor.data(), m.params().data() + p.offset);
  }
  EXPECT_EQ(m.params().size(), m.grads().size());
}

TEST(Model, InitMatchesPyTorchDefaultsAndIsSeeded) {
  auto be = backend::make_cpu_backend();
  Model a(small_net(), Shape{2, 6, 6}, 4, *be), b(small_net(), Shape{2, 6, 6}, 4, *be),
      c(small_net(), Shape{2, 6, 6}, 4, *be);
  a.init_parameters(1);
  b.init_parameters(1);
  c.init_parameters(2);
  EXPECT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
  EXPECT_FALSE(std::equal(a.params().begin(), a.params().end(), c.params().begin()));
  for (const auto& p : a.named_params()) {
    const float* d = p.tensor.data();
    if (p.name == "bn1.weight") {
      for (int i = 0; i < 3; ++i) EXPECT_EQ(d[i], 1.0f);
      continue;
    }
    if (p.name == "bn1.bias") continue;
    const double fan_in =
        p.name.rfind("conv1", 0) == 0 ? 18 : (p.name.rfind("fc1", 0) == 0 ? 27 : 5);
    const double bound = 1.0 / std::sqrt(fan_in);
    double max_abs = 0;
    for (std::int64_t i = 0; i < p.tensor.numel(); ++i) {
      EXPECT_LE(std::abs(d[i]), bound) << p.name;
      max_abs = std::max(max_abs, static_cast<double>(std::abs(d[i])));
    }
    if (p.tensor.numel() > 20) EXPECT_GT(max_abs, 0.7 * bound) << p.name;
  }
  EXPECT_EQ(a.named_buffers()[1].tensor.data()[0], 1.0f);  // running_var
}

TEST(Model, LastLayerMustMatchClasses) {
  auto be = backend::make_cpu_backend();
  auto specs = small_net();
  specs.back().out_features = 7;
  try {
    Model m(specs, Shape{2, 6, 6}, 4, *be);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fc2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("4 classes"), std::string::npos);
  }
}

// Backward of a 3-sample batch against finite differences of the softmax cross-entropy over all
// parameters; returns the layers whose on_layer_done hook fired, in order. The input is the
// caller's and must come back unchanged.
std::vector<std::size_t> expect_model_gradients(Model& m, backend::Backend& be) {
  const std::int64_t n = 3;
  auto x = ddp::testing::random_vector(n * 72, 9);
  const auto x_before = x;
  const std::vector<std::int32_t> y{0, 3, 1};
  std::vector<float> dl(n * 4);
  auto loss = [&](float* dlogits) {
    const Tensor& z = m.forward(Tensor::view(x.data(), Shape{n, 2, 6, 6}), StepContext{});
    return be.softmax_xent(n, 4, z.data(), y.data(), 0.0f, 1.0f, dlogits).loss_sum;
  };
  loss(dl.data());
  std::vector<std::size_t> done;
  m.backward(Tensor::view(dl.data(), Shape{n, 4}), [&](std::size_t i) { done.push_back(i); });
  EXPECT_EQ(x, x_before);
  std::vector<float> analytic(m.grads().begin(), m.grads().end());
  std::vector<float> values(m.params().begin(), m.params().end());
  ddp::testing::expect_gradient_matches(
      [&] {
        std::copy(values.begin(), values.end(), m.params().begin());
        return loss(nullptr);
      },
      values, analytic, "all parameters", 3e-3f, 3e-2);
  return done;
}

TEST(Model, EndToEndParameterGradients) {
  auto be = backend::make_cpu_backend();
  auto specs = small_net();
  specs.erase(specs.begin() + 1);  // no batch norm: keep it piecewise linear + softmax
  Model m(specs, Shape{2, 6, 6}, 4, *be);
  m.init_parameters(5);
  // Hooks fire in reverse order, once per layer with parameters.
  EXPECT_EQ(expect_model_gradients(m, *be), (std::vector<std::size_t>{6, 4, 0}));
}

// ReLU shares the buffers of the layer below only where that layer's backward does not read its
// output; the gradients are the same either way (finite differences through every pattern).
TEST(Model, ElementwiseLayersRunInPlaceWhereSafe) {
  auto be = backend::make_cpu_backend();
  const std::vector<LayerSpec> specs{L("relu", "r0"),  // on the caller's input: never
                                     L("conv2d", "conv1", 3, 3, 1),
                                     L("relu", "r1"),  // over the convolution's output
                                     L("relu", "r2"),  // r1's backward reads its output: no
                                     L("maxpool", "pool1", 0, 2),
                                     L("relu", "r3"),  // cuDNN's pooling backward reads its output
                                     L("flatten", "flat"),
                                     L("relu", "r4"),  // over a view: no
                                     L("linear", "fc1", 5),
                                     L("relu", "r5"),  // over the linear layer's output
                                     L("linear", "fc2", 4)};
  Model m(specs, Shape{2, 6, 6}, 4, *be);
  const std::vector<bool> expected{false, false, true,  false, false, false,
                                   false, false, false, true,  false};
  for (std::size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(m.runs_in_place(i), expected[i]) << specs[i].name;

  m.init_parameters(5);
  expect_model_gradients(m, *be);
}

// A model that starts with a view (flatten, then a linear classifier): backward stops at the first
// layer that computes, with nothing to reshape below it.
TEST(Model, LeadingFlattenTrains) {
  auto be = backend::make_cpu_backend();
  Model m({L("flatten", "flat"), L("linear", "fc", 4)}, Shape{2, 3, 3}, 4, *be);
  m.init_parameters(3);
  const std::int64_t n = 2;
  auto x = ddp::testing::random_vector(n * 18, 4);
  const std::vector<std::int32_t> y{1, 2};
  std::vector<float> dl(n * 4);
  const Tensor& z = m.forward(Tensor::view(x.data(), Shape{n, 2, 3, 3}), StepContext{});
  be->softmax_xent(n, 4, z.data(), y.data(), 0.0f, 1.0f, dl.data());
  std::vector<std::size_t> done;
  m.backward(Tensor::view(dl.data(), Shape{n, 4}), [&](std::size_t i) { done.push_back(i); });
  EXPECT_EQ(done, (std::vector<std::size_t>{1}));
  double norm = 0;
  for (float g : m.grads()) norm += static_cast<double>(g) * g;
  EXPECT_GT(norm, 0.0);
}

TEST(Model, GradRangesCoverLayers) {
  auto be = backend::make_cpu_backend();
  Model m(small_net(), Shape{2, 6, 6}, 4, *be);
  EXPECT_EQ(m.grad_range(2).second, 0u);  // relu has none
  const auto c = m.grad_range(0), f = m.grad_range(7);
  EXPECT_EQ(c.first, 0u);
  EXPECT_EQ(f.second, m.grads().size());
}

}  // namespace
}  // namespace ddp::nn
