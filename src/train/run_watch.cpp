#include "ddp/train/run_watch.hpp"

#include <algorithm>
#include <filesystem>

#include "ddp/runtime/runtime.hpp"

namespace ddp::train {

std::int64_t step_scalar_interval(std::int64_t log_every, std::int64_t total_steps) {
  if (log_every <= 0) return 0;
  return std::clamp<std::int64_t>(total_steps / kMinStepScalars, 1, log_every);
}

RunWatch::RunWatch(std::ostream& out, const RunOptions& run, std::int64_t total_steps,
                   std::int64_t first_step, std::int64_t first_samples)
    : progress_(out, !runtime::stdout_is_terminal(), run.log_every, total_steps, first_step,
                first_samples) {
  if (!run.tensorboard) return;
  tensorboard_ = std::make_unique<TensorBoardWriter>(std::filesystem::path(run.dir) / "tensorboard",
                                                     first_step);
  scalars_.emplace(out, false, step_scalar_interval(run.log_every, total_steps), total_steps,
                   first_step, first_samples);
}

void RunWatch::new_epoch() {
  progress_.new_epoch();
  if (scalars_) scalars_->new_epoch();
}

bool RunWatch::due(std::int64_t global_step) {
  line_due_ = progress_.due(global_step);
  scalars_due_ = scalars_ && (line_due_ || scalars_->due(global_step));
  return line_due_ || scalars_due_;
}

void RunWatch::step(std::int64_t global_step, std::int64_t epoch, std::int64_t epochs, double lr,
                    double loss_sum, std::int64_t samples, std::int64_t global_samples) {
  if (line_due_) progress_.line(global_step, epoch, epochs, lr, loss_sum, samples, global_samples);
  if (!scalars_due_) return;
  const auto iv = scalars_->line(global_step, epoch, epochs, lr, loss_sum, samples, global_samples);
  tensorboard_->scalars(global_step, {{"step/train_loss", iv.train_loss},
                                      {"step/lr", lr},
                                      {"step/images_per_s", iv.images_per_s}});
}

void RunWatch::epoch(std::int64_t global_step, const EpochMetrics& m) {
  if (tensorboard_) tensorboard_->epoch(global_step, m);
}

}  // namespace ddp::train
