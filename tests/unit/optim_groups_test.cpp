// Parameter groups ([[optim.groups]]) and frozen parameters in the optimizer: the patterns that
// select parameters, the update runs, and steps against torch.optim with the same param_groups.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/nn/norm_and_bias.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/optim/param_groups.hpp"
#include "ddp/optim/param_pattern.hpp"
#include "layer_spec_util.hpp"

namespace ddp::optim {
namespace {

// A flat buffer of 18 floats without padding, as six parameters of a conv / batch norm / fc net.
std::vector<ParamInfo> toy_params() {
  return {{"conv1.weight", "conv2d", 0, 4},  {"conv1.bias", "conv2d", 4, 6},
          {"bn1.weight", "batchnorm", 6, 8}, {"bn1.bias", "batchnorm", 8, 10},
          {"fc.weight", "linear", 10, 16},   {"fc.bias", "linear", 16, 18}};
}

GroupOptions group(std::vector<std::string> match, double lr_mult,
                   std::optional<double> weight_decay = std::nullopt) {
  GroupOptions g;
  g.match = std::move(match);
  g.lr_mult = lr_mult;
  g.weight_decay = weight_decay;
  return g;
}

TEST(ParamPattern, NamesPrefixesGlobsAndKinds) {
  const ParamInfo conv{"layer1.0.conv1.weight", "conv2d", 0, 1};
  const ParamInfo bn{"layer1.0.bn1.bias", "batchnorm", 0, 1};
  const ParamInfo fc{"fc.weight", "linear", 0, 1};
  const ParamInfo l10{"layer10.conv.weight", "conv2d", 0, 1};
  EXPECT_TRUE(matches("layer1", conv));
  EXPECT_TRUE(matches("layer1.0", conv));
  EXPECT_FALSE(matches("layer1", l10));  // a prefix ends at a dot
  EXPECT_FALSE(matches("layer1.0.conv", conv));
  EXPECT_TRUE(matches("layer1.0.conv1.weight", conv));
  EXPECT_TRUE(matches("fc", fc));
  EXPECT_TRUE(matches("fc.*", fc));
  EXPECT_FALSE(matches("fc.*", conv));
  EXPECT_TRUE(matches("*.bias", bn));
  EXPECT_FALSE(matches("*.bias", fc));
  EXPECT_TRUE(matches("layer?.0.bn?.bias", bn));
  EXPECT_TRUE(matches("*bn1*", bn));
  EXPECT_TRUE(matches("bn", bn));
  EXPECT_TRUE(matches("batchnorm", bn));
  EXPECT_FALSE(matches("bn", conv));
  EXPECT_TRUE(matches("conv", conv));
  EXPECT_TRUE(matches("linear", fc));
  EXPECT_FALSE(matches("", fc));
}

TEST(ParamPattern, APatternThatMatchesNothingIsNamed) {
  const auto params = toy_params();
  const auto hit = select({"fc", "bn"}, params, "train.freeze");
  EXPECT_EQ(hit, (std::vector<bool>{false, false, true, true, true, true}));
  try {
    select({"fc", "fcc.*", "layer9"}, params, "train.freeze");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train.freeze: 'fcc.*', 'layer9' match no parameter"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("conv1.weight"), std::string::npos) << msg;  // what there is
    EXPECT_EQ(msg.find("'fc'"), std::string::npos) << msg;
  }
}

TEST(ParamGroups, FirstMatchingGroupWinsAndAdjacentRunsMerge) {
  Options c;
  c.weight_decay = 0.01;
  c.groups = {group({"fc.*"}, 10.0, 0.0), group({"bn"}, 1.0, 0.0), group({"*.bias"}, 2.0)};
  const auto runs = plan_update_runs(c, toy_params());
  const std::vector<UpdateRun> want = {{0, 4, 1.0, 0.01, 0},
                                       {4, 6, 2.0, 0.01, 4},      // conv1.bias: *.bias
                                       {6, 10, 1.0, 0.0, 6},      // bn1: bn before *.bias
                                       {10, 18, 10.0, 0.0, 10}};  // fc.*: weight and bias
  EXPECT_EQ(runs, want);
}

TEST(ParamGroups, NoDecayNormBiasAppliesWhereNoGroupSetsWeightDecay) {
  Options c;
  c.weight_decay = 0.1;
  c.no_decay_norm_bias = true;
  c.groups = {group({"fc.bias"}, 3.0, 0.5), group({"conv1.bias"}, 1.0)};
  const auto runs = plan_update_runs(c, toy_params());
  const std::vector<UpdateRun> want = {
      {0, 4, 1.0, 0.1, 0}, {4, 10, 1.0, 0.0, 4}, {10, 16, 1.0, 0.1, 10}, {16, 18, 3.0, 0.5, 16}};
  EXPECT_EQ(runs, want);
}

TEST(ParamGroups, FrozenParametersAreInNoRunAndStateIsPacked) {
  Options c;
  c.weight_decay = 0.01;
  auto params = toy_params();
  for (int i = 0; i < 4; ++i) params[static_cast<std::size_t>(i)].frozen = true;  // conv1, bn1
  c.groups = {group({"bn"}, 5.0)};  // matches frozen parameters only: still a valid group
  const auto runs = plan_update_runs(c, params);
  ASSERT_EQ(runs, (std::vector<UpdateRun>{{10, 18, 1.0, 0.01, 0}}));

  auto be = backend::make_cpu_backend();
  c.momentum = 0.9;
  auto opt = Optimizer::create(c, *be, runs);
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_EQ(opt->state()[0].second.numel(), 8);  // state for fc only
  EXPECT_FALSE(opt->state_offset(0));
  EXPECT_FALSE(opt->state_offset(9));
  EXPECT_EQ(opt->state_offset(10), std::optional<std::size_t>(0));
  EXPECT_EQ(opt->state_offset(17), std::optional<std::size_t>(7));
  EXPECT_FALSE(opt->state_offset(18));

  std::vector<float> w(18), g(18, 0.5f);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  const auto before = w;
  opt->step(w, g, 0.1);
  opt->step(w, g, 0.1);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(w[i], before[i]) << i;  // bitwise untouched
  for (std::size_t i = 10; i < 18; ++i) EXPECT_NE(w[i], before[i]) << i;
}

TEST(ParamGroups, AGroupThatMatchesNothingIsAnError) {
  Options c;
  c.groups = {group({"fc.*"}, 2.0), group({"head.*"}, 2.0)};
  c.groups[1].line = 12;
  try {
    plan_update_runs(c, toy_params());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optim.groups[2] (line 12): 'head.*' matches no "
                                         "parameter"),
              std::string::npos)
        << e.what();
  }
}

// torch 1.13's torch.optim.SGD / Adam / AdamW with four param groups over the toy's parameters
// (fc.*: lr x10 and no weight decay; bn: no weight decay; *.bias: lr x2; the rest the defaults:
// lr 0.1, weight decay 0.01, momentum 0.9 for SGD), two steps at base learning rates 0.1 and 0.05
// (each group's lr = its factor x the base, as a schedule scales every group), on these weights
// and gradients, in float32: the numbers tests/unit/optim_groups_torch.py prints.
struct TorchCase {
  const char* name;
  bool nesterov;
  std::vector<float> want;
};

std::vector<float> toy_weights() {
  std::vector<float> w;
  for (int i = 0; i < 18; ++i) w.push_back(static_cast<float>(0.1 * (i + 1) * (i % 2 ? -1 : 1)));
  return w;
}

TEST(ParamGroups, TwoStepsEqualTorchOptimWithTheSameParamGroups) {
  const std::vector<TorchCase> cases = {
      {"sgd",
       false,
       {0.116550058f, -0.2018601f, 0.284170151f, -0.391222715f, 0.488060981f, -0.573181212f,
        0.699249983f, -0.813750029f, 0.909499943f, -1.00950003f, 1.23750007f, -1.1925f, 1.17749989f,
        -1.35000002f, 1.42000008f, -1.44749999f, 1.72250009f, -1.96749997f}},
      {"sgd",
       true,
       {0.126981631f, -0.203624368f, 0.274567097f, -0.385757774f, 0.482284695f, -0.558620572f,
        0.69857496f, -0.821624994f, 0.915799975f, -1.0158f, 1.31624997f, -1.18575001f, 1.11224985f,
        -1.32749999f, 1.37049997f, -1.35525012f, 1.74275005f, -2.07325006f}},
      {"adam",
       false,
       {0.245555967f, -0.135648459f, 0.160882846f, -0.256446868f, 0.291932762f, -0.364366442f,
        0.662793159f, -0.927609861f, 1.04979384f, -1.14979386f, 2.37609887f, -0.827932f,
        0.147252783f, -0.400000215f, 0.0721518099f, -0.213461459f, 2.07206821f, -3.25824165f}},
      {"adamw",
       false,
       {0.245624214f, -0.236906931f, 0.16094631f, -0.256665349f, 0.298701048f, -0.367851853f,
        0.662793159f, -0.927609861f, 1.04979384f, -1.14979386f, 2.37609887f, -0.827932f,
        0.147252783f, -0.400000215f, 0.0721518099f, -0.213461459f, 2.07206821f, -3.25824165f}},
  };
  std::vector<float> g1, g2;
  for (int i = 0; i < 18; ++i) {
    g1.push_back(static_cast<float>(0.05 * ((i * 7) % 5 - 2)));
    g2.push_back(static_cast<float>(0.03 * ((i * 3) % 4 - 1.5)));
  }
  auto be = backend::make_cpu_backend();
  for (const auto& tc : cases) {
    Options c;
    c.name = tc.name;
    c.lr = 0.1;
    c.weight_decay = 0.01;
    c.momentum = c.name == "sgd" ? 0.9 : 0.0;
    c.nesterov = tc.nesterov;
    c.groups = {group({"fc.*"}, 10.0, 0.0), group({"bn"}, 1.0, 0.0), group({"*.bias"}, 2.0)};
    auto opt = Optimizer::create(c, *be, plan_update_runs(c, toy_params()));
    auto w = toy_weights();
    opt->step(w, g1, 0.1);
    opt->step(w, g2, 0.05);
    for (std::size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(w[i], tc.want[i], 2e-6 * std::max(1.0f, std::fabs(tc.want[i])))
          << tc.name << (tc.nesterov ? " nesterov" : "") << " [" << i << "]";
  }
}

// The same SGD steps by PyTorch's documented rule, in double, group by group: d = g + wd w;
// buf = mu buf + d (buf = d at first); w -= lr_mult lr buf.
TEST(ParamGroups, SgdStepFollowsTorchsRulePerGroup) {
  Options c;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.weight_decay = 0.02;
  c.groups = {group({"linear"}, 4.0), group({"bn1.bias"}, 0.5, 0.3)};
  const auto params = toy_params();
  const auto runs = plan_update_runs(c, params);
  auto be = backend::make_cpu_backend();
  auto opt = Optimizer::create(c, *be, runs);
  auto w = toy_weights();
  const auto w0 = w;
  std::vector<float> g(18);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(std::sin(0.7 * i));
  const std::vector<double> lrs = {0.1, 0.07, 0.03};
  for (double lr : lrs) opt->step(w, g, lr);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const bool fc = i >= 10, bn_bias = i >= 8 && i < 10;
    const double mult = fc ? 4.0 : bn_bias ? 0.5 : 1.0, wd = bn_bias ? 0.3 : 0.02;
    double x = w0[i], buf = 0;
    for (double lr : lrs) {
      const double d = g[i] + wd * x;
      buf = 0.9 * buf + d;
      x -= mult * lr * buf;
    }
    EXPECT_NEAR(w[i], x, 1e-5) << i;
  }
}

// On a real model: param_infos names and places every parameter, with the model's frozen flags.
TEST(ParamGroups, ParamInfosOfAModel) {
  using testutil::L;
  auto be = backend::make_cpu_backend();
  nn::Model model({L("conv2d", "conv1", 3, 3, 1), L("batchnorm", "bn1"), L("relu", "relu1"),
                   L("flatten", "flat"), L("linear", "fc", 4)},
                  Shape{1, 3, 3}, 4, *be);
  model.freeze({true, true, true, true, false, false}, true);
  auto infos = param_infos(model);
  ASSERT_EQ(infos.size(), 6u);
  const std::vector<std::string> names = {"conv1.weight", "conv1.bias", "bn1.weight",
                                          "bn1.bias",     "fc.weight",  "fc.bias"};
  for (std::size_t i = 0; i < infos.size(); ++i) {
    EXPECT_EQ(infos[i].name, names[i]);
    EXPECT_EQ(infos[i].frozen, i < 4) << i;
    if (i > 0) EXPECT_EQ(infos[i].begin, infos[i - 1].end);
  }
  EXPECT_EQ(infos[2].kind, "batchnorm");
  EXPECT_EQ(infos.back().end, model.params().size());
  // The plain runs of the old interface are what no groups give.
  Options c;
  c.weight_decay = 0.1;
  c.no_decay_norm_bias = true;
  for (auto& p : infos) p.frozen = false;
  EXPECT_EQ(plan_update_runs(c, infos),
            plain_update_runs(c, model.params().size(), nn::norm_and_bias_ranges(model)));
}

}  // namespace
}  // namespace ddp::optim
