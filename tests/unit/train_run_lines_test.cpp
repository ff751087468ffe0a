// What a training run tells its user as it starts, trains and stops: the one-line model summary
// (the table goes to a file), the data line, the stop lines naming the signal and the snapshot
// they write, the loss-scale line, and how often TensorBoard gets step scalars (a short run gets
// a curve too).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <sstream>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/train/loss_scaler.hpp"
#include "ddp/train/run_banner.hpp"
#include "ddp/train/run_watch.hpp"
#include "layer_spec_util.hpp"

namespace ddp::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testutil::L;

TEST(RunLines, StopLinesNameTheSignalAndTheSnapshot) {
  EXPECT_EQ(stop_line(SIGINT, 1, 45),
            "stop requested (SIGINT): after 1 epoch(s) and 45 step(s) of epoch 2, saving "
            "snapshot_e0001_s000045.h5\n");
  EXPECT_EQ(stop_line(SIGUSR1, 0, 3),
            "stop requested (SIGUSR1): after 0 epoch(s) and 3 step(s) of epoch 1, saving "
            "snapshot_e0000_s000003.h5\n");
  EXPECT_EQ(stop_line(0, 2, 7),
            "stop requested (a stop signal on another rank): after 2 epoch(s) and 7 step(s) of "
            "epoch 3, saving snapshot_e0002_s000007.h5\n");
  EXPECT_EQ(stop_line(SIGTERM, 2, 0),
            "stop requested (SIGTERM) with the epoch's last step: saved after 2 epoch(s), "
            "snapshot_e0002.h5\n");
}

TEST(RunLines, ModelInOneLine) {
  auto be = backend::make_cpu_backend();
  // conv 1->6 (156) + linear 6*24*24 -> 10 (34,570)
  const nn::Model m({L("conv2d", "conv1", 6, 5), L("flatten", "flat"), L("linear", "fc", 10)},
                    Shape{1, 28, 28}, 10, *be);
  const std::string line = model_line(m, 1000.0, 64, "runs/x/model.txt");
  EXPECT_EQ(line,
            "model: 3 layers, 34,726 parameters (136 KiB), activations 250 KiB for a micro-batch "
            "of 64; layer table in runs/x/model.txt\n");
  EXPECT_THAT(m.summary(), HasSubstr("total trainable parameters: 34726"));
}

TEST(RunLines, DataLineSaysHowBatchesAreCut) {
  Options o;
  o.batch_size = 64;
  const BatchPlan even(o, false, 3, 0, 0, false);
  EXPECT_EQ(data_line(1000, 200, Shape{1, 28, 28}, 10, 6, even, even.shares()),
            "data: 1000 training / 200 test samples of 1x28x28, 10 classes; 6 steps per epoch, "
            "global batch 192 (3 rank(s) x 64)\n");
  o.accumulate = 2;
  o.max_micro_batch = {"", {40}};
  const BatchPlan capped(o, false, 3, 0, 0, false);
  EXPECT_EQ(data_line(1000, 200, Shape{1, 28, 28}, 10, 6, capped, {96, 32, 64}),
            "data: 1000 training / 200 test samples of 1x28x28, 10 classes; 6 steps per epoch, "
            "global batch 192 (rank shares 96 + 32 + 64 in 2 micro-batches; micro-batches of at "
            "most 40, 40, 40 sample(s))\n");
  EXPECT_EQ(shares_line(capped.with_shares({96, 32, 64})),
            "rank shares: 96 + 32 + 64 samples of each global batch of 192\n");
}

TEST(RunLines, LossScaleFromTheConfiguration) {
  EXPECT_FALSE(LossScaler::configured(0, false).enabled());
  EXPECT_EQ(LossScaler::configured(0, true).scale(), 65536.0);
  const LossScaler s = LossScaler::configured(128, false);
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.summary(), "loss scale 128, 0 overflowing step(s) skipped so far");
}

// Step scalars every run.log_every steps, more often in a run too short for kMinStepScalars.
TEST(RunWatch, StepScalarIntervalGivesShortRunsACurve) {
  EXPECT_EQ(step_scalar_interval(50, 1880), 50);
  EXPECT_EQ(step_scalar_interval(50, 250), 50);
  EXPECT_EQ(step_scalar_interval(50, 48), 9);
  EXPECT_EQ(step_scalar_interval(50, 3), 1);
  EXPECT_EQ(step_scalar_interval(2, 10), 2);
  EXPECT_EQ(step_scalar_interval(0, 1000), 0);  // run.log_every = 0: none
  for (const std::int64_t total : {1, 5, 48, 100, 249, 250, 10000})
    EXPECT_GE(total / step_scalar_interval(50, total), std::min<std::int64_t>(total, 5)) << total;
}

// A 48-step run with the default run.log_every of 50 prints no progress line (fast, on the step
// grid only) but writes step scalars at steps 9, 18, 27, 36 and 45.
TEST(RunWatch, AShortRunGetsStepScalars) {
  const fs::path dir = fs::temp_directory_path() / ("ddp_run_watch_" + std::to_string(getpid()));
  RunOptions run;
  run.dir = dir.string();
  run.tensorboard = true;
  std::ostringstream out;
  std::vector<std::int64_t> due;
  {
    RunWatch watch(out, run, 48, 0, 0);
    watch.new_epoch();
    for (std::int64_t s = 1; s <= 48; ++s)
      if (watch.due(s)) {
        due.push_back(s);
        watch.step(s, 1, 1, 0.1, 2.0 * static_cast<double>(s), 64 * s, 64 * s);
      }
  }
  EXPECT_EQ(due, (std::vector<std::int64_t>{9, 18, 27, 36, 45}));
  EXPECT_EQ(out.str(), "");
  std::int64_t files = 0, bytes = 0;
  for (const auto& e : fs::directory_iterator(dir / "tensorboard")) {
    ++files;
    bytes += static_cast<std::int64_t>(e.file_size());
  }
  EXPECT_EQ(files, 1);
  EXPECT_GT(bytes, 5 * 3 * 20);  // five events of three scalars
  // Without run.tensorboard nothing is written and only progress lines are due.
  run.tensorboard = false;
  run.dir = (dir / "off").string();
  RunWatch off(out, run, 48, 0, 0);
  EXPECT_FALSE(off.due(9));
  EXPECT_FALSE(fs::exists(dir / "off"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddp::train
