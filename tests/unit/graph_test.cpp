// The layer graph: inputs by name, add / concat / global_avgpool, gradients summed where one output
// feeds several layers (checked by finite differences through the whole model), gradient buffers
// shared by liveness, and the errors that name the file, line and layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ddp/app/config.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "gradcheck_util.hpp"
#include "layer_spec_util.hpp"

namespace ddp::nn {
namespace {

using ddp::testing::expect_gradient_matches;
using ddp::testing::random_vector;
using ::testing::HasSubstr;
using testutil::L;

LayerSpec with_inputs(LayerSpec s, std::vector<std::string> inputs) {
  s.inputs = std::move(inputs);
  return s;
}

// stem -> relu -> {branch conv, the add}; add -> relu; concat(relu2, stem_relu); global pool; fc.
// stem_relu's output feeds three layers (branch, add, concat): its gradient is their sum.
std::vector<LayerSpec> residual_net() {
  return {L("conv2d", "stem", 4, 3, 1),
          L("relu", "stem_relu"),
          L("conv2d", "branch", 4, 3, 1),
          with_inputs(L("add", "sum"), {"branch", "stem_relu"}),
          L("relu", "relu2"),
          with_inputs(L("concat", "cat"), {"relu2", "stem_relu"}),
          L("global_avgpool", "gap"),
          L("linear", "fc", 3)};
}

// L = sum(logits * r) for the model's current parameters.
double loss(Model& m, std::vector<float>& x, const std::vector<float>& r, std::int64_t n) {
  const Tensor& y = m.forward(Tensor::view(x.data(), m.input_shape().with_batch(n)),
                              StepContext{Mode::train, 1, nullptr});
  double l = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y.data()[i]) * r[i];
  return l;
}

// Checks every parameter's gradient, or those named in `only`.
void check_model_gradients(const std::vector<LayerSpec>& specs, const Shape& in,
                           std::int64_t classes, const std::vector<std::string>& only = {}) {
  auto be = backend::make_cpu_backend();
  Model m(specs, in, classes, *be);
  m.init_parameters(5);
  const std::int64_t n = 3;
  auto x = random_vector(static_cast<std::size_t>(in.numel() * n), 11);
  const auto r = random_vector(static_cast<std::size_t>(classes * n), 12);
  loss(m, x, r, n);
  auto dl = r;
  m.backward(Tensor::view(dl.data(), Shape{n, classes}));
  const std::vector<float> analytic(m.grads().begin(), m.grads().end());
  for (const auto& p : m.named_params()) {
    if (!only.empty() && std::find(only.begin(), only.end(), p.name) == only.end()) continue;
    std::vector<float> values(p.tensor.data(), p.tensor.data() + p.tensor.numel());
    const std::vector<float> grad(
        analytic.begin() + static_cast<std::ptrdiff_t>(p.offset),
        analytic.begin() + static_cast<std::ptrdiff_t>(p.offset + values.size()));
    // Perturb the model's own parameter memory through `values`.
    auto f = [&] {
      std::copy(values.begin(), values.end(), p.tensor.data());
      return loss(m, x, r, n);
    };
    expect_gradient_matches(f, values, grad, p.name.c_str(), 1e-3f);
    std::copy(values.begin(), values.end(), p.tensor.data());
  }
}

TEST(Graph, ResidualAndConcatGradientsMatchFiniteDifferences) {
  check_model_gradients(residual_net(), Shape{2, 5, 5}, 3);
}

TEST(Graph, AnOutputReadTwiceByOneLayerGetsBothGradients) {
  // add(x, x) = 2x: the gradient reaching conv is twice the one leaving the add.
  check_model_gradients(
      {L("conv2d", "conv", 2, 3, 1), with_inputs(L("add", "twice"), {"conv", "conv"}),
       L("flatten", "flat"), L("linear", "fc", 2)},
      Shape{1, 4, 4}, 2);
}

TEST(Graph, ThreeWayAddAndFeatureConcat) {
  // abc runs in place over b: a is read by c as well.
  check_model_gradients(
      {L("flatten", "flat"), L("linear", "a", 3), L("linear", "b", 3),
       with_inputs(L("linear", "c", 3), {"a"}), with_inputs(L("add", "abc"), {"a", "b", "c"}),
       with_inputs(L("concat", "cat"), {"abc", "flat"}), L("linear", "fc", 2)},
      Shape{1, 2, 2}, 2);
}

TEST(Graph, GlobalAveragePoolIsTheMeanOverHeightAndWidth) {
  auto be = backend::make_cpu_backend();
  Model m({L("global_avgpool", "gap"), L("linear", "fc", 2)}, Shape{2, 3, 5}, 2, *be);
  std::vector<float> x(30);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  m.forward(Tensor::view(x.data(), Shape{1, 2, 3, 5}), StepContext{Mode::eval, 0, nullptr});
  // The model input feeds gap directly; read gap's output through a model that ends there.
  Model gap({L("global_avgpool", "gap")}, Shape{2, 3, 5}, 2, *be);
  const Tensor& y =
      gap.forward(Tensor::view(x.data(), Shape{1, 2, 3, 5}), StepContext{Mode::eval, 0, nullptr});
  EXPECT_FLOAT_EQ(y.data()[0], 7.0f);   // mean of 0..14
  EXPECT_FLOAT_EQ(y.data()[1], 22.0f);  // mean of 15..29
  check_model_gradients(
      {L("conv2d", "conv", 3, 3, 1), L("global_avgpool", "gap"), L("linear", "fc", 2)},
      Shape{2, 3, 5}, 2);
}

// Identity in training (dropout with p = 0): a kink-free stand-in for an activation, so finite
// differences through a deep chain stay exact.
LayerSpec identity(const std::string& name) {
  LayerSpec s = L("dropout", name);
  s.p = 0;
  return s;
}

TEST(Graph, ResidualChainsShareGradientBuffers) {
  // A deep residual chain: activations are all kept, output gradients only while live.
  std::vector<LayerSpec> specs{L("conv2d", "stem", 4, 3, 1), identity("r0")};
  std::string prev = "r0";
  for (int b = 0; b < 4; ++b) {
    const std::string p = "b" + std::to_string(b);
    specs.push_back(L("conv2d", p + "c1", 4, 3, 1));
    specs.push_back(identity(p + "r1"));
    specs.push_back(L("conv2d", p + "c2", 4, 3, 1));
    specs.push_back(with_inputs(L("add", p + "add"), {p + "c2", prev}));
    specs.push_back(identity(p + "out"));
    prev = p + "out";
  }
  specs.push_back(L("global_avgpool", "gap"));
  specs.push_back(L("linear", "fc", 4));
  auto be = backend::make_cpu_backend();
  Model m(specs, Shape{3, 8, 8}, 4, *be);
  m.reserve(2);
  // 18 stored outputs of 4x8x8 floats (each add writes over its convolution's output); without
  // reuse their gradients would take as much again.
  for (int b = 0; b < 4; ++b) EXPECT_TRUE(m.runs_in_place(static_cast<std::size_t>(2 + 5 * b + 3)));
  EXPECT_EQ(m.graph().activation_floats(), 2 * (18 * 256 + 4 + 4));
  EXPECT_LE(m.graph().gradient_floats(), 2 * (4 * 256 + 8));
  // The stem's gradient arrives through every block's add; b2c1's through one block.
  check_model_gradients(specs, Shape{3, 8, 8}, 4, {"stem.weight", "b2c1.bias", "b3c2.weight"});
}

TEST(Graph, ResultsDoNotDependOnGradientBufferReuse) {
  // Two identical steps give identical gradients: no buffer leaks a previous value.
  auto be = backend::make_cpu_backend();
  Model m(residual_net(), Shape{2, 5, 5}, 3, *be);
  EXPECT_TRUE(m.runs_in_place(1));  // stem_relu over stem (three layers read stem_relu's output)
  EXPECT_TRUE(m.runs_in_place(4));  // relu2 over the add, whose backward does not read it
  m.init_parameters(9);
  auto x = random_vector(50 * 4, 3);
  auto r = random_vector(12, 4);
  std::vector<std::vector<float>> grads;
  for (int step = 0; step < 2; ++step) {
    loss(m, x, r, 4);
    auto dl = r;
    m.backward(Tensor::view(dl.data(), Shape{4, 3}));
    grads.emplace_back(m.grads().begin(), m.grads().end());
  }
  EXPECT_EQ(grads[0], grads[1]);
}

// A residual add writes over an input that nothing else reads and whose producer's backward does
// not need it - here its second one, batch norm's output - and the ReLU after it over the same
// buffer: batch norm, add and ReLU share one activation and one gradient buffer. The logits and
// gradients are bitwise those of the same function with an identity between batch norm and add,
// where the add keeps a buffer of its own (finite differences would cross the ReLU's kinks).
TEST(Graph, AddAndReluShareTheBatchNormBuffer) {
  auto net = [](bool identity_before_add) {
    std::vector<LayerSpec> specs{L("conv2d", "stem", 4, 3, 1), L("relu", "stem_relu"),
                                 L("conv2d", "branch", 4, 3, 1), L("batchnorm", "bn")};
    if (identity_before_add) specs.push_back(identity("bn_id"));
    specs.push_back(with_inputs(L("add", "sum"), {"stem_relu", specs.back().name}));
    for (const char* type : {"relu", "global_avgpool"}) specs.push_back(L(type, type));
    specs.push_back(L("linear", "fc", 3));
    return specs;
  };
  auto be = backend::make_cpu_backend();
  Model shared(net(false), Shape{2, 5, 5}, 3, *be);
  Model apart(net(true), Shape{2, 5, 5}, 3, *be);
  const std::vector<bool> in_place{false, true, false, false, true, true, false, false};
  for (std::size_t i = 0; i < in_place.size(); ++i)
    EXPECT_EQ(shared.runs_in_place(i), in_place[i]) << net(false)[i].name;
  EXPECT_FALSE(apart.runs_in_place(5));  // the add, over the identity: dropout reads its output
  shared.reserve(2);
  // stem (with stem_relu), branch, bn (with sum and relu), gap, fc.
  EXPECT_EQ(shared.graph().activation_floats(), 2 * (3 * 4 * 25 + 4 + 3));

  shared.init_parameters(5);
  std::copy(shared.params().begin(), shared.params().end(), apart.params().begin());
  const std::int64_t n = 3;
  auto x = random_vector(50 * n, 11);
  const auto r = random_vector(3 * n, 12);
  std::vector<std::vector<float>> logits, grads;
  for (Model* m : {&shared, &apart}) {
    const Tensor& y =
        m->forward(Tensor::view(x.data(), Shape{n, 2, 5, 5}), StepContext{Mode::train, 1, nullptr});
    logits.emplace_back(y.data(), y.data() + y.numel());
    auto dl = r;
    m->backward(Tensor::view(dl.data(), Shape{n, 3}));
    grads.emplace_back(m->grads().begin(), m->grads().end());
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

// ---- errors, from a config file: file, line and layer named ----

class GraphConfigErrors : public ::testing::Test {
 protected:
  std::string error_for(const std::string& layers) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("ddp_graph_test_" + std::to_string(getpid()) + ".toml");
    std::ofstream(path) << "[data]\ndataset = \"cifar10\"\n[model]\npreset = \"\"\n" << layers;
    try {
      const app::Config cfg = app::load_config(path.string(), {});
      auto be = backend::make_cpu_backend();
      Model m(cfg.model.layers, Shape{3, 8, 8}, 10, *be);
    } catch (const ConfigError& e) {
      std::filesystem::remove(path);
      return std::string(e.what()) + " [file " + path.string() + "]";
    }
    std::filesystem::remove(path);
    ADD_FAILURE() << "accepted:\n" << layers;
    return "";
  }
};

constexpr const char* kTail = R"(
[[model.layers]]
type = "global_avgpool"
[[model.layers]]
type = "linear"
out_features = 10
)";

TEST_F(GraphConfigErrors, UnknownInputName) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
name = "c1"
out_channels = 4
kernel = 3
[[model.layers]]
type = "add"
inputs = ["c1", "c9"]
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'add1' (add, "));
  EXPECT_THAT(e, HasSubstr(".toml:10)"));
  EXPECT_THAT(e, HasSubstr("input 'c9' is not the name of a layer above it (the nearest above: "
                           "'c1')"));
}

TEST_F(GraphConfigErrors, InputBelowTheLayerIsACycle) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
name = "c1"
out_channels = 4
kernel = 3
input = "c2"
[[model.layers]]
type = "conv2d"
name = "c2"
out_channels = 4
kernel = 3
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'c1' (conv2d, "));
  EXPECT_THAT(e, HasSubstr(".toml:5)"));
  EXPECT_THAT(e, HasSubstr("reads 'c2', which comes after it"));
  EXPECT_THAT(e, HasSubstr("no cycles"));
}

TEST_F(GraphConfigErrors, AddOfDifferentShapesShowsBoth) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
name = "a"
out_channels = 4
kernel = 3
[[model.layers]]
type = "conv2d"
name = "b"
out_channels = 8
kernel = 3
padding = 1
[[model.layers]]
type = "add"
name = "sum"
inputs = ["a", "b"]
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'sum' (add, "));
  EXPECT_THAT(e, HasSubstr(".toml:16)"));
  EXPECT_THAT(e, HasSubstr("'a' 4x6x6, 'b' 8x6x6"));
}

TEST_F(GraphConfigErrors, ConcatOfDifferentSizes) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
name = "a"
out_channels = 4
kernel = 3
[[model.layers]]
type = "maxpool"
name = "b"
kernel = 2
[[model.layers]]
type = "concat"
name = "cat"
inputs = ["a", "b"]
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'cat' (concat, "));
  EXPECT_THAT(e, HasSubstr("differ only in their channel count"));
  EXPECT_THAT(e, HasSubstr("'a' 4x6x6, 'b' 4x3x3"));
}

TEST_F(GraphConfigErrors, AnOutputNothingReads) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
name = "dead_end"
out_channels = 4
kernel = 3
[[model.layers]]
type = "conv2d"
name = "c2"
out_channels = 4
kernel = 3
input = "dead_end"
[[model.layers]]
type = "conv2d"
name = "c3"
out_channels = 4
kernel = 3
input = "dead_end"
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("the output of layer 'c2' (conv2d, "));
  EXPECT_THAT(e, HasSubstr(".toml:10) is not read by any layer"));
}

TEST_F(GraphConfigErrors, AddWithOneInput) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
out_channels = 4
kernel = 3
[[model.layers]]
type = "add"
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'add1' (add, "));
  EXPECT_THAT(e, HasSubstr("takes at least 2 inputs, got 1"));
}

TEST_F(GraphConfigErrors, InputAndInputsTogether) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
out_channels = 4
kernel = 3
input = "x"
inputs = ["y"]
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr(".toml:10: model.layers[0] (conv2d 'conv1'): give either input"));
}

TEST_F(GraphConfigErrors, BatchNormTakesNoRandomInit) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
out_channels = 4
kernel = 3
[[model.layers]]
type = "batchnorm"
init = "kaiming_normal"
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr("layer 'bn1' (batchnorm, "));
  EXPECT_THAT(e, HasSubstr("init = \"kaiming_normal\" does not apply to batchnorm"));
}

TEST_F(GraphConfigErrors, AnEmptyInputList) {
  const auto e = error_for(R"([[model.layers]]
type = "conv2d"
out_channels = 4
kernel = 3
inputs = []
)" + std::string(kTail));
  EXPECT_THAT(e, HasSubstr(".toml:9: model.layers[0] (conv2d 'conv1'): inputs = []: names no "
                           "layer"));
}

TEST(Graph, DuplicateNamesBuiltInCodeAreRefused) {
  auto be = backend::make_cpu_backend();
  EXPECT_THROW(Model({L("flatten", "x"), L("linear", "x", 2)}, Shape{1, 2, 2}, 2, *be),
               ConfigError);
}

}  // namespace
}  // namespace ddp::nn
