// Every layer's input and parameter gradients against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
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

LayerSpec grouped(std::int64_t out, Extent2 k, std::int64_t groups, Extent2 stride = 1,
                  Extent2 pad = 0, Extent2 dilation = 1) {
  LayerSpec s = conv(out, 0, 0, 0);
  s.kernel = k;
  s.stride = stride;
  s.padding = pad;
  s.dilation = dilation;
  s.groups = groups;
  return s;
}

TEST(LayerGradcheck, Conv2dGroups2) {
  Harness h(grouped(6, 3, 2, 1, 1), Shape{4, 5, 5}, 2);
  EXPECT_EQ(h.out, (Shape{6, 5, 5}));
  EXPECT_EQ(h.layer->param_specs()[0].shape, (Shape{6, 2, 3, 3}));  // [out, in / groups, kh, kw]
  EXPECT_EQ(h.layer->param_specs()[0].fan_in, 2 * 3 * 3);
  h.check(random_vector(2 * 4 * 25, 20));
}

TEST(LayerGradcheck, Conv2dDepthwiseStride2) {
  Harness h(grouped(6, 3, 6, 2, 1), Shape{6, 7, 7}, 2);
  EXPECT_EQ(h.out, (Shape{6, 4, 4}));
  EXPECT_EQ(h.layer->param_specs()[0].shape, (Shape{6, 1, 3, 3}));
  h.check(random_vector(2 * 6 * 49, 21));
}

TEST(LayerGradcheck, Conv2dDepthwiseMultiplier2NoBias) {
  LayerSpec s = grouped(8, 3, 4, 1, 1);
  s.bias = false;
  Harness h(s, Shape{4, 5, 5}, 2);
  EXPECT_EQ(h.layer->param_specs()[0].shape, (Shape{8, 1, 3, 3}));
  h.check(random_vector(2 * 4 * 25, 22));
}

TEST(LayerGradcheck, Conv2dDilated) {
  // A 3x3 kernel at dilation 2 spans 5x5: padding 2 keeps 7x7.
  Harness h(grouped(4, 3, 1, 1, 2, 2), Shape{3, 7, 7}, 2);
  EXPECT_EQ(h.out, (Shape{4, 7, 7}));
  EXPECT_DOUBLE_EQ(h.layer->forward_flops(), 2.0 * 4 * 49 * 3 * 9);
  h.check(random_vector(2 * 3 * 49, 23));
}

TEST(LayerGradcheck, Conv2dRectangularKernelStridePadding) {
  // 3x1 kernel, stride 2x1, padding 1x0: (7 + 2 - 3) / 2 + 1 = 4 rows, 5 columns.
  Harness h(grouped(5, {3, 1}, 1, {2, 1}, {1, 0}), Shape{2, 7, 5}, 2);
  EXPECT_EQ(h.out, (Shape{5, 4, 5}));
  EXPECT_EQ(h.layer->param_specs()[0].shape, (Shape{5, 2, 3, 1}));
  h.check(random_vector(2 * 2 * 35, 24));
}

TEST(LayerGradcheck, Conv2dGroupedDilatedRectangular) {
  // Everything at once: 2 groups, a 2x3 kernel dilated 2x1, stride 1x2, padding 1x2.
  Harness h(grouped(4, {2, 3}, 2, {1, 2}, {1, 2}, {2, 1}), Shape{4, 6, 7}, 2);
  // rows (6 + 2 - 3) / 1 + 1 = 6, columns (7 + 4 - 3) / 2 + 1 = 5
  EXPECT_EQ(h.out, (Shape{4, 6, 5}));
  h.check(random_vector(2 * 4 * 42, 25));
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

LayerSpec activation(const char* type, float slope = 0.01f) {
  LayerSpec s;
  s.type = type;
  s.slope = slope;
  return s;
}

// Values over [lo, hi) at least `gap` away from each kink, so that no finite-difference step
// crosses one.
std::vector<float> away_from(std::vector<float> kinks, std::size_t n, std::uint64_t seed, float lo,
                             float hi, float gap = 0.02f) {
  auto v = random_vector(n, seed, lo, hi);
  for (auto& x : v)
    for (float k : kinks)
      if (std::abs(x - k) < gap) x = k + (x < k ? -gap : gap);
  return v;
}

TEST(LayerGradcheck, Relu6) {
  Harness h(activation("relu6"), Shape{3, 4, 4}, 2);
  EXPECT_TRUE(h.layer->can_run_in_place());
  h.check(away_from({0.0f, 6.0f}, 96, 30, -3.0f, 9.0f), Mode::train, 5e-3f);
}

TEST(LayerGradcheck, LeakyRelu) {
  Harness h(activation("leaky_relu", 0.2f), Shape{3, 4, 4}, 2);
  EXPECT_TRUE(h.layer->can_run_in_place());
  h.check(away_from({0.0f}, 96, 31, -2.0f, 2.0f), Mode::train, 5e-3f);
}

TEST(LayerGradcheck, Gelu) {
  Harness h(activation("gelu"), Shape{5, 4}, 3);
  EXPECT_FALSE(h.layer->can_run_in_place());
  EXPECT_FALSE(h.layer->backward_reads_output());
  h.check(random_vector(60, 32, -4.0f, 4.0f));
}

TEST(LayerGradcheck, Silu) {
  Harness h(activation("silu"), Shape{5, 4}, 3);
  EXPECT_FALSE(h.layer->can_run_in_place());
  EXPECT_FALSE(h.layer->backward_reads_output());
  h.check(random_vector(60, 33, -6.0f, 6.0f));
}

// hardswish: smooth but for kinks at -3 and 3 (where its gradient jumps), which no
// finite-difference step may cross.
TEST(LayerGradcheck, Hardswish) {
  Harness h(activation("hardswish"), Shape{5, 4}, 3);
  EXPECT_FALSE(h.layer->can_run_in_place());
  EXPECT_FALSE(h.layer->backward_reads_output());
  h.check(away_from({-3.0f, 3.0f}, 60, 37, -5.0f, 5.0f), Mode::train, 5e-3f);
}

// The values themselves (a finite-difference check passes for any smooth function whose forward
// and backward agree, e.g. the tanh approximation of gelu): against the formulas in double
// precision, PyTorch's definitions, over [-8, 8] with the kinks themselves included.
TEST(ActivationValues, MatchPyTorchDefinitions) {
  auto be = backend::make_cpu_backend();
  const float slope = 0.05f;
  std::vector<float> x;
  for (int i = -1600; i <= 1600; ++i) x.push_back(static_cast<float>(i) / 200.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  struct Case {
    backend::Activation kind;
    const char* name;
    double (*f)(double x, double slope);
    double (*df)(double x, double slope);
  };
  // 1 / sqrt(2) and 1 / sqrt(2 pi)
  static constexpr double kInvSqrt2 = M_SQRT1_2, kInvSqrt2Pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;
  const Case cases[] = {
      {backend::Activation::relu, "relu", [](double v, double) { return v > 0 ? v : 0.0; },
       [](double v, double) { return v > 0 ? 1.0 : 0.0; }},
      {backend::Activation::relu6, "relu6",
       [](double v, double) { return std::min(std::max(v, 0.0), 6.0); },
       [](double v, double) { return v > 0 && v < 6 ? 1.0 : 0.0; }},
      {backend::Activation::leaky_relu, "leaky_relu",
       [](double v, double a) { return v > 0 ? v : a * v; },
       [](double v, double a) { return v > 0 ? 1.0 : a; }},
      {backend::Activation::gelu, "gelu",
       [](double v, double) { return 0.5 * v * (1.0 + std::erf(v * kInvSqrt2)); },
       [](double v, double) {
         return 0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
       }},
      {backend::Activation::silu, "silu", [](double v, double) { return v / (1.0 + std::exp(-v)); },
       [](double v, double) {
         const double sig = 1.0 / (1.0 + std::exp(-v));
         return sig * (1.0 + v * (1.0 - sig));
       }},
      // PyTorch's (vectorised CPU) gradient at the kinks: -1/2 at -3, 1 at 3.
      {backend::Activation::hardswish, "hardswish",
       [](double v, double) { return v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0; },
       [](double v, double) { return v < -3  ? 0.0
                                     : v < 3 ? v / 3.0 + 0.5
                                             : 1.0; }},
  };
  const auto dy = random_vector(x.size(), 34, 0.5f, 1.5f);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<float> y(x.size()), dx(x.size());
    be->activation_forward(c.kind, slope, n, x.data(), y.data());
    be->activation_backward(c.kind, slope, n, x.data(), y.data(), dy.data(), dx.data());
    // Errors in units of the allowance: 2e-6 of |value| plus 1e-6 absolute (8 ulp at 1; oneDNN's
    // erf and exp polynomials are off by up to 4e-7 here, the tanh approximation of gelu by
    // 5e-4). Reports the worst element.
    auto check = [&](const std::vector<float>& got, auto ref, const char* what) {
      double worst = 0;
      std::size_t at = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double r = ref(i), err = std::abs(got[i] - r) / (1e-6 + 2e-6 * std::abs(r));
        if (!(err <= worst)) worst = err, at = i;
      }
      EXPECT_LE(worst, 1.0) << what << " at x = " << x[at] << ": " << got[at] << ", reference "
                            << ref(at);
    };
    check(
        y, [&](std::size_t i) { return c.f(x[i], slope); }, "forward");
    check(
        dx, [&](std::size_t i) { return c.df(x[i], slope) * dy[i]; }, "backward");
  }
}

// The relu family in place (y over x, dx over dy) computes what it computes out of place.
TEST(ActivationValues, OutputBasedKindsRunInPlace) {
  auto be = backend::make_cpu_backend();
  for (auto kind :
       {backend::Activation::relu, backend::Activation::relu6, backend::Activation::leaky_relu}) {
    const auto x = random_vector(1000, 35, -3.0f, 9.0f), dy = random_vector(1000, 36);
    std::vector<float> y(1000), dx(1000);
    be->activation_forward(kind, 0.1f, 1000, x.data(), y.data());
    be->activation_backward(kind, 0.1f, 1000, nullptr, y.data(), dy.data(), dx.data());
    auto buf = x, grad = dy;
    be->activation_forward(kind, 0.1f, 1000, buf.data(), buf.data());
    be->activation_backward(kind, 0.1f, 1000, nullptr, buf.data(), grad.data(), grad.data());
    EXPECT_EQ(buf, y);
    EXPECT_EQ(grad, dx);
  }
}

TEST(LayerShapes, NegativeLeakySlopeIsRefused) {
  auto be = backend::make_cpu_backend();
  LayerSpec s = activation("leaky_relu", -0.1f);
  s.name = "act3";
  auto layer = make_layer(s, *be);
  try {
    const Shape in{4};
    layer->infer(std::span<const Shape>(&in, 1));
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("act3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("slope"), std::string::npos) << e.what();
  }
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

// The message of the ConfigError `spec` raises on `in`, or "" when it raises none.
std::string shape_error_of(LayerSpec spec, const Shape& in) {
  auto be = backend::make_cpu_backend();
  spec.name = "conv7";
  spec.line = 12;
  auto layer = make_layer(spec, *be);
  try {
    layer->infer(std::span<const Shape>(&in, 1));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, std::vector<std::string> parts) {
  parts.push_back("conv7");
  parts.push_back("line 12");
  for (const auto& p : parts) EXPECT_NE(message.find(p), std::string::npos) << message;
}

TEST(LayerShapes, ConvChannelsNotDivisibleByGroups) {
  expect_mentions(shape_error_of(grouped(6, 3, 2), Shape{3, 8, 8}), {"3 channels", "groups = 2"});
}

TEST(LayerShapes, ConvOutChannelsNotDivisibleByGroups) {
  expect_mentions(shape_error_of(grouped(10, 3, 4), Shape{8, 8, 8}),
                  {"out_channels = 10", "groups = 4"});
}

TEST(LayerShapes, DilatedKernelLargerThanPaddedInput) {
  // 3x3 at dilation 3 spans 7x7; the input padded by 1 is 6x6 (fine without the dilation).
  EXPECT_EQ(shape_error_of(grouped(2, 3, 1, 1, 1), Shape{1, 4, 4}), "");
  expect_mentions(shape_error_of(grouped(2, 3, 1, 1, 1, 3), Shape{1, 4, 4}),
                  {"kernel 3x3", "dilation 3x3", "spans 7x7", "padded input 6x6"});
}

TEST(LayerShapes, RectangularKernelLargerThanPaddedInput) {
  expect_mentions(shape_error_of(grouped(2, {1, 5}, 1), Shape{1, 4, 4}),
                  {"kernel 1x5", "padded input 4x4"});
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
