// Identity initialisation of convolutions (conv2d init = "dirac" / "partial_dirac") against
// torch.nn.init.dirac_ (tests/unit/recipe_torch.py), and what it is for: a Dirac convolution
// passes its input through unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "layer_spec_util.hpp"
#include "recipe_oracle.hpp"

namespace ddp::nn {
namespace {

using testutil::L;

struct DiracCase {
  std::int64_t in, out, kh, kw, groups;
};

// conv2d (the case, init) -> flatten -> linear, on c x 6 x 6 images; the conv's weight after
// init_parameters(seed).
std::vector<float> dirac_conv_weight(const DiracCase& c, const std::string& init,
                                     std::uint64_t seed, std::vector<float>* bias = nullptr) {
  auto be = backend::make_cpu_backend();
  LayerSpec conv = L("conv2d", "conv", c.out);
  conv.kernel = Extent2(c.kh, c.kw);
  conv.groups = c.groups;
  conv.init = init;
  Model m({conv, L("flatten", "f"), L("linear", "fc", 3)}, Shape{c.in, 6, 6}, 3, *be);
  m.init_parameters(seed);
  for (const auto& t : m.named_params()) {
    if (t.name == "conv.bias" && bias)
      bias->assign(t.tensor.data(), t.tensor.data() + t.tensor.numel());
    if (t.name == "conv.weight") return {t.tensor.data(), t.tensor.data() + t.tensor.numel()};
  }
  ADD_FAILURE() << "no conv.weight";
  return {};
}

TEST(InitDirac, MatchesTorchDiracAndAirbenchsPartialDirac) {
  DDP_REQUIRE_RECIPE_ORACLE(oracle);
  const std::vector<DiracCase> cases = {
      {4, 4, 3, 3, 1},  // square: the identity
      {6, 4, 3, 3, 1},  // fewer filters than channels
      {3, 8, 3, 3, 1},  // more filters: the rest zero (dirac) or default (partial)
      {8, 6, 3, 3, 2},  // groups: one diagonal per group
      {6, 6, 3, 3, 6},  // depthwise
      {3, 5, 2, 4, 1},  // an even, non-square kernel: the centre is (kh/2, kw/2)
  };
  // Every case in one run of the oracle (each start of Python and torch costs seconds).
  std::string spec = "cases = " + std::to_string(cases.size()) + "\n";
  std::vector<std::vector<float>> dirac(cases.size()), partial(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<float> bias;
    dirac[i] = dirac_conv_weight(c, "dirac", 5, &bias);
    EXPECT_TRUE(std::all_of(bias.begin(), bias.end(), [](float b) { return b == 0.0f; }));
    const auto base = dirac_conv_weight(c, "", 5);  // PyTorch's default init, same seed
    partial[i] = dirac_conv_weight(c, "partial_dirac", 5, &bias);
    EXPECT_TRUE(std::all_of(bias.begin(), bias.end(), [](float b) { return b == 0.0f; }));
    const std::string k = std::to_string(i);
    spec += "shape" + k + " = " + std::to_string(c.out) + " " + std::to_string(c.in / c.groups) +
            " " + std::to_string(c.kh) + " " + std::to_string(c.kw) + "\ngroups" + k + " = " +
            std::to_string(c.groups) + "\n";
    oracle.write("base" + k + ".f32", base);
  }
  oracle.spec(spec);
  ASSERT_TRUE(oracle.run("dirac"));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    SCOPED_TRACE("in " + std::to_string(c.in) + " out " + std::to_string(c.out) + " kernel " +
                 std::to_string(c.kh) + "x" + std::to_string(c.kw) + " groups " +
                 std::to_string(c.groups));
    const std::string k = std::to_string(i);
    EXPECT_EQ(dirac[i], oracle.read<float>("dirac" + k + ".f32", dirac[i].size()));
    EXPECT_EQ(partial[i], oracle.read<float>("partial" + k + ".f32", partial[i].size()));
  }
}

// A 3x3 Dirac convolution with padding 1 and as many filters as channels is the identity (the
// model's "logits" are the flattened convolution output here).
TEST(InitDirac, ConvolutionPassesItsInputThrough) {
  auto be = backend::make_cpu_backend();
  LayerSpec conv = L("conv2d", "conv", 5, 3, 1);
  conv.init = "dirac";
  const std::int64_t n = 3, per_sample = 5 * 7 * 7, count = n * per_sample;
  Model m({conv, L("flatten", "f")}, Shape{5, 7, 7}, per_sample, *be);
  m.init_parameters(11);
  std::vector<float> x(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    x[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i % 17) - 2.0f;
  m.reserve(n);
  const Tensor& y =
      m.forward(Tensor::view(x.data(), Shape{n, 5, 7, 7}), StepContext{Mode::eval, 0, nullptr});
  ASSERT_EQ(y.numel(), count);
  for (std::int64_t i = 0; i < count; ++i)
    ASSERT_EQ(y.data()[i], x[static_cast<std::size_t>(i)]) << "element " << i;
}

TEST(InitDirac, OnlyConvolutionWeightsTakeIt) {
  auto be = backend::make_cpu_backend();
  for (const char* init : {"dirac", "partial_dirac", "patch_whitening"}) {
    LayerSpec fc = L("linear", "head", 3);
    fc.init = init;
    Model m({L("flatten", "f"), fc}, Shape{1, 4, 4}, 3, *be);
    try {
      m.init_parameters(1);
      ADD_FAILURE() << init << " on a linear layer was accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(init), std::string::npos) << msg;
      EXPECT_NE(msg.find("head.weight"), std::string::npos) << msg;
      EXPECT_NE(msg.find("convolution"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace ddp::nn
