// The CPU convolution runs a batch in slices of samples (src/backend/cpu/conv.cpp): a batch's
// results must be those of its samples computed one by one - outputs and input gradients per
// sample, weight and bias gradients their sum - whatever the batch size, including a short last
// slice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "gradcheck_util.hpp"

namespace ddp::nn {
namespace {

using ddp::testing::random_vector;

struct ConvCase {
  std::int64_t in_c, size, out_c, kernel, pad;
};

// Max |a - b| over max |b|: 0 for identical results.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / scale;
}

// (compute threads, batch size in slices): the slice is 32 samples per compute thread (conv.cpp),
// fixed when a layer first runs, so each case sets the threads before building its layer.
using SliceCase = std::tuple<int, double>;
class ConvSlicing : public ::testing::TestWithParam<SliceCase> {
 protected:
  void SetUp() override {
    saved_threads_ = backend::compute_threads();
    backend::set_compute_threads(std::get<0>(GetParam()));
  }
  void TearDown() override { backend::set_compute_threads(saved_threads_); }
  std::int64_t batch() const {
    const auto slice = 32.0 * std::get<0>(GetParam());
    return static_cast<std::int64_t>(std::get<1>(GetParam()) * slice);
  }

 private:
  int saved_threads_ = 1;
};

void check_batch(const ConvCase& cc, std::int64_t n) {
  auto be = backend::make_cpu_backend();
  LayerSpec spec;
  spec.type = "conv2d";
  spec.name = "conv";
  spec.out_channels = cc.out_c;
  spec.kernel = cc.kernel;
  spec.padding = cc.pad;
  auto owned = make_layer(spec, *be);
  auto* layer = &dynamic_cast<UnaryLayer&>(*owned);
  const Shape in{cc.in_c, cc.size, cc.size};
  const Shape out = layer->infer(in);
  const auto specs = layer->param_specs();
  std::vector<std::vector<float>> params, grads;
  std::vector<Tensor> p, g;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    params.push_back(random_vector(static_cast<std::size_t>(specs[i].shape.numel()), 10 + i));
    grads.emplace_back(params.back().size());
    p.push_back(Tensor::view(params[i].data(), specs[i].shape));
    g.push_back(Tensor::view(grads[i].data(), specs[i].shape));
  }
  layer->bind(p, g, {});
  const std::int64_t in_n = in.numel(), out_n = out.numel();
  auto x = random_vector(static_cast<std::size_t>(in_n * n), 1);
  const auto dy = random_vector(static_cast<std::size_t>(out_n * n), 2);
  std::vector<float> y(static_cast<std::size_t>(out_n * n)), dx(x.size());
  auto run = [&](std::int64_t count, float* xs, const float* dys, float* ys, float* dxs) {
    layer->forward(Tensor::view(xs, in.with_batch(count)), Tensor::view(ys, out.with_batch(count)),
                   StepContext{});
    Tensor dxt = Tensor::view(dxs, in.with_batch(count));
    layer->backward(Tensor::view(xs, in.with_batch(count)), Tensor::view(ys, out.with_batch(count)),
                    Tensor::view(const_cast<float*>(dys), out.with_batch(count)), &dxt);
  };
  run(n, x.data(), dy.data(), y.data(), dx.data());
  const auto batch_grads = grads;

  std::vector<float> y1(y.size()), dx1(dx.size());
  std::vector<std::vector<double>> sum(grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i) sum[i].assign(grads[i].size(), 0.0);
  for (std::int64_t s = 0; s < n; ++s) {
    run(1, x.data() + s * in_n, dy.data() + s * out_n, y1.data() + s * out_n,
        dx1.data() + s * in_n);
    for (std::size_t i = 0; i < grads.size(); ++i)
      for (std::size_t j = 0; j < grads[i].size(); ++j) sum[i][j] += grads[i][j];
  }
  EXPECT_LE(rel_diff(y, y1), 1e-6) << "outputs, batch " << n;
  EXPECT_LE(rel_diff(dx, dx1), 1e-6) << "input gradients, batch " << n;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    std::vector<float> ref(sum[i].begin(), sum[i].end());
    EXPECT_LE(rel_diff(batch_grads[i], ref), 1e-5) << specs[i].name << ", batch " << n;
  }
}

TEST_P(ConvSlicing, FirstLayerMatchesSampleBySample) {
  check_batch({3, 32, 6, 5, 0}, batch());
}
TEST_P(ConvSlicing, InnerLayerMatchesSampleBySample) {
  check_batch({6, 14, 16, 5, 2}, batch());
}

// Part of a slice, exactly one, two, three, and three with a short fourth; on 1 and 2 threads.
INSTANTIATE_TEST_SUITE_P(BatchSizes, ConvSlicing,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(0.16, 1.0, 2.0, 3.0, 3.125)));

}  // namespace
}  // namespace ddp::nn
