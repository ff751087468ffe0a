// The backend memory interface on the CPU backend: alloc/upload/download, the deferred loss, host
// mirrors, and the model and optimizer state that host code reads through them. The same code
// runs against device memory in cuda_model_test.cpp (where a GPU exists).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/rng.hpp"
#include "layer_spec_util.hpp"

namespace ddp::backend {
namespace {

TEST(BackendMemory, CpuAllocIsZeroedHostMemoryAndCopiesAreExact) {
  auto be = make_cpu_backend();
  Tensor t = be->alloc(Shape{3, 5});
  EXPECT_EQ(t.device(), Device::cpu);
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.data()[i], 0.0f);
  std::vector<float> src(15), back(15, -1.0f);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.25f - 1.0f;
  be->upload(src.data(), t.data(), src.size());
  be->download(t.data(), back.data(), back.size());
  EXPECT_EQ(back, src);
  be->synchronize();  // nothing to wait for; must not fail
}

TEST(BackendMemory, DeferredLossEqualsTheSumOfImmediateOnesAndResets) {
  auto be = make_cpu_backend();
  const std::int64_t n = 7, classes = 4;
  std::vector<float> logits(static_cast<std::size_t>(n * classes));
  CounterRng rng(42);
  for (auto& v : logits) v = 4.0f * rng.next_float() - 2.0f;
  std::vector<std::int32_t> labels = {0, 1, 2, 3, 3, 2, 1};
  std::vector<float> d1(logits.size()), d2(logits.size());
  double want_loss = 0.0;
  std::int64_t want_correct = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto r =
        be->softmax_xent(n, classes, logits.data(), labels.data(), 0.1f, 0.5f, d1.data());
    want_loss += r.loss_sum;
    want_correct += r.correct;
    be->softmax_xent_accumulate(n, classes, logits.data(), labels.data(), 0.1f, 0.5f, d2.data());
    EXPECT_EQ(d1, d2);  // the same gradient, written at once
  }
  const auto got = be->take_loss();
  EXPECT_DOUBLE_EQ(got.loss_sum, want_loss);
  EXPECT_EQ(got.correct, want_correct);
  EXPECT_GT(got.loss_sum, 0.0);
  const auto empty = be->take_loss();
  EXPECT_EQ(empty.loss_sum, 0.0);
  EXPECT_EQ(empty.correct, 0);
}

TEST(BackendMemory, CpuMirrorIsTheBufferItself) {
  auto be = make_cpu_backend();
  Mirrored m(*be, 10);
  EXPECT_TRUE(m.shared());
  EXPECT_EQ(m.host().data(), m.device().data());
  m.host_span()[3] = 2.5f;
  m.push();
  m.pull();
  EXPECT_EQ(m.device_span()[3], 2.5f);
}

using testutil::L;

TEST(BackendMemory, ModelNamedViewsAreTheHostMirrorsAndLayersComputeOnTheBackendBuffers) {
  auto be = make_cpu_backend();
  nn::Model m({L("conv2d", "conv1", 2, 3), L("batchnorm", "bn1"), L("relu", "r"), L("flatten", "f"),
               L("linear", "fc", 3)},
              Shape{1, 4, 4}, 3, *be);
  m.init_parameters(5);
  const float* host = m.host_params().data();
  for (const auto& p : m.named_params()) EXPECT_EQ(p.tensor.data(), host + p.offset) << p.name;
  for (const auto& b : m.named_buffers())
    EXPECT_EQ(b.tensor.data(), m.host_buffers().data() + b.offset) << b.name;
  // On the CPU, host mirror and backend buffer are one: what the optimizer changes is what a
  // snapshot reads, with no copy.
  EXPECT_EQ(m.params().data(), host);
  const std::uint64_t d0 = m.digest();
  m.host_params()[0] += 1.0f;
  m.push_state();
  EXPECT_NE(m.digest(), d0);
}

TEST(BackendMemory, OptimizerStateIsNamedAndMirrored) {
  auto be = make_cpu_backend();
  app::OptimConfig c;
  c.name = "adam";
  auto opt = optim::Optimizer::create(c, *be, 32);
  const auto state = opt->state();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "exp_avg");
  EXPECT_EQ(state[1].first, "exp_avg_sq");
  std::vector<float> w(32, 1.0f), g(32, 0.5f);
  opt->step(w, g, 0.1);
  opt->pull_state();
  // exp_avg = (1 - beta1) * g after one step.
  EXPECT_NEAR(opt->state()[0].second.data()[7], 0.1f * 0.5f, 1e-7f);
  c.name = "sgd";
  c.momentum = 0.0;
  EXPECT_TRUE(optim::Optimizer::create(c, *be, 32)->state().empty());
}

}  // namespace
}  // namespace ddp::backend
