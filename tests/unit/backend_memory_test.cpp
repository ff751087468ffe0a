// The backend memory interface on the CPU backend: alloc/upload/download, the deferred loss, host
// mirrors, and the model and optimizer state that host code reads through them. The same code
// runs against device memory in cuda_model_test.cpp (where a GPU exists).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/backend/mirrored.hpp"
#include "ddp/ckpt/snapshot.hpp"
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
  optim::Options c;
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

// The CPU backend's kernels on memory that host code must not use in place - what a GPU backend
// is to the model, the optimizer and snapshots - so that the mirrors' pull/push paths run here:
// a missing pull writes stale weights into a snapshot, a missing push trains on the old ones.
class SeparateMemoryBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu; }
  std::string name() const override { return "cpu with separate memory (test)"; }
  bool host_addressable() const override { return false; }
  std::unique_ptr<ConvOp> conv(const ConvGeom& g) override { return cpu_->conv(g); }
  std::unique_ptr<PoolOp> pool(const PoolGeom& g) override { return cpu_->pool(g); }
  std::unique_ptr<LinearOp> linear(const LinearGeom& g) override { return cpu_->linear(g); }
  std::unique_ptr<BatchNormOp> batch_norm(const BatchNormGeom& g) override {
    return cpu_->batch_norm(g);
  }
  void activation_forward(Activation k, float a, std::int64_t c, const float* x,
                          float* y) override {
    cpu_->activation_forward(k, a, c, x, y);
  }
  void activation_backward(Activation k, float a, std::int64_t c, const float* x, const float* y,
                           const float* dy, float* dx) override {
    cpu_->activation_backward(k, a, c, x, y, dy, dx);
  }
  void dropout_forward(std::int64_t n, std::int64_t per, float p, std::uint64_t seed,
                       const std::int64_t* ids, const float* x, float* mask, float* y) override {
    cpu_->dropout_forward(n, per, p, seed, ids, x, mask, y);
  }
  void mul(std::int64_t c, const float* a, const float* b, float* y) override {
    cpu_->mul(c, a, b, y);
  }
  LossResult softmax_xent(std::int64_t n, std::int64_t k, const float* logits,
                          const std::int32_t* labels, float ls, float gs, float* d) override {
    return cpu_->softmax_xent(n, k, logits, labels, ls, gs, d);
  }
  void sgd_step(std::int64_t c, const SgdHyper& h, float* w, const float* g, float* m) override {
    cpu_->sgd_step(c, h, w, g, m);
  }
  void adam_step(std::int64_t c, const AdamHyper& h, float* w, const float* g, float* m,
                 float* v) override {
    cpu_->adam_step(c, h, w, g, m, v);
  }
  void fill(std::int64_t c, float v, float* y) override { cpu_->fill(c, v, y); }
  void copy(std::int64_t c, const float* x, float* y) override { cpu_->copy(c, x, y); }
  void add(std::int64_t c, const float* x, float* y) override { cpu_->add(c, x, y); }
  void lerp(std::int64_t c, const float* x, float wt, float* y) override {
    cpu_->lerp(c, x, wt, y);
  }
  void image_view(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t dy,
                  std::int64_t dx, bool flip, const float* x, float* y) override {
    cpu_->image_view(n, c, h, w, dy, dx, flip, x, y);
  }
  void copy_rows(std::int64_t r, std::int64_t c, const float* x, std::int64_t xp, float* y,
                 std::int64_t yp) override {
    cpu_->copy_rows(r, c, x, xp, y, yp);
  }
  bool unscale_check(std::int64_t c, float* g, float s) override {
    return cpu_->unscale_check(c, g, s);
  }
  const std::uint32_t* unscale_flag(std::int64_t c, float* g, float s, int slot) override {
    return cpu_->unscale_flag(c, g, s, slot);
  }
  bool overflow_seen(int slot) override { return cpu_->overflow_seen(slot); }

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

std::vector<nn::LayerSpec> bn_net() {
  return {L("conv2d", "conv1", 4, 3), L("batchnorm", "bn1"), L("relu", "r1"),
          L("maxpool", "p1", 0, 2),   L("flatten", "f"),     L("linear", "fc", 3)};
}

// Two SGD steps with momentum on fixed data; the loss gradient of the mean over the batch.
void train_steps(nn::Model& m, optim::Optimizer& opt, int first, int steps) {
  Backend& be = m.backend();
  const std::int64_t n = 8;
  for (int s = first; s < first + steps; ++s) {
    CounterRng rng(hash_words(17, static_cast<std::uint64_t>(s)));
    std::vector<float> x(static_cast<std::size_t>(n * 2 * 6 * 6));
    for (auto& v : x) v = 2.0f * rng.next_float() - 1.0f;
    std::vector<std::int32_t> y(static_cast<std::size_t>(n));
    for (auto& v : y) v = static_cast<std::int32_t>(rng.next_below(3));
    const Tensor xd = be.alloc(Shape{n, 2, 6, 6});
    be.upload(x.data(), xd.data(), x.size());
    const Tensor dl = be.alloc(Shape{n, 3});
    const Tensor& z = m.forward(xd, nn::StepContext{});
    be.softmax_xent_accumulate(n, 3, z.data(), y.data(), 0.0f, 1.0f / static_cast<float>(n),
                               dl.data());
    m.backward(dl);
    opt.step(m.params(), m.grads(), 0.1);
  }
  (void)be.take_loss();
}

optim::Options momentum() {
  optim::Options c;
  c.momentum = 0.9;
  return c;
}

// The same training on host-addressable and on separate memory gives the same bits; a snapshot
// written from separate memory restores into host memory and back, bitwise, and training goes on
// identically from either.
TEST(BackendMemory, SnapshotsRoundTripThroughHostMirrors) {
  auto cpu = make_cpu_backend();
  SeparateMemoryBackend sep;
  nn::Model a(bn_net(), Shape{2, 6, 6}, 3, *cpu), b(bn_net(), Shape{2, 6, 6}, 3, sep);
  a.init_parameters(9);
  b.init_parameters(9);
  EXPECT_NE(b.params().data(), b.host_params().data());  // really two copies
  auto oa = optim::Optimizer::create(momentum(), *cpu, a.params().size());
  auto ob = optim::Optimizer::create(momentum(), sep, b.params().size());
  train_steps(a, *oa, 0, 2);
  train_steps(b, *ob, 0, 2);
  EXPECT_EQ(a.digest(), b.digest());  // digest pulls: the mirrors are current

  const auto dir =
      std::filesystem::temp_directory_path() / ("ddp_mirror_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ckpt::SnapshotMeta meta;
  ckpt::write_snapshot(dir / "sep.h5", b, *ob, "sgd", meta);
  nn::Model c(bn_net(), Shape{2, 6, 6}, 3, *cpu);
  auto oc = optim::Optimizer::create(momentum(), *cpu, c.params().size());
  ckpt::restore(ckpt::read_snapshot(dir / "sep.h5"), c, *oc);
  EXPECT_EQ(c.digest(), a.digest());

  ckpt::write_snapshot(dir / "cpu.h5", a, *oa, "sgd", meta);
  nn::Model d(bn_net(), Shape{2, 6, 6}, 3, sep);
  auto od = optim::Optimizer::create(momentum(), sep, d.params().size());
  ckpt::restore(ckpt::read_snapshot(dir / "cpu.h5"), d, *od);  // pushes into separate memory
  train_steps(a, *oa, 2, 2);
  train_steps(c, *oc, 2, 2);
  train_steps(d, *od, 2, 2);
  EXPECT_EQ(c.digest(), a.digest());
  EXPECT_EQ(d.digest(), a.digest());  // momentum too, or the steps would differ
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddp::backend
