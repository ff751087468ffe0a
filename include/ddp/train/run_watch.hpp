#pragma once
// What rank 0 shows of a run while it trains: progress lines (progress_log.hpp: every
// run.log_every steps and at least every 30 s when stdout is not a terminal) and, with
// run.tensorboard, TensorBoard events (tensorboard_writer.hpp): every epoch's metrics, and step
// scalars at least as often as progress lines - every step_scalar_interval() steps and with every
// progress line - so that a short run gets a step curve too.
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "ddp/train/metrics.hpp"
#include "ddp/train/options.hpp"
#include "ddp/train/progress_log.hpp"
#include "ddp/train/tensorboard_writer.hpp"

namespace ddp::train {

// The fewest step scalars a whole run gets (when it has that many steps).
inline constexpr std::int64_t kMinStepScalars = 5;

// Steps between TensorBoard step scalars: run.log_every, or fewer in a run of total_steps too
// short for kMinStepScalars of them; 0 (none) when log_every is 0.
std::int64_t step_scalar_interval(std::int64_t log_every, std::int64_t total_steps);

class RunWatch {
 public:
  // run: run.log_every, run.tensorboard, run.dir. total_steps: of the whole run; first_step,
  // first_samples: the global step and samples seen this segment starts from.
  RunWatch(std::ostream& out, const RunOptions& run, std::int64_t total_steps,
           std::int64_t first_step, std::int64_t first_samples);

  // A new epoch's loss sums start from zero.
  void new_epoch();
  // Whether global step `global_step` ends an interval of progress lines or step scalars (the
  // caller then reads the loss and calls step()).
  bool due(std::int64_t global_step);
  // The interval ending at `global_step`, after due() said so: loss_sum and samples are rank 0's
  // totals this epoch; global_samples: every rank's samples trained in the run.
  void step(std::int64_t global_step, std::int64_t epoch, std::int64_t epochs, double lr,
            double loss_sum, std::int64_t samples, std::int64_t global_samples);
  // An epoch's metrics row at the global step that ended it.
  void epoch(std::int64_t global_step, const EpochMetrics& m);

 private:
  ProgressLog progress_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::optional<ProgressLog> scalars_;  // the step scalars' intervals (prints nothing)
  bool line_due_ = false, scalars_due_ = false;
};

}  // namespace ddp::train
