// Blocked activation layouts on the CPU (nChw8c / nChw16c, backend::ConvGeom): convolution, batch
// norm and pooling on blocked memory compute what they compute on plain NCHW; the layout plan keeps
// residual chains blocked and everything a plain layer reads plain; and a whole model trains to
// the same logits and gradients with blocked layouts on or off.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/nn/layout_plan.hpp"
#include "ddp/nn/model.hpp"
#include "gradcheck_util.hpp"
#include "layer_spec_util.hpp"

namespace ddp {
namespace {

using testing::random_vector;
using testutil::L;
using testutil::reads;

// NCHW -> nChw<B>c and back.
std::vector<float> to_blocked(const std::vector<float>& x, std::int64_t n, std::int64_t c,
                              std::int64_t hw, int B) {
  std::vector<float> y(x.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p)
        y[static_cast<std::size_t>(((i * (c / B) + ch / B) * hw + p) * B + ch % B)] =
            x[static_cast<std::size_t>((i * c + ch) * hw + p)];
  return y;
}
std::vector<float> to_plain(const std::vector<float>& y, std::int64_t n, std::int64_t c,
                            std::int64_t hw, int B) {
  std::vector<float> x(y.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p)
        x[static_cast<std::size_t>((i * c + ch) * hw + p)] =
            y[static_cast<std::size_t>(((i * (c / B) + ch / B) * hw + p) * B + ch % B)];
  return x;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, float tol,
                     const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::abs(b[i]))) << what << " at " << i;
}

class BlockedLayout : public ::testing::TestWithParam<int> {};

TEST_P(BlockedLayout, BatchNormMatchesPlain) {
  const int B = GetParam();
  auto be = backend::make_cpu_backend();
  const std::int64_t n = 6, c = 32, h = 5, w = 3, hw = h * w, size = n * c * hw;
  backend::BatchNormGeom g;
  g.c = c;
  g.h = h;
  g.w = w;
  auto plain = be->batch_norm(g);
  g.block = B;
  auto blocked = be->batch_norm(g);
  const auto x = random_vector(static_cast<std::size_t>(size), 1, -2.0f, 3.0f);
  const auto dy = random_vector(static_cast<std::size_t>(size), 2);
  const auto gamma = random_vector(static_cast<std::size_t>(c), 3, 0.5f, 1.5f);
  const auto beta = random_vector(static_cast<std::size_t>(c), 4);
  std::vector<float> rm1(c, 0.1f), rv1(c, 0.9f), rm2 = rm1, rv2 = rv1;
  std::vector<float> y1(x.size()), y2(x.size()), dx1(x.size()), dx2(x.size());
  std::vector<float> dg1(c), db1(c), dg2(c), db2(c);
  const auto xb = to_blocked(x, n, c, hw, B), dyb = to_blocked(dy, n, c, hw, B);
  plain->forward(n, x.data(), gamma.data(), beta.data(), rm1.data(), rv1.data(), y1.data(), true);
  blocked->forward(n, xb.data(), gamma.data(), beta.data(), rm2.data(), rv2.data(), y2.data(),
                   true);
  expect_near_all(to_plain(y2, n, c, hw, B), y1, 1e-5f, "training output");
  expect_near_all(rm2, rm1, 1e-6f, "running mean");
  expect_near_all(rv2, rv1, 1e-6f, "running variance");
  plain->backward(n, x.data(), dy.data(), gamma.data(), dx1.data(), dg1.data(), db1.data());
  blocked->backward(n, xb.data(), dyb.data(), gamma.data(), dx2.data(), dg2.data(), db2.data());
  expect_near_all(to_plain(dx2, n, c, hw, B), dx1, 1e-5f, "input gradient");
  expect_near_all(dg2, dg1, 1e-5f, "weight gradient");
  expect_near_all(db2, db1, 1e-5f, "bias gradient");
  plain->forward(n, x.data(), gamma.data(), beta.data(), rm1.data(), rv1.data(), y1.data(), false);
  blocked->forward(n, xb.data(), gamma.data(), beta.data(), rm2.data(), rv2.data(), y2.data(),
                   false);
  expect_near_all(to_plain(y2, n, c, hw, B), y1, 1e-6f, "evaluation output");
}

TEST_P(BlockedLayout, ConvolutionAndPoolingMatchPlain) {
  const int B = GetParam();
  auto be = backend::make_cpu_backend();
  const std::int64_t n = 5, c = 16, k = 32, h = 7, w = 6;
  backend::ConvGeom g;
  g.c = c;
  g.h = h;
  g.w = w;
  g.k = k;
  g.r = g.s = 3;
  g.pad_h = g.pad_w = 1;
  g.stride_h = 2;
  g.oh = 4;
  g.ow = 6;
  auto plain = be->conv(g);
  g.src_block = g.dst_block = B;
  auto blocked = be->conv(g);
  const std::int64_t in = n * c * h * w, out = n * k * g.oh * g.ow, wn = k * c * 9;
  const auto x = random_vector(static_cast<std::size_t>(in), 5);
  const auto wt = random_vector(static_cast<std::size_t>(wn), 6);
  const auto bias = random_vector(static_cast<std::size_t>(k), 7);
  const auto dy = random_vector(static_cast<std::size_t>(out), 8);
  std::vector<float> y1(out), y2(out), dx1(in), dx2(in), dw1(wn), dw2(wn), db1(k), db2(k);
  const auto xb = to_blocked(x, n, c, h * w, B);
  const auto dyb = to_blocked(dy, n, k, g.oh * g.ow, B);
  plain->forward(n, x.data(), wt.data(), bias.data(), y1.data());
  blocked->forward(n, xb.data(), wt.data(), bias.data(), y2.data());
  expect_near_all(to_plain(y2, n, k, g.oh * g.ow, B), y1, 1e-5f, "convolution output");
  plain->backward(n, x.data(), wt.data(), dy.data(), dx1.data(), dw1.data(), db1.data());
  blocked->backward(n, xb.data(), wt.data(), dyb.data(), dx2.data(), dw2.data(), db2.data());
  expect_near_all(to_plain(dx2, n, c, h * w, B), dx1, 1e-5f, "convolution input gradient");
  expect_near_all(dw2, dw1, 1e-5f, "convolution weight gradient");
  expect_near_all(db2, db1, 1e-5f, "convolution bias gradient");

  backend::PoolGeom pg;
  pg.c = c;
  pg.h = h;  // 7: the last row is dropped (floor mode)
  pg.w = w;
  pg.oh = 3;
  pg.ow = 3;
  auto pool = be->pool(pg);  // 2x2 stride 2: the written-out plain kernel
  pg.block = B;
  auto bpool = be->pool(pg);  // oneDNN's, on blocked memory
  const std::int64_t pout = n * c * 9;
  std::vector<float> p1(pout), p2(pout), pdx1(in), pdx2(in);
  const auto pdy = random_vector(static_cast<std::size_t>(pout), 9);
  const auto pdyb = to_blocked(pdy, n, c, 9, B);
  pool->forward(n, x.data(), p1.data(), true);
  bpool->forward(n, xb.data(), p2.data(), true);
  expect_near_all(to_plain(p2, n, c, 9, B), p1, 0.0f, "max pooling output");
  pool->backward(n, pdy.data(), pdx1.data());
  bpool->backward(n, pdyb.data(), pdx2.data());
  expect_near_all(to_plain(pdx2, n, c, h * w, B), pdx1, 0.0f, "max pooling input gradient");

  // 3x3 stride 2 padding 1: oneDNN's pooling, on plain and on blocked memory.
  pg.kh = pg.kw = 3;
  pg.pad_h = pg.pad_w = 1;
  pg.oh = 4;
  pg.ow = 3;
  pg.block = 0;
  auto pool3 = be->pool(pg);
  pg.block = B;
  auto bpool3 = be->pool(pg);
  const std::int64_t p3 = n * c * 12;
  std::vector<float> q1(p3), q2(p3);
  const auto qdy = random_vector(static_cast<std::size_t>(p3), 10);
  const auto qdyb = to_blocked(qdy, n, c, 12, B);
  pool3->forward(n, x.data(), q1.data(), true);
  bpool3->forward(n, xb.data(), q2.data(), true);
  expect_near_all(to_plain(q2, n, c, 12, B), q1, 0.0f, "3x3 max pooling output");
  pool3->backward(n, qdy.data(), pdx1.data());
  bpool3->backward(n, qdyb.data(), pdx2.data());
  expect_near_all(to_plain(pdx2, n, c, h * w, B), pdx1, 0.0f, "3x3 max pooling input gradient");
}

INSTANTIATE_TEST_SUITE_P(Blocks, BlockedLayout, ::testing::Values(8, 16));

// The plan: a residual chain stays blocked from the stem's output to the global pooling; the
// stem's input, a 12-channel activation, what flatten and concat read, and the logits stay plain.
TEST(LayoutPlan, KeepsResidualChainsBlockedAndPlainReadersPlain) {
  auto be = backend::make_cpu_backend();
  const std::vector<nn::LayerSpec> specs = {
      L("conv2d", "stem", 16, 3, 1),                   // 0 blocked
      L("batchnorm", "bn"),                            // 1 blocked
      L("relu", "relu"),                               // 2 blocked
      L("conv2d", "branch", 16, 3, 1),                 // 3 blocked
      reads(L("add", "sum"), {"branch", "relu"}),      // 4 blocked
      L("maxpool", "pool", 0, 2),                      // 5 blocked
      L("conv2d", "odd", 12, 1, 0),                    // 6 plain: 12 channels
      reads(L("conv2d", "wide", 16, 1, 0), {"pool"}),  // 7 plain: concat reads it
      reads(L("concat", "cat"), {"odd", "wide"}),      // 8 plain
      L("conv2d", "mix", 32, 1, 0),                    // 9 blocked
      L("global_avgpool", "gap"),                      // 10 plain (N x C)
      L("linear", "fc", 3)};                           // 11 plain (logits)
  std::vector<std::unique_ptr<nn::Layer>> layers;
  for (const auto& s : specs) layers.push_back(nn::make_layer(s, *be));
  const nn::GraphPlan plan = nn::plan_graph(layers, Shape{3, 8, 8});
  const auto blocks = nn::plan_layouts(layers, plan, 8);
  EXPECT_EQ(blocks, (std::vector<int>{8, 8, 8, 8, 8, 8, 0, 0, 0, 8, 0, 0}));
  EXPECT_EQ(nn::plan_layouts(layers, plan, 0), std::vector<int>(12, 0)) << "no blocked layout";
  // A ReLU over the model input keeps it plain, and with it the conv reading that ReLU's output
  // reads plain.
  std::vector<std::unique_ptr<nn::Layer>> first;
  for (const auto& s :
       {L("relu", "r"), L("conv2d", "c", 8, 3, 1), L("global_avgpool", "g"), L("linear", "fc", 2)})
    first.push_back(nn::make_layer(s, *be));
  const nn::GraphPlan p2 = nn::plan_graph(first, Shape{8, 4, 4});
  EXPECT_EQ(nn::plan_layouts(first, p2, 8), (std::vector<int>{0, 8, 0, 0}));
}

// Blocked layouts on or off, a model computes the same logits (training and evaluation) and
// parameter gradients (only the batch norm sums' order differs).
void expect_same_with_blocked_layouts(const std::vector<nn::LayerSpec>& specs, const Shape& in) {
  const std::int64_t n = 7, classes = 5;
  auto x = random_vector(static_cast<std::size_t>(in.numel() * n), 21);
  auto dl = random_vector(static_cast<std::size_t>(classes * n), 22);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = 100 + i;  // dropout
  struct Result {
    std::vector<float> logits, grads, eval;
  };
  const auto run = [&](bool blocked) {
    backend::set_blocked_activations(blocked);
    auto be = backend::make_cpu_backend();
    backend::set_blocked_activations(true);
    if (blocked && be->activation_block() == 0) return Result{};
    nn::Model m(specs, in, classes, *be);
    m.init_parameters(3);
    const Tensor& y = m.forward(Tensor::view(x.data(), in.with_batch(n)),
                                nn::StepContext{nn::Mode::train, 1, ids.data()});
    Result r{{y.data(), y.data() + y.numel()}, {}, {}};
    m.backward(Tensor::view(dl.data(), Shape{n, classes}));
    r.grads.assign(m.grads().begin(), m.grads().end());
    const Tensor& e = m.forward(Tensor::view(x.data(), in.with_batch(n)),
                                nn::StepContext{nn::Mode::eval, 1, ids.data()});
    r.eval.assign(e.data(), e.data() + e.numel());
    return r;
  };
  const Result plain = run(false), blocked = run(true);
  if (blocked.logits.empty()) GTEST_SKIP() << "this CPU has no blocked layout (below AVX2)";
  expect_near_all(blocked.logits, plain.logits, 1e-5f, "training logits");
  expect_near_all(blocked.grads, plain.grads, 1e-4f, "parameter gradients");
  expect_near_all(blocked.eval, plain.eval, 1e-5f, "evaluation logits");
}

// A BN ResNet: residual adds, max pooling, global pooling.
TEST(LayoutPlan, AResidualNetComputesTheSameWithBlockedLayouts) {
  expect_same_with_blocked_layouts(
      {L("conv2d", "conv1", 16, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
       L("conv2d", "conv2", 16, 3, 1), L("batchnorm", "bn2"),
       reads(L("add", "sum"), {"bn2", "relu1"}), L("relu", "relu2"), L("maxpool", "pool", 0, 2),
       L("conv2d", "down", 32, 3, 1), L("batchnorm", "bn3"), L("relu", "relu3"),
       L("global_avgpool", "gap"), L("linear", "fc", 5)},
      Shape{3, 8, 8});
}

// A VGG-BN net with a concat branch: blocked between the convolutions, plain where concat,
// flatten, dropout and linear read.
TEST(LayoutPlan, AVggNetWithConcatAndDropoutComputesTheSameWithBlockedLayouts) {
  nn::LayerSpec drop = L("dropout", "drop");
  drop.p = 0.3f;
  expect_same_with_blocked_layouts(
      {L("conv2d", "conv1", 16, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
       L("maxpool", "pool1", 0, 2), L("conv2d", "conv2", 32, 3, 1), L("relu", "relu2"),
       reads(L("conv2d", "side", 8, 1, 0), {"pool1"}), reads(L("concat", "cat"), {"relu2", "side"}),
       L("maxpool", "pool2", 0, 2), L("flatten", "flat"), drop, L("linear", "fc1", 16),
       L("relu", "relu3"), L("linear", "fc", 5)},
      Shape{3, 8, 8});
}

}  // namespace
}  // namespace ddp
