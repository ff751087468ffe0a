#pragma once
// Progress lines for batch jobs (stdout not a terminal, where the progress bar stays silent): every
// run.log_every steps, and at least every 30 s, rank 0 prints
//   [2026-11-25 18:36:48] step 120/1880 (epoch 2 of 10) | train loss 0.532 | lr 0.1 | 9,840 img/s |
//   ETA 3m12s
// The loss is rank 0's mean over its samples since the previous line (reading every rank's would
// cost a collective per line); images/s are the global batch's over the same interval; the ETA
// extrapolates the steps this job segment has trained so far.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace ddp::train {

// What one interval measured (also the TensorBoard step scalars).
struct ProgressInterval {
  double train_loss = 0.0;
  double images_per_s = 0.0;
};

class ProgressLog {
 public:
  // print: lines on `out` (stdout is no terminal); every: run.log_every (0 = no intervals);
  // total_steps: of the whole run; first_step, first_samples: the global step and samples seen
  // this segment starts from.
  ProgressLog(std::ostream& out, bool print, std::int64_t every, std::int64_t total_steps,
              std::int64_t first_step, std::int64_t first_samples);
  // Whether an interval ends after global step `global_step`: every run.log_every steps, and
  // when printing also 30 s after the previous line.
  bool due(std::int64_t global_step) const;
  bool on_step_grid(std::int64_t global_step) const {
    return every_ > 0 && global_step % every_ == 0;
  }
  // Ends the interval at global_step (printing its line); loss_sum/samples: rank 0's totals so far
  // this epoch (the interval is the difference to the previous line); global_samples: every
  // rank's samples trained in the run.
  ProgressInterval line(std::int64_t global_step, std::int64_t epoch, std::int64_t epochs,
                        double lr, double loss_sum, std::int64_t samples,
                        std::int64_t global_samples);
  // A new epoch's loss sums start from zero.
  void new_epoch();

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& out_;
  bool print_;
  std::int64_t every_, total_, first_step_;
  Clock::time_point t0_, last_t_;
  std::int64_t last_global_samples_ = 0;
  double last_loss_sum_ = 0.0;
  std::int64_t last_samples_ = 0;
};

// "2026-11-25 18:36:48" (local time): the stamp of progress, epoch and rank-log lines.
std::string timestamp_now();

// "3m12s", "1h05m", "12s"
std::string duration_text(double seconds);

}  // namespace ddp::train
