// The moving average of the weights (train.ema): its updates against torch.lerp_ run by PyTorch
// on the same sequence of weights (tests/unit/recipe_torch.py), lookahead's copy back, the swap
// evaluation uses, the snapshot's /ema round trip and the eval.weights choice of a trained model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/rng.hpp"
#include "ddp/train/trained_model.hpp"
#include "ddp/train/weight_average.hpp"
#include "layer_spec_util.hpp"
#include "recipe_oracle.hpp"

namespace ddp::train {
namespace {

namespace fs = std::filesystem;
using testutil::L;

// conv -> batchnorm (buffers) -> relu -> flatten -> linear on 3 x 4 x 4.
std::vector<nn::LayerSpec> ema_net() {
  return {L("conv2d", "conv", 2, 3, 1), L("batchnorm", "bn"), L("relu", "r"), L("flatten", "f"),
          L("linear", "fc", 3)};
}

// Writes new "trained" values into every parameter and buffer (what a step would), from (seed, t).
void ema_set_state(nn::Model& m, std::uint64_t t) {
  // Through the named tensors: the flat buffers' alignment padding between them stays 0, as
  // training leaves it (a snapshot holds the tensors, not the padding).
  CounterRng rng(hash_words(31, t));
  for (const auto& p : m.named_params())
    for (std::int64_t i = 0; i < p.tensor.numel(); ++i)
      p.tensor.data()[i] = 2.0f * rng.next_float() - 1.0f;
  for (const auto& b : m.named_buffers())
    for (std::int64_t i = 0; i < b.tensor.numel(); ++i)
      b.tensor.data()[i] = rng.next_float() + 0.5f;
  m.push_state();
}

std::vector<float> ema_concat(std::span<const float> a, std::span<const float> b) {
  std::vector<float> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(WeightAverage, UpdatesMatchTorchLerp) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  auto be = backend::make_cpu_backend();
  nn::Model m(ema_net(), Shape{3, 4, 4}, 3, *be);
  Options opt;
  opt.ema = 0.8;
  opt.ema_every = 2;
  opt.ema_start = 3;
  opt.ema_ramp = 2.0;
  const std::int64_t steps = 17, total = 20;
  WeightAverage ema(opt, m, total);
  std::vector<float> seq;
  for (std::int64_t t = 1; t <= steps; ++t) {
    ema_set_state(m, static_cast<std::uint64_t>(t));
    const auto now = ema_concat(m.host_params(), m.host_buffers());
    seq.insert(seq.end(), now.begin(), now.end());
    EXPECT_EQ(ema.due(t), t > 3 && t % 2 == 0) << t;
    ema.after_step(t);
  }
  EXPECT_EQ(ema.updates(), 7);  // steps 4, 6, ..., 16
  EXPECT_DOUBLE_EQ(ema.decay_at(10), 0.8 * 0.8 * 0.25);
  const std::size_t count = m.host_params().size() + m.host_buffers().size();
  oracle.spec("steps = 17\ncount = " + std::to_string(count) +
              "\ndecay = 0.8\nevery = 2\nstart = 3\nramp = 2\ntotal = 20\n");
  oracle.write("seq.f32", seq);
  ASSERT_TRUE(oracle.run("ema"));
  EXPECT_EQ(oracle.text("updates.txt"), "7");
  ema.pull();
  const auto got = ema_concat(ema.host_params(), ema.host_buffers());
  const auto want = oracle.read<float>("ema.f32", count);
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_NEAR(got[i], want[i], 2e-7f * std::max(1.0f, std::abs(want[i]))) << i;
}

TEST(WeightAverage, LookaheadCopiesTheAverageIntoTheWeights) {
  auto be = backend::make_cpu_backend();
  nn::Model m(ema_net(), Shape{3, 4, 4}, 3, *be);
  Options opt;
  opt.ema = 0.5;
  opt.ema_mode = "lookahead";
  WeightAverage ema(opt, m, 10);
  ema_set_state(m, 1);
  ema.after_step(1);  // starts as a copy
  const auto first = ema_concat(m.host_params(), m.host_buffers());
  ema_set_state(m, 2);
  const auto second = ema_concat(m.host_params(), m.host_buffers());
  ema.after_step(2);  // average = lerp(first, second, 0.5), and the weights take it
  const auto now = ema_concat(m.host_params(), m.host_buffers());
  for (std::size_t i = 0; i < now.size(); ++i)
    ASSERT_FLOAT_EQ(now[i], 0.5f * (first[i] + second[i]));
  ema.pull();
  EXPECT_EQ(ema_concat(ema.host_params(), ema.host_buffers()), now);
}

TEST(WeightAverage, SwapExchangesWeightsAndAverage) {
  auto be = backend::make_cpu_backend();
  nn::Model m(ema_net(), Shape{3, 4, 4}, 3, *be);
  Options opt;
  opt.ema = 0.9;
  WeightAverage ema(opt, m, 10);
  ema_set_state(m, 1);
  ema.after_step(1);
  ema_set_state(m, 2);
  ema.after_step(2);
  const auto live = ema_concat(m.host_params(), m.host_buffers());
  ema.pull();
  const auto average = ema_concat(ema.host_params(), ema.host_buffers());
  ASSERT_NE(live, average);
  ema.swap_with_model();
  EXPECT_EQ(ema_concat(m.host_params(), m.host_buffers()), average);
  ema.swap_with_model();
  EXPECT_EQ(ema_concat(m.host_params(), m.host_buffers()), live);
  ema.pull();
  EXPECT_EQ(ema_concat(ema.host_params(), ema.host_buffers()), average);
}

TEST(WeightAverage, SnapshotKeepsItUnderEmaAndEvalWeightsChoosesIt) {
  data::test_util::TempDir dir;
  auto be = backend::make_cpu_backend();
  // The CIFAR-10 geometry (3 x 32 x 32, 10 classes), for TrainedModel.
  const std::vector<nn::LayerSpec> layers = {
      L("conv2d", "conv", 2, 3, 1), L("batchnorm", "bn"), L("relu", "r"),
      L("maxpool", "p", 0, 4),      L("flatten", "f"),    L("linear", "fc", 10)};
  nn::Model m(layers, Shape{3, 32, 32}, 10, *be);
  optim::Options oo;
  auto opt = optim::Optimizer::create(oo, *be, static_cast<std::int64_t>(m.params().size()));
  Options to;
  to.ema = 0.5;
  WeightAverage ema(to, m, 10);
  ema_set_state(m, 1);
  ema.after_step(1);
  ema_set_state(m, 2);
  ema.after_step(2);
  ema.pull();
  const auto average = ema_concat(ema.host_params(), ema.host_buffers());
  const auto live = ema_concat(m.host_params(), m.host_buffers());
  ckpt::SnapshotMeta meta;
  meta.config_toml = "x = 1\n";
  meta.ema_updates = ema.updates();
  const ckpt::AveragedWeights aw{ema.host_params(), ema.host_buffers()};
  const fs::path with = dir / "with.h5", without = dir / "without.h5";
  ckpt::write_snapshot(with, m, *opt, "sgd", meta, &aw);
  ckpt::SnapshotMeta plain_meta = meta;
  plain_meta.ema_updates = 0;  // what the checkpointer writes without an average
  ckpt::write_snapshot(without, m, *opt, "sgd", plain_meta);

  const ckpt::Snapshot s = ckpt::read_snapshot(with);
  EXPECT_EQ(s.meta.ema_updates, 2);
  EXPECT_EQ(s.ema.size(), s.model.size());
  std::vector<float> p(m.host_params().size()), b(m.host_buffers().size());
  ckpt::restore_average(s, m, p, b);
  EXPECT_EQ(ema_concat(p, b), average);
  EXPECT_NE(ckpt::inspect(with).find("/ema"), std::string::npos);
  const ckpt::Snapshot plain = ckpt::read_snapshot(without);
  EXPECT_TRUE(plain.ema.empty());
  EXPECT_EQ(plain.meta.ema_updates, 0);
  EXPECT_THROW(ckpt::restore_average(plain, m, p, b), ConfigError);

  ::ddp::train::Setup cfg;
  cfg.model.layers = layers;
  const auto weights = [&](const ckpt::Snapshot& snap, const std::string& choice) {
    cfg.eval.weights = choice;
    TrainedModel tm(cfg, snap);
    tm.model().pull_state();
    return ema_concat(tm.model().host_params(), tm.model().host_buffers());
  };
  EXPECT_EQ(weights(s, "auto"), average);
  EXPECT_EQ(weights(s, "ema"), average);
  EXPECT_EQ(weights(s, "live"), live);
  EXPECT_EQ(weights(plain, "auto"), live);
  try {
    weights(plain, "ema");
    ADD_FAILURE() << "eval.weights = ema on a snapshot without /ema was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no moving average"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddp::train
