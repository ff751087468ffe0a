// Dynamic loss scaling: the scale's rules and the CPU's unscale-and-check kernel (the GPU's is
// compared with it in cuda_backend_test.cpp; the whole mechanism across ranks runs in
// test_loss_scaling.sh).
#include "ddp/train/loss_scaler.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"

namespace ddp::train {
namespace {

TEST(LossScaler, DisabledAppliesEveryStepAtScaleOne) {
  LossScaler s;
  EXPECT_FALSE(s.enabled());
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_TRUE(s.update(false));  // nothing is checked, nothing skipped
  EXPECT_EQ(s.skipped(), 0);
}

TEST(LossScaler, OverflowSkipsAndHalvesGoodStepsDoubleAfterTheInterval) {
  LossScaler s(65536.0, 2.0, 0.5, 3);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_TRUE(s.update(true));  // third good step in a row: grows
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.skipped(), 1);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));  // the streak restarts
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.skipped(), 2);
}

TEST(LossScaler, ScaleStaysAPositiveFiniteFloat) {
  LossScaler low(1e-37, 2.0, 0.5, 1);
  for (int i = 0; i < 10; ++i) low.update(false);
  EXPECT_GT(static_cast<float>(low.scale()), 0.0f);
  LossScaler high(1e38, 2.0, 0.5, 1);
  for (int i = 0; i < 10; ++i) high.update(true);
  EXPECT_LT(static_cast<float>(high.scale()), std::numeric_limits<float>::infinity());
}

TEST(LossScaler, CpuUnscaleCheckScalesExactlyAndFindsInfAndNan) {
  auto be = backend::make_cpu_backend();
  for (std::size_t n : {std::size_t{7}, std::size_t{1} << 17}) {  // serial and parallel paths
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 97) * 3.0f - 100.0f;
    auto want = g;
    for (auto& v : want) v *= 0.25f;
    EXPECT_TRUE(be->unscale_check(static_cast<std::int64_t>(n), g.data(), 0.25f));
    EXPECT_EQ(g, want);
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      g[n / 2] = bad;
      EXPECT_FALSE(be->unscale_check(static_cast<std::int64_t>(n), g.data(), 1.0f)) << bad;
      g[n / 2] = 0.0f;
    }
  }
}

// Outcomes learnt a step late (a GPU): two overflowing steps in a row, both computed with the old
// scale, halve it once and count two skips; a good step of an old scale does not grow it.
TEST(LossScaler, LateOutcomesOfAnOldScaleOnlyCountTheSkip) {
  LossScaler s(1024.0, 2.0, 0.5, 2);
  EXPECT_FALSE(s.update_late(false, 1024.0));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_FALSE(s.update_late(false, 1024.0));  // enqueued before the first was known
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped(), 2);
  EXPECT_TRUE(s.update_late(true, 1024.0));
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(s.update_late(true, 512.0));
  EXPECT_TRUE(s.update_late(true, 512.0));  // the interval (2) at the current scale: doubled
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
  EXPECT_FALSE(s.update_late(false, 1024.0));
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.skipped(), 3);
}

// The flag form (what the trainer uses on a GPU, where the device skips the step itself): the
// flag of a slot says whether that unscale found an inf/NaN, and an optimizer step given the flag
// leaves the weights and the momentum untouched exactly when it is set.
TEST(LossScaler, OverflowFlagSkipsTheOptimizerStepItGuards) {
  auto be = backend::make_cpu_backend();
  std::vector<float> w = {1.0f, -2.0f, 3.0f}, m = {0.5f, 0.5f, 0.5f};
  std::vector<float> g = {2.0f, std::numeric_limits<float>::infinity(), 4.0f};
  backend::Backend::SgdHyper h;
  h.lr = 0.5f;
  h.momentum = 0.9f;
  h.skip_if = be->unscale_flag(3, g.data(), 0.5f, 1);
  EXPECT_TRUE(be->overflow_seen(1));
  be->sgd_step(3, h, w.data(), g.data(), m.data());
  EXPECT_EQ(w, (std::vector<float>{1.0f, -2.0f, 3.0f}));
  EXPECT_EQ(m, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  backend::Backend::AdamHyper a;
  a.skip_if = h.skip_if;
  std::vector<float> v = {0.0f, 0.0f, 0.0f};
  be->adam_step(3, a, w.data(), g.data(), m.data(), v.data());
  EXPECT_EQ(w, (std::vector<float>{1.0f, -2.0f, 3.0f}));

  // Another slot, finite: unscaled, flag clear, the step applies (m = 0.9 m + g, w -= lr m).
  std::vector<float> f = {2.0f, 4.0f, 8.0f};
  h.skip_if = be->unscale_flag(3, f.data(), 0.5f, 2);
  EXPECT_FALSE(be->overflow_seen(2));
  EXPECT_TRUE(be->overflow_seen(1));  // slots are independent
  EXPECT_EQ(f, (std::vector<float>{1.0f, 2.0f, 4.0f}));
  be->sgd_step(3, h, w.data(), f.data(), m.data());
  EXPECT_FLOAT_EQ(m[0], 0.45f + 1.0f);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.5f * 1.45f);
  EXPECT_THROW(be->unscale_flag(3, f.data(), 1.0f, backend::Backend::kOverflowSlots),
               std::out_of_range);
}

}  // namespace
}  // namespace ddp::train
