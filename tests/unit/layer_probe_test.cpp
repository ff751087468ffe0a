// nn::Model::set_layer_probe (GraphExecutor's probe, where gpu_bench --profile records its CUDA
// events): called right before and right after every layer's forward and backward that does work,
// in the order they run - views (flatten) do none and are left out - and no more once cleared; a
// probe changes nothing the model computes.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/model.hpp"
#include "gradcheck_util.hpp"
#include "layer_spec_util.hpp"

namespace ddp::nn {
namespace {

using testutil::L;
using Call = std::tuple<LayerPass, std::size_t, bool>;

// stem_relu's output feeds the branch and the add (its gradient is a sum); flatten is a view.
std::vector<LayerSpec> net() {
  LayerSpec sum = L("add", "sum");
  sum.inputs = {"branch", "stem_relu"};
  return {L("conv2d", "stem", 4, 3, 1),
          L("relu", "stem_relu"),
          L("conv2d", "branch", 4, 3, 1),
          sum,
          L("maxpool", "pool", 0, 2),
          L("flatten", "flat"),
          L("linear", "fc", 3)};
}

// One training step from fixed weights; returns the logits and the gradients.
std::vector<float> step(Model& m, std::vector<float> x, std::int64_t n) {
  m.init_parameters(3);
  const Tensor& y = m.forward(Tensor::view(x.data(), m.input_shape().with_batch(n)),
                              StepContext{Mode::train, 1, nullptr});
  std::vector<float> out(y.data(), y.data() + y.numel());
  auto dl = ddp::testing::random_vector(static_cast<std::size_t>(y.numel()), 5);
  m.backward(Tensor::view(dl.data(), y.shape()));
  out.insert(out.end(), m.grads().begin(), m.grads().end());
  return out;
}

TEST(LayerProbe, BracketsEveryLayersForwardAndBackwardInTheOrderTheyRun) {
  auto be = backend::make_cpu_backend();
  Model m(net(), Shape{3, 8, 8}, 3, *be);
  const std::int64_t n = 2;
  const auto x = ddp::testing::random_vector(static_cast<std::size_t>(3 * 8 * 8 * n), 7);
  const auto plain = step(m, x, n);

  std::vector<Call> calls;
  m.set_layer_probe([&](LayerPass pass, std::size_t layer, bool begin) {
    calls.emplace_back(pass, layer, begin);
  });
  const auto probed = step(m, x, n);
  std::vector<Call> want;
  const std::size_t flat = 5;
  ASSERT_TRUE(m.layer(flat).is_view());
  for (std::size_t i = 0; i < m.num_layers(); ++i) {
    if (i == flat) continue;
    want.emplace_back(LayerPass::forward, i, true);
    want.emplace_back(LayerPass::forward, i, false);
  }
  for (std::size_t i = m.num_layers(); i-- > 0;) {
    if (i == flat) continue;
    want.emplace_back(LayerPass::backward, i, true);
    want.emplace_back(LayerPass::backward, i, false);
  }
  EXPECT_EQ(calls, want);
  EXPECT_EQ(probed, plain);  // bitwise: the probe only watches

  m.set_layer_probe({});
  calls.clear();
  EXPECT_EQ(step(m, x, n), plain);
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace ddp::nn
