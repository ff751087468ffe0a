// Optimizers and schedules against PyTorch's update rules, computed by hand in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/nn/norm_and_bias.hpp"
#include "ddp/optim/lr_schedule.hpp"
#include "ddp/optim/optimizer.hpp"
#include "layer_spec_util.hpp"

namespace ddp::optim {
namespace {

struct Trajectory {
  std::vector<float> w{1.0f, -2.0f, 0.5f};
  std::vector<std::vector<float>> grads{
      {0.1f, 0.2f, -0.3f}, {0.3f, -0.1f, 0.0f}, {-0.2f, 0.4f, 0.1f}};
};

std::vector<float> run(const optim::Options& c, double lr) {
  auto be = backend::make_cpu_backend();
  Trajectory r;
  auto opt = Optimizer::create(c, *be, r.w.size());
  for (auto& g : r.grads) opt->step(r.w, g, lr);
  EXPECT_EQ(opt->steps_taken(), 3);
  return r.w;
}

TEST(Optimizer, SgdMomentumNesterovWeightDecay) {
  for (bool nesterov : {false, true}) {
    optim::Options c;
    c.name = "sgd";
    c.momentum = 0.9;
    c.nesterov = nesterov;
    c.weight_decay = 0.01;
    const auto got = run(c, 0.1);
    Trajectory r;
    for (std::size_t i = 0; i < 3; ++i) {
      double w = r.w[i], buf = 0;
      for (auto& g : r.grads) {
        const double d = g[i] + 0.01 * w;
        buf = 0.9 * buf + d;  // torch: buf = d on the first step, equal since buf starts at 0
        w -= 0.1 * (nesterov ? d + 0.9 * buf : buf);
      }
      EXPECT_NEAR(got[i], w, 1e-6) << "nesterov=" << nesterov << " i=" << i;
    }
  }
}

TEST(Optimizer, PlainSgd) {
  optim::Options c;
  const auto got = run(c, 0.5);
  Trajectory r;
  for (std::size_t i = 0; i < 3; ++i) {
    double w = r.w[i];
    for (auto& g : r.grads) w -= 0.5 * g[i];
    EXPECT_NEAR(got[i], w, 1e-6);
  }
}

TEST(Optimizer, AdamAndAdamW) {
  for (const char* name : {"adam", "adamw"}) {
    optim::Options c;
    c.name = name;
    c.weight_decay = 0.05;  // not 0.1: w=-2 would cancel the 0.2 gradient, an ill-posed case
    const auto got = run(c, 0.01);
    Trajectory r;
    const bool decoupled = std::string(name) == "adamw";
    for (std::size_t i = 0; i < 3; ++i) {
      double w = r.w[i], m = 0, v = 0;
      int t = 0;
      for (auto& gr : r.grads) {
        ++t;
        double g = gr[i];
        if (decoupled)
          w *= 1 - 0.01 * 0.05;
        else
          g += 0.05 * w;
        m = 0.9 * m + 0.1 * g;
        v = 0.999 * v + 0.001 * g * g;
        const double mhat = m / (1 - std::pow(0.9, t));
        const double denom = std::sqrt(v) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8;
        w -= 0.01 * mhat / denom;
      }
      EXPECT_NEAR(got[i], w, 2e-6) << name << " i=" << i;
    }
  }
}

// optim.no_decay_norm_bias on a real model's flat buffers: one step with zero gradients moves only
// what weight decay moves, so the exempt parameters (batch-norm weight and bias, every *.bias) stay
// bitwise as they were and every other one changes - for each optimizer, and nothing is exempt
// with the option off.
TEST(Optimizer, NoDecayNormBiasSkipsExactlyBatchNormParametersAndBiases) {
  using testutil::L;
  auto be = backend::make_cpu_backend();
  nn::Model model({L("conv2d", "conv1", 3, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
                   L("conv2d", "conv2", 2, 3, 1), L("flatten", "flat"), L("linear", "fc", 4)},
                  Shape{2, 5, 5}, 4, *be);
  model.init_parameters(7);
  const std::vector<std::string> exempt = {"conv1.bias", "bn1.weight", "bn1.bias", "conv2.bias",
                                           "fc.bias"};
  for (const char* name : {"sgd", "adam", "adamw"}) {
    for (bool option : {true, false}) {
      model.init_parameters(7);
      const std::vector<float> before(model.params().begin(), model.params().end());
      const std::vector<float> zero(before.size(), 0.0f);
      optim::Options c;
      c.name = name;
      c.momentum = 0.9;
      c.weight_decay = 0.1;
      c.no_decay_norm_bias = option;
      auto opt = Optimizer::create(c, *be, before.size(), nn::norm_and_bias_ranges(model));
      opt->step(model.params(), zero, 0.5);
      for (const auto& p : model.named_params()) {
        const bool skipped =
            option && std::find(exempt.begin(), exempt.end(), p.name) != exempt.end();
        for (std::int64_t i = 0; i < p.tensor.numel(); ++i) {
          const float was = before[p.offset + static_cast<std::size_t>(i)];
          if (skipped)
            ASSERT_EQ(p.tensor.data()[i], was) << name << " " << p.name << "[" << i << "]";
          else if (was != 0.0f)
            ASSERT_NE(p.tensor.data()[i], was)
                << name << " option " << option << " " << p.name << "[" << i << "] was not decayed";
        }
      }
    }
  }
}

TEST(Optimizer, NormAndBiasRangesCoverNeighboursAndPadding) {
  using testutil::L;
  auto be = backend::make_cpu_backend();
  nn::Model model({L("conv2d", "conv1", 3, 3, 1), L("batchnorm", "bn1"), L("flatten", "flat"),
                   L("linear", "fc", 4)},
                  Shape{1, 2, 2}, 4, *be);
  const auto offset = [&](const std::string& n) {
    for (const auto& p : model.named_params())
      if (p.name == n) return p.offset;
    ADD_FAILURE() << n;
    return std::size_t{0};
  };
  // conv1.bias, bn1.weight and bn1.bias lie side by side: one range up to fc.weight.
  const std::vector<std::pair<std::size_t, std::size_t>> want = {
      {offset("conv1.bias"), offset("fc.weight")}, {offset("fc.bias"), model.params().size()}};
  EXPECT_EQ(nn::norm_and_bias_ranges(model), want);
}

TEST(Optimizer, UnknownNameIsConfigError) {
  auto be = backend::make_cpu_backend();
  optim::Options c;
  c.name = "lamb";
  EXPECT_THROW(Optimizer::create(c, *be, 4), ConfigError);
}

TEST(Schedule, ConstantWithWarmup) {
  optim::ScheduleOptions s;
  s.warmup_epochs = 1;
  LrSchedule l(s, 0.1, 10, 5);
  EXPECT_DOUBLE_EQ(l.at(0), 0.0);
  EXPECT_DOUBLE_EQ(l.at(5), 0.05);
  EXPECT_DOUBLE_EQ(l.at(10), 0.1);
  EXPECT_DOUBLE_EQ(l.at(49), 0.1);
}

TEST(Schedule, StepDecay) {
  optim::ScheduleOptions s;
  s.name = "step";
  s.step_size = 2;
  s.gamma = 0.5;
  LrSchedule l(s, 0.8, 10, 6);
  EXPECT_DOUBLE_EQ(l.at(19), 0.8);
  EXPECT_DOUBLE_EQ(l.at(20), 0.4);
  EXPECT_DOUBLE_EQ(l.at(45), 0.2);
}

TEST(Schedule, CosineReachesMin) {
  optim::ScheduleOptions s;
  s.name = "cosine";
  s.min_lr = 0.001;
  LrSchedule l(s, 0.1, 10, 10);
  EXPECT_DOUBLE_EQ(l.at(0), 0.1);
  EXPECT_NEAR(l.at(50), (0.1 + 0.001) / 2, 1e-12);
  EXPECT_NEAR(l.at(100), 0.001, 1e-12);
}

TEST(Schedule, OneCycleMatchesTorchFormula) {
  // torch OneCycleLR(max_lr=1, total_steps=100, pct_start=0.3, div_factor=25, final_div=1e4):
  // phase ends at step 29 (0.3*100-1), lr there = max; last step 99 -> initial/1e4.
  optim::ScheduleOptions s;
  s.name = "onecycle";
  LrSchedule l(s, 1.0, 10, 10);
  EXPECT_NEAR(l.at(0), 1.0 / 25, 1e-12);
  EXPECT_NEAR(l.at(29), 1.0, 1e-12);
  EXPECT_NEAR(l.at(99), 1.0 / 25 / 1e4, 1e-12);
  const double pct = 10.0 / 29.0;
  EXPECT_NEAR(l.at(10), 1.0 + (0.04 - 1.0) / 2 * (std::cos(std::numbers::pi * pct) + 1), 1e-12);
}

TEST(Schedule, UnknownNameIsConfigError) {
  optim::ScheduleOptions s;
  s.name = "exp";
  EXPECT_THROW(LrSchedule(s, 0.1, 1, 1), ConfigError);
}

}  // namespace
}  // namespace ddp::optim
