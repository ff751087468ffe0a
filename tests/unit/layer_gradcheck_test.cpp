// Every layer's input and parameter gradients against central finite differences.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "gradcheck_util.hpp"

namespace ddp::nn {
namespace {

using ddp::testing::expect_gradient_matches;
using ddp::testing::random_vector;

// A layer plus its own parameter, gradient and buffer storage.
struct Harness {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend();
  std::unique_ptr<Layer> layer;
  Shape in, out;
  std::int64_t n;
  std::vector<std::vector<float>> params, grads, buffers;

  Harness(LayerSpec spec, Shape in_shape, std::int64_t batch) : in(std::move(in_shape)), n(batch) {
    if (spec.name.empty()) spec.name = spec.type + "_under_test";
    layer = make_layer(spec, *be);
    out = layer->infer(std::span<const Shape>(&in, 1));
    std::vector<Tensor> p, g, b;
    std::uint64_t seed = 100;
    for (const auto& s : layer->param_specs()) {
      params.push_back(
          random_vector(static_cast<std::size_t>(s.shape.numel()), ++seed, -0.5f, 0.5f));
      if (s.init == Init::ones)
        for (auto& v : params.back()) v += 1.0f;
      grads.emplace_back(params.back().size());
    }
    for (const auto& s : layer->buffer_specs()) {
      buffers.emplace_back(static_cast<std::size_t>(s.shape.numel()),
                           s.init == Init::ones ? 1.0f : 0.0f);
    }
    auto specs = layer->param_specs();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      p.push_back(Tensor::view(params[i].data(), specs[i].shape));
      g.push_back(Tensor::view(grads[i].data(), specs[i].shape));
    }
    auto bspecs = layer->buffer_specs();
    for (std::size_t i = 0; i < bspecs.size(); ++i)
      b.push_back(Tensor::view(buffers[i].data(), bspecs[i].shape));
    layer->bind(p, g, b);
  }

  // L = sum(y * r); returns L and leaves y in `y`.
  double loss(std::vector<float>& x, const std::vector<float>& r, std::vector<float>& y,
              Mode mode = Mode::train) {
    y.assign(static_cast<std::size_t>(out.numel() * n), 0.0f);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = 1000 + i;
    StepContext ctx{mode, 7, ids.data()};
    // Batch norm updates running stats in training mode; keep them fixed across evaluations.
    auto saved = buffers;
    const Tensor xt = Tensor::view(x.data(), in.with_batch(n));
    layer->forward(std::span<const Tensor>(&xt, 1), Tensor::view(y.data(), out.with_batch(n)), ctx);
    buffers_after = buffers;
    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i] = saved[i];
    double l = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  }

  void check(std::vector<float> x, Mode mode = Mode::train, float eps = 1e-2f) {
    const auto r = random_vector(static_cast<std::size_t>(out.numel() * n), 77);
    std::vector<float> y, dx(x.size());
    loss(x, r, y, mode);
    auto r_copy = r;
    if (layer->is_view()) {
      dx = r;
    } else {
      const Tensor dxt = Tensor::view(dx.data(), in.with_batch(n));
      const Tensor xt = Tensor::view(x.data(), in.with_batch(n));
      const Tensor* dxp = &dxt;
      layer->backward(std::span<const Tensor>(&xt, 1), Tensor::view(y.data(), out.with_batch(n)),
                      Tensor::view(r_copy.data(), out.with_batch(n)),
                      std::span<const Tensor* const>(&dxp, 1));
    }
    const auto analytic_params = grads;
    std::vector<float> scratch;
    expect_gradient_matches([&] { return loss(x, r, scratch, mode); }, x, dx, "input", eps);
    for (std::size_t i = 0; i < params.size(); ++i)
      expect_gradient_matches([&] { return loss(x, r, scratch, mode); }, params[i],
                              analytic_params[i], layer->param_specs()[i].name.c_str(), eps);
  }

  std::vector<std::vector<float>> buffers_after;
};

// Inputs whose values are at least `gap` apart from each other and from 0, so no finite-difference
// step crosses a relu kink or changes a max-pool argmax.
std::vector<float> separated_input(std::size_t n, std::uint64_t seed, float gap = 0.03f) {
  auto v = random_vector(n, seed);
  for (std::size_t i = 0; i < n; ++i) {
    const float sign = (i % 2) ? 1.0f : -1.0f;
    v[i] = sign * (0.05f + gap * static_cast<float>((i * 7919) % n));
  }
  return v;
}

LayerSpec conv(std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t pad,
               bool bias = true) {
  LayerSpec s;
  s.type = "conv2d";
  s.out_channels = out;
  s.kernel = k;
  s.stride = stride;
  s.padding = pad;
  s.bias = bias;
  return s;
}

TEST(LayerGradcheck, Conv2dPaddedStride1) {
  Harness h(conv(4, 3, 1, 1), Shape{3, 6, 6}, 2);
  h.check(random_vector(2 * 3 * 6 * 6, 1));
}

TEST(LayerGradcheck, Conv2dStride2NoBias) {
  Harness h(conv(5, 3, 2, 0, false), Shape{2, 7, 7}, 3);
  EXPECT_EQ(h.out, (Shape{5, 3, 3}));
  h.check(random_vector(3 * 2 * 7 * 7, 2));
}

TEST(LayerGradcheck, Conv2dLeNetGeometry) {
  Harness h(conv(6, 5, 1, 2), Shape{1, 8, 8}, 2);
  EXPECT_EQ(h.out, (Shape{6, 8, 8}));
  h.check(random_vector(2 * 64, 3));
}

TEST(LayerGradcheck, Linear) {
  LayerSpec s;
  s.type = "linear";
  s.out_features = 7;
  Harness h(s, Shape{11}, 4);
  h.check(random_vector(44, 4));
}

TEST(LayerGradcheck, LinearFromImageShape) {
  LayerSpec s;
  s.type = "linear";
  s.out_features = 3;
  s.bias = false;
  Harness h(s, Shape{2, 3, 3}, 2);
  h.check(random_vector(36, 5));
}

TEST(LayerGradcheck, MaxPool) {
  LayerSpec s;
  s.type = "maxpool";
  s.kernel = 2;
  Harness h(s, Shape{3, 6, 6}, 2);
  EXPECT_EQ(h.out, (Shape{3, 3, 3}));
  h.check(separated_input(2 * 3 * 36, 6));
}

TEST(LayerGradcheck, MaxPoolOverlappingStride1) {
  LayerSpec s;
  s.type = "maxpool";
  s.kernel = 3;
  s.stride = 1;
  s.padding = 1;
  Harness h(s, Shape{2, 5, 5}, 2);
  EXPECT_EQ(h.out, (Shape{2, 5, 5}));
  h.check(separated_input(2 * 2 * 25, 7));
}

TEST(LayerGradcheck, AvgPool) {
  LayerSpec s;
  s.type = "avgpool";
  s.kernel = 2;
  Harness h(s, Shape{2, 4, 6}, 3);
  h.check(random_vector(3 * 2 * 24, 8));
}

TEST(LayerGradcheck, Relu) {
  LayerSpec s;
  s.type = "relu";
  Harness h(s, Shape{3, 4, 4}, 2);
  h.check(separated_input(96, 9, 0.01f), Mode::train, 5e-3f);
}

TEST(LayerGradcheck, Flatten) {
  LayerSpec s;
  s.type = "flatten";
  Harness h(s, Shape{3, 4, 4}, 2);
  EXPECT_EQ(h.out, (Shape{48}));
  EXPECT_TRUE(h.layer->is_view());
}

TEST(LayerGradcheck, DropoutTrainingMaskIsFixedPerSample) {
  LayerSpec s;
  s.type = "dropout";
  s.p = 0.3f;
  Harness h(s, Shape{50}, 4);
  h.check(random_vector(200, 10));
  // Roughly 30% dropped, kept values scaled by 1/0.7.
  std::vector<float> x(200, 1.0f), y, r(200, 0.0f);
  h.loss(x, r, y);
  int zeros = 0;
  for (float v : y) {
    if (v == 0.0f)
      ++zeros;
    else
      EXPECT_NEAR(v, 1.0f / 0.7f, 1e-6f);
  }
  EXPECT_GT(zeros, 35);
  EXPECT_LT(zeros, 85);
}

TEST(LayerGradcheck, DropoutEvalIsIdentity) {
  LayerSpec s;
  s.type = "dropout";
  s.p = 0.5f;
  Harness h(s, Shape{10}, 2);
  std::vector<float> x = random_vector(20, 11), y, r(20, 0.0f);
  h.loss(x, r, y, Mode::eval);
  EXPECT_EQ(x, y);
}

TEST(LayerGradcheck, BatchNormTrainingImage) {
  LayerSpec s;
  s.type = "batchnorm";
  Harness h(s, Shape{3, 4, 4}, 4);
  h.check(random_vector(4 * 48, 12, -2.0f, 2.0f), Mode::train, 1e-2f);
}

TEST(LayerGradcheck, BatchNormTrainingFeatures) {
  LayerSpec s;
  s.type = "batchnorm";
  Harness h(s, Shape{5}, 8);
  h.check(random_vector(40, 13, -2.0f, 2.0f));
}

TEST(LayerGradcheck, BatchNormEvalUsesRunningStats) {
  LayerSpec s;
  s.type = "batchnorm";
  Harness h(s, Shape{2, 2, 2}, 3);
  h.buffers[0] = {0.5f, -1.0f};  // running mean
  h.buffers[1] = {4.0f, 0.25f};  // running var
  h.params[0] = {2.0f, 1.0f};    // gamma
  h.params[1] = {0.1f, -0.2f};   // beta
  std::vector<float> x = random_vector(24, 14), y, r(24, 0.0f);
  h.loss(x, r, y, Mode::eval);
  for (std::size_t i = 0; i < 24; ++i) {
    const std::size_t c = (i / 4) % 2;
    const float mean = c == 0 ? 0.5f : -1.0f, var = c == 0 ? 4.0f : 0.25f;
    const float g = c == 0 ? 2.0f : 1.0f, b = c == 0 ? 0.1f : -0.2f;
    EXPECT_NEAR(y[i], g * (x[i] - mean) / std::sqrt(var + 1e-5f) + b, 1e-5f);
  }
}

TEST(LayerGradcheck, BatchNormRunningStatsFollowPyTorch) {
  LayerSpec s;
  s.type = "batchnorm";
  s.momentum = 0.1f;
  Harness h(s, Shape{1}, 4);
  std::vector<float> x{1.0f, 2.0f, 3.0f, 6.0f}, y, r(4, 0.0f);
  h.loss(x, r, y);
  // mean 3, unbiased variance (4+1+0+9)/3.
  EXPECT_NEAR(h.buffers_after[0][0], 0.1f * 3.0f, 1e-6f);
  EXPECT_NEAR(h.buffers_after[1][0], 0.9f + 0.1f * (14.0f / 3.0f), 1e-5f);
}

TEST(LayerShapes, MismatchNamesTheLayer) {
  auto be = backend::make_cpu_backend();
  LayerSpec s = conv(4, 7, 1, 0);
  s.name = "conv9";
  s.line = 42;
  auto layer = make_layer(s, *be);
  try {
    const Shape in{3, 5, 5};
    layer->infer(std::span<const Shape>(&in, 1));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("conv9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 42"), std::string::npos) << e.what();
  }
}

TEST(LayerShapes, UnknownTypeIsConfigError) {
  auto be = backend::make_cpu_backend();
  LayerSpec s;
  s.type = "conv3d";
  s.name = "x";
  EXPECT_THROW(make_layer(s, *be), ConfigError);
}

}  // namespace
}  // namespace ddp::nn
