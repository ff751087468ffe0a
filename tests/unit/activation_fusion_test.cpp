// A ReLU or ReLU6 folded into the batch norm below it (nn/activation_fusion.hpp): the CPU op with
// BatchNormGeom::activation computes bitwise what the op followed by the activation computes - in
// training, evaluation and sync batch norm's split passes, on plain and blocked layouts - and a
// model trains to bitwise the same logits and gradients with fusion on or off. The same for a ReLU
// or ReLU6 folded into the residual add below it. The plan folds only activations that run in
// place over a batch norm or an add.
#include "ddp/nn/activation_fusion.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/nn/model.hpp"
#include "gradcheck_util.hpp"
#include "layer_spec_util.hpp"

namespace ddp {
namespace {

using backend::Activation;
using testing::random_vector;
using testutil::L;
using testutil::reads;

struct Pass {
  std::vector<float> y, eval, dx, dgamma, dbeta, running_mean, running_var;
};

// One training forward and backward and one evaluation forward of a batch norm of c channels,
// with `act` fused into the op, or (fused = false) applied after it by the backend's activation
// kernels. split: sync batch norm's four calls instead of forward/backward.
Pass run_batch_norm(Activation act, bool fused, bool split, int block) {
  auto be = backend::make_cpu_backend();
  const std::int64_t n = 5, c = 16, h = 4, w = 3, size = n * c * h * w;
  backend::BatchNormGeom g;
  g.c = c;
  g.h = h;
  g.w = w;
  g.block = block;
  if (fused) g.activation = act;
  auto op = be->batch_norm(g);
  auto x = random_vector(static_cast<std::size_t>(size), 1, -2.0f, 3.0f);
  x[7] = x[8];  // a repeated value, and below pre-activations of exactly 0 and 6
  const auto dy = random_vector(static_cast<std::size_t>(size), 2);
  // gamma up to 4: ReLU6 clips a good part of the outputs at 6.
  auto gamma = random_vector(static_cast<std::size_t>(c), 3, 0.5f, 4.0f);
  const auto beta = random_vector(static_cast<std::size_t>(c), 4);
  gamma[0] = 0.0f;  // channel 0: every pre-activation is beta[0]...
  Pass r;
  r.running_mean.assign(c, 0.1f);
  r.running_var.assign(c, 0.9f);
  std::vector<float> b = beta;
  b[0] = 0.0f;  // ... which is exactly 0, the ReLU's kink
  b[1] = 6.0f;
  gamma[1] = 0.0f;  // channel 1: exactly 6, ReLU6's
  r.y.resize(x.size());
  if (split) {
    op->forward_sums(n, x.data());
    op->forward_apply(n, x.data(), gamma.data(), b.data(), r.running_mean.data(),
                      r.running_var.data(), r.y.data());
  } else {
    op->forward(n, x.data(), gamma.data(), b.data(), r.running_mean.data(), r.running_var.data(),
                r.y.data(), true);
  }
  if (!fused) be->activation_forward(act, 0.0f, size, r.y.data(), r.y.data());
  // A weight that changes between forward and backward leaves the mask forward's.
  for (auto& v : gamma) v *= 1.25f;
  std::vector<float> d = dy;  // the gradient reaching the batch norm's output
  if (!fused) be->activation_backward(act, 0.0f, size, nullptr, r.y.data(), d.data(), d.data());
  r.dx.resize(x.size());
  r.dgamma.resize(c);
  r.dbeta.resize(c);
  const float* grad = fused ? dy.data() : d.data();
  if (split) {
    op->backward_sums(n, x.data(), grad, r.dgamma.data(), r.dbeta.data());
    op->backward_apply(n, x.data(), grad, gamma.data(), r.dx.data());
  } else {
    op->backward(n, x.data(), grad, gamma.data(), r.dx.data(), r.dgamma.data(), r.dbeta.data());
  }
  r.eval.resize(x.size());
  op->forward(n, x.data(), gamma.data(), b.data(), r.running_mean.data(), r.running_var.data(),
              r.eval.data(), false);
  if (!fused) be->activation_forward(act, 0.0f, size, r.eval.data(), r.eval.data());
  return r;
}

struct FusionCase {
  Activation act;
  bool split;
  int block;
};

class FusedBatchNorm : public ::testing::TestWithParam<FusionCase> {};

TEST_P(FusedBatchNorm, IsBitwiseTheBatchNormThenTheActivation) {
  const FusionCase p = GetParam();
  const Pass fused = run_batch_norm(p.act, true, p.split, p.block);
  const Pass apart = run_batch_norm(p.act, false, p.split, p.block);
  EXPECT_EQ(fused.y, apart.y);
  EXPECT_EQ(fused.dx, apart.dx);
  EXPECT_EQ(fused.dgamma, apart.dgamma);
  EXPECT_EQ(fused.dbeta, apart.dbeta);
  EXPECT_EQ(fused.eval, apart.eval);
  EXPECT_EQ(fused.running_mean, apart.running_mean);
  EXPECT_EQ(fused.running_var, apart.running_var);
  // The activation did something: outputs at 0 (and at 6 for ReLU6), masked gradients.
  std::size_t zeros = 0, sixes = 0;
  for (float v : fused.y) {
    zeros += v == 0.0f;
    sixes += v == 6.0f;
  }
  EXPECT_GT(zeros, fused.y.size() / 5);
  if (p.act == Activation::relu6) EXPECT_GT(sixes, fused.y.size() / 50);
  // The kinks: channel 0's pre-activations are all exactly 0, channel 1's exactly 6 (ReLU6 passes
  // nothing there, ReLU everything).
  EXPECT_EQ(fused.dbeta[0], 0.0f);
  EXPECT_EQ(fused.dbeta[1] == 0.0f, p.act == Activation::relu6);
}

INSTANTIATE_TEST_SUITE_P(
    ReluAndRelu6, FusedBatchNorm,
    ::testing::Values(
        FusionCase{Activation::relu, false, 0}, FusionCase{Activation::relu6, false, 0},
        FusionCase{Activation::relu, true, 0}, FusionCase{Activation::relu6, true, 0},
        FusionCase{Activation::relu, false, 8}, FusionCase{Activation::relu6, true, 8},
        FusionCase{Activation::relu, true, 16}, FusionCase{Activation::relu6, false, 16}),
    [](const ::testing::TestParamInfo<FusionCase>& info) {
      return std::string(info.param.act == Activation::relu ? "Relu" : "Relu6") +
             (info.param.split ? "Split" : "") + "Block" + std::to_string(info.param.block);
    });

// The CPU's add_activation is bitwise add followed by the activation, at the kinks (sums of
// exactly 0 and 6, a negative zero) and for NaN and infinities; over an array large enough to
// take the threaded path as well as a small one.
TEST(FusedAdd, IsBitwiseTheAddThenTheActivation) {
  auto be = backend::make_cpu_backend();
  for (const Activation act : {Activation::relu, Activation::relu6}) {
    ASSERT_TRUE(be->add_fuses(act));
    for (const std::int64_t count : {std::int64_t{37}, std::int64_t{1} << 17}) {
      auto x = random_vector(static_cast<std::size_t>(count), 5, -8.0f, 8.0f);
      auto y = random_vector(static_cast<std::size_t>(count), 6, -8.0f, 8.0f);
      const float inf = std::numeric_limits<float>::infinity();
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const std::vector<std::pair<float, float>> edges{
          {1.5f, -1.5f}, {-0.0f, -0.0f}, {4.0f, 2.0f}, {6.0f, 0.0f}, {nan, 1.0f},
          {inf, 1.0f},   {-inf, 2.0f},   {inf, -inf},  {-3.0f, 9.0f}};
      for (std::size_t k = 0; k < edges.size(); ++k) std::tie(x[k], y[k]) = edges[k];
      std::vector<float> apart = y, fused = y;
      be->add(count, x.data(), apart.data());
      be->activation_forward(act, 0.0f, count, apart.data(), apart.data());
      be->add_activation(act, count, x.data(), fused.data());
      ASSERT_EQ(0, std::memcmp(apart.data(), fused.data(), apart.size() * sizeof(float)))
          << (act == Activation::relu ? "relu" : "relu6") << ", " << count << " floats";
    }
  }
  EXPECT_FALSE(be->add_fuses(Activation::leaky_relu));
  EXPECT_FALSE(be->add_fuses(Activation::gelu));
}

// Which activations the plan folds into the layer below.
TEST(ActivationFusion, FoldsOnlyActivationsRunningInPlaceOverABatchNormOrAnAdd) {
  auto be = backend::make_cpu_backend();
  nn::LayerSpec leaky = L("leaky_relu", "leaky");
  leaky.slope = 0.1f;
  nn::LayerSpec leaky2 = leaky;
  leaky2.name = "leaky2";
  const std::vector<nn::LayerSpec> specs{L("conv2d", "conv1", 8, 3, 1),
                                         L("batchnorm", "bn1"),
                                         L("relu", "relu1"),  // folded
                                         L("conv2d", "conv2", 8, 3, 1),
                                         L("batchnorm", "bn2"),
                                         reads(L("add", "sum"), {"bn2", "relu1"}),  // over bn2
                                         L("relu", "relu2"),  // folded into the add
                                         L("batchnorm", "bn3"),
                                         L("relu6", "relu6"),  // folded
                                         L("batchnorm", "bn4"),
                                         leaky,  // the batch norm fuses ReLU and ReLU6 only
                                         L("batchnorm", "bn5"),
                                         L("gelu", "gelu"),  // not in place
                                         L("batchnorm", "bn6"),
                                         L("relu", "relu3"),  // bn6 is read twice: not in place
                                         reads(L("add", "sum2"), {"relu3", "bn6"}),  // not either
                                         L("relu", "relu4"),  // folded into an add of its own
                                         L("conv2d", "conv3", 8, 3, 1),
                                         reads(L("add", "sum3"), {"conv3", "relu4"}),
                                         leaky2,  // in place; the add fuses ReLU and ReLU6 only
                                         L("conv2d", "conv4", 8, 3, 1),
                                         reads(L("add", "sum4"), {"conv4", "leaky2"}),
                                         L("relu", "relu5"),  // sum4 is read twice: not in place
                                         reads(L("add", "sum5"), {"relu5", "sum4"}),
                                         L("global_avgpool", "gap"),
                                         L("linear", "fc", 3)};
  std::vector<std::unique_ptr<nn::Layer>> layers;
  for (const auto& s : specs) layers.push_back(nn::make_layer(s, *be));
  const nn::GraphPlan plan = nn::plan_graph(layers, Shape{3, 6, 6});
  const std::vector<bool> fused = nn::fuse_activations(layers, plan);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const bool want = specs[i].name == "relu1" || specs[i].name == "relu2" ||
                      specs[i].name == "relu6" || specs[i].name == "relu4";
    EXPECT_EQ(fused[i], want) << specs[i].name;
  }

  // A backend that does not fuse (the GPU's, or the CPU's with fusion off) folds nothing.
  backend::set_fused_activations(false);
  auto plain_be = backend::make_cpu_backend();
  backend::set_fused_activations(true);
  std::vector<std::unique_ptr<nn::Layer>> plain;
  for (const auto& s : specs) plain.push_back(nn::make_layer(s, *plain_be));
  const std::vector<bool> none = nn::fuse_activations(plain, nn::plan_graph(plain, Shape{3, 6, 6}));
  EXPECT_EQ(none, std::vector<bool>(specs.size(), false));
}

// A model with fusion on or off: bitwise the same training logits, parameter gradients, running
// statistics after the step, and evaluation logits.
void expect_same_with_fusion(const std::vector<nn::LayerSpec>& specs, const Shape& in) {
  const std::int64_t n = 6, classes = 4;
  auto x = random_vector(static_cast<std::size_t>(in.numel() * n), 31);
  auto dl = random_vector(static_cast<std::size_t>(classes * n), 32);
  struct Result {
    std::vector<float> logits, grads, eval;
  };
  const auto run = [&](bool fuse) {
    backend::set_fused_activations(fuse);
    auto be = backend::make_cpu_backend();
    backend::set_fused_activations(true);
    nn::Model m(specs, in, classes, *be);
    m.init_parameters(7);
    const Tensor& y = m.forward(Tensor::view(x.data(), in.with_batch(n)),
                                nn::StepContext{nn::Mode::train, 1, nullptr});
    Result r{{y.data(), y.data() + y.numel()}, {}, {}};
    m.backward(Tensor::view(dl.data(), Shape{n, classes}));
    r.grads.assign(m.grads().begin(), m.grads().end());
    const Tensor& e = m.forward(Tensor::view(x.data(), in.with_batch(n)),
                                nn::StepContext{nn::Mode::eval, 1, nullptr});
    r.eval.assign(e.data(), e.data() + e.numel());
    return r;
  };
  const Result fused = run(true), apart = run(false);
  EXPECT_EQ(fused.logits, apart.logits);
  EXPECT_EQ(fused.grads, apart.grads);
  EXPECT_EQ(fused.eval, apart.eval);
}

// A ResNet basic block (its ReLUs folded: two into batch norms, the last into the add), in blocked
// layouts on a CPU that has them.
TEST(ActivationFusion, AResidualNetComputesTheSameFusedOrNot) {
  expect_same_with_fusion(
      {L("conv2d", "conv1", 16, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
       L("conv2d", "conv2", 16, 3, 1), L("batchnorm", "bn2"), L("relu", "relu2"),
       L("conv2d", "conv3", 16, 3, 1), L("batchnorm", "bn3"),
       reads(L("add", "sum"), {"bn3", "relu1"}), L("relu", "relu3"), L("global_avgpool", "gap"),
       L("linear", "fc", 4)},
      Shape{3, 8, 8});
}

// Adds of three inputs (in place over the second) and of one input twice (out of place), each
// with the activation after it folded (a ReLU6 and a ReLU).
TEST(ActivationFusion, ManyInputAddsComputeTheSameFusedOrNot) {
  expect_same_with_fusion(
      {L("conv2d", "c1", 8, 3, 1), L("batchnorm", "b1"), L("conv2d", "c2", 8, 3, 1),
       L("batchnorm", "b2"), reads(L("add", "s1"), {"b1", "b2", "c2"}), L("relu6", "a1"),
       reads(L("add", "s2"), {"a1", "a1"}), L("relu", "a2"), L("global_avgpool", "gap"),
       L("linear", "fc", 4)},
      Shape{3, 6, 6});
}

// A two-input add in place over its second input (the first is read three times), and one out of
// place whose inputs' gradients are sums over several readers, each with the ReLU after it folded.
TEST(ActivationFusion, AddsInPlaceOverTheSecondInputOrOutOfPlaceComputeTheSameFusedOrNot) {
  expect_same_with_fusion(
      {L("conv2d", "c1", 4, 3, 1), L("batchnorm", "b1"), L("relu", "r1"),
       L("conv2d", "c2", 4, 3, 1), L("batchnorm", "b2"), reads(L("add", "s1"), {"r1", "b2"}),
       L("relu", "r2"), reads(L("add", "s2"), {"r2", "r1"}), L("relu", "r3"),
       reads(L("add", "s3"), {"r3", "r2"}), L("global_avgpool", "gap"), L("linear", "fc", 4)},
      Shape{3, 5, 5});
}

// MobileNetV2's pattern: ReLU6 after batch norms, a depthwise convolution; features after a
// linear layer's batch norm (h = w = 1).
TEST(ActivationFusion, Relu6AndFeatureBatchNormsComputeTheSameFusedOrNot) {
  nn::LayerSpec dw = L("conv2d", "dw", 12, 3, 1);
  dw.groups = 12;
  expect_same_with_fusion(
      {L("conv2d", "expand", 12, 1, 0), L("batchnorm", "bn1"), L("relu6", "act1"), dw,
       L("batchnorm", "bn2"), L("relu6", "act2"), L("flatten", "flat"), L("linear", "fc1", 10),
       L("batchnorm", "bn3"), L("relu", "act3"), L("linear", "fc", 4)},
      Shape{3, 5, 5});
}

}  // namespace
}  // namespace ddp
