// Softmax cross-entropy: value against a hand computation, gradient against finite differences.
#include "ddp/nn/loss.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "gradcheck_util.hpp"

namespace ddp::backend {
namespace {

TEST(SoftmaxXent, ValueMatchesDefinition) {
  auto be = make_cpu_backend();
  const std::vector<float> z{1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
  const std::vector<std::int32_t> y{1, 0};
  auto r = be->softmax_xent(2, 3, z.data(), y.data(), 0.0f, 1.0f, nullptr);
  auto nll = [](double a, double b, double c, double t) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c)) - t;
  };
  EXPECT_NEAR(r.loss_sum, nll(1, 2, 0.5, 2) + nll(-1, 0, 3, -1), 1e-9);
  EXPECT_EQ(r.correct, 1);  // sample 0 predicts class 1 (right), sample 1 predicts 2 (wrong)
}

TEST(SoftmaxXent, LabelSmoothingMatchesPyTorch) {
  // torch.nn.functional.cross_entropy(z, y, label_smoothing=0.1) for z = [[1, 2, 0.5]], y = [1]:
  // (1-0.1) * nll + 0.1/3 * sum_k -log p_k
  auto be = make_cpu_backend();
  const std::vector<float> z{1.0f, 2.0f, 0.5f};
  const std::vector<std::int32_t> y{1};
  auto r = be->softmax_xent(1, 3, z.data(), y.data(), 0.1f, 1.0f, nullptr);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(0.5));
  const double expect = 0.9 * (lse - 2.0) + 0.1 / 3.0 * (3 * lse - 3.5);
  EXPECT_NEAR(r.loss_sum, expect, 1e-6);
}

TEST(SoftmaxXent, GradientMatchesFiniteDifferences) {
  auto be = make_cpu_backend();
  const std::int64_t n = 4, k = 5;
  auto z = ddp::testing::random_vector(n * k, 3, -2.0f, 2.0f);
  const std::vector<std::int32_t> y{0, 4, 2, 2};
  for (float smoothing : {0.0f, 0.2f}) {
    std::vector<float> dz(z.size());
    be->softmax_xent(n, k, z.data(), y.data(), smoothing, 0.25f, dz.data());
    ddp::testing::expect_gradient_matches(
        [&] {
          return 0.25 * be->softmax_xent(n, k, z.data(), y.data(), smoothing, 1, nullptr).loss_sum;
        },
        z, dz, "logits", 1e-3f);
  }
}

TEST(SoftmaxXent, StableForHugeLogits) {
  auto be = make_cpu_backend();
  const std::vector<float> z{1000.0f, -1000.0f};
  const std::vector<std::int32_t> y{1};
  std::vector<float> dz(2);
  auto r = be->softmax_xent(1, 2, z.data(), y.data(), 0.0f, 1.0f, dz.data());
  EXPECT_NEAR(r.loss_sum, 2000.0, 1e-6);
  EXPECT_NEAR(dz[0], 1.0f, 1e-6f);
  EXPECT_NEAR(dz[1], -1.0f, 1e-6f);
}

// The nn object: sums accumulate over calls until take() resets them, the gradient carries the
// scale, and score() adds the same loss without one.
TEST(SoftmaxCrossEntropyLoss, AccumulatesUntilTakenAndScalesTheGradient) {
  auto be = make_cpu_backend();
  nn::SoftmaxCrossEntropy loss(*be, 3, 0.1);
  std::vector<float> z{1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f}, dz(6), ref(6);
  const std::vector<std::int32_t> y{1, 0};
  const Tensor logits = Tensor::view(z.data(), Shape{2, 3});
  const Tensor dlogits = Tensor::view(dz.data(), Shape{2, 3});
  const auto direct = be->softmax_xent(2, 3, z.data(), y.data(), 0.1f, 0.25f, ref.data());
  loss.forward_backward(logits, y.data(), 0.25, dlogits);
  for (std::size_t i = 0; i < dz.size(); ++i) EXPECT_FLOAT_EQ(dz[i], ref[i]) << i;
  loss.score(logits, y.data());
  const auto sums = loss.take();
  EXPECT_NEAR(sums.loss_sum, 2 * direct.loss_sum, 1e-12);
  EXPECT_EQ(sums.correct, 2 * direct.correct);
  const auto again = loss.take();
  EXPECT_EQ(again.loss_sum, 0.0);
  EXPECT_EQ(again.correct, 0);
}

TEST(SoftmaxCrossEntropyLoss, RefusesLogitsOfAnotherWidthAndBadSmoothing) {
  auto be = make_cpu_backend();
  nn::SoftmaxCrossEntropy loss(*be, 4, 0.0);
  std::vector<float> z(6);
  const std::vector<std::int32_t> y{0, 1};
  EXPECT_THROW(loss.score(Tensor::view(z.data(), Shape{2, 3}), y.data()), Error);
  EXPECT_THROW(nn::SoftmaxCrossEntropy(*be, 4, 1.0), ConfigError);
  EXPECT_THROW(nn::SoftmaxCrossEntropy(*be, 4, -0.1), ConfigError);
}

}  // namespace
}  // namespace ddp::backend
