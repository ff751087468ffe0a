#pragma once
// What one epoch produced, and where it goes: a human line on stdout, a live progress bar on a
// terminal, and metrics.jsonl in the run directory (rank 0 only).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ddp/train/confusion.hpp"
#include "ddp/train/kept_file.hpp"
#include "ddp/train/rank_speed.hpp"

namespace ddp::train {

struct EpochMetrics {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t epochs = 0;
  std::int64_t segment = 1;  // the job segment that finished the epoch (run.json's segments)
  std::int64_t steps = 0;    // over all segments that trained it
  double train_loss = 0.0;   // mean over all samples of all ranks
  double train_acc = 0.0;
  bool evaluated = false;
  double test_loss = 0.0;
  double test_acc = 0.0;  // fraction
  std::int64_t test_samples = 0;
  // The evaluation's confusion matrix and the class names (empty when not evaluated).
  Confusion confusion;
  std::vector<std::string> class_names;
  double lr = 0.0;  // learning rate of the epoch's last step
  double images_per_s = 0.0;
  double epoch_s = 0.0;  // training time of the epoch (over all segments that trained it)
  double eval_s = 0.0;
  double comm_wait_s = 0.0;  // time this rank (0) waited for gradient all-reduces after backward
  // Every rank's figures over the steps this job segment trained of the epoch (rank_speed.hpp); a
  // resumed epoch's row covers only the part trained after the resume. Empty: none measured.
  std::vector<RankSpeed> ranks;
};

// "epoch 3/10 | steps 235 | loss 0.412 | test acc 86.1% | 9,840 img/s | 6.1 s"
std::string format_epoch_line(const EpochMetrics& m);
// "9,840"
std::string with_thousands(double value);

// One epoch as a metrics.jsonl line (no trailing newline). An evaluated epoch carries "per_class"
// ([{"class", "accuracy", "samples"}, ...]) and "confusion" (rows: true class, columns:
// predicted) after "test_samples". The ranks array comes last, one object
// per rank: {"rank", "host", "threads", "cpus", "share", "samples", "compute_s", "wait_s",
// "images_per_s", "compute_ms_per_sample"} (images_per_s: what the rank contributed, summing to
// the epoch's; compute_ms_per_sample: how fast it computes, leaving out the run's warm-up step).
std::string to_json(const EpochMetrics& m);

class MetricsLog {
 public:
  // Replaces dir/metrics.jsonl atomically with `history` (the rows a resumed snapshot carries,
  // already JSON and newline-terminated; "" for a new run), then appends to it. Rows written after
  // that snapshot by a segment that did not finish are dropped: their epochs are trained again.
  // Each write first checks that metrics.jsonl and dir/config.toml (as it is now, written at the
  // start of the segment) are still there, and writes them again whole if they were deleted or
  // replaced (kept_file.hpp).
  MetricsLog(const std::filesystem::path& dir, const std::string& history);
  void write_epoch(const EpochMetrics& m);
  // The closing summary object: {"summary": true, ...}. total_s: the run's training and
  // evaluation time over all its segments.
  void write_summary(const EpochMetrics& last, double total_s, std::int64_t world_size,
                     std::uint64_t weights_digest, std::int64_t segments);

 private:
  void append(const std::string& text);
  KeptFile metrics_;
  KeptFile config_;
};

// A one-line progress bar redrawn with '\r' when stdout is a terminal; silent otherwise.
class ProgressBar {
 public:
  ProgressBar(bool enabled, std::int64_t epoch, std::int64_t epochs, std::int64_t steps);
  void update(std::int64_t step, double loss, double images_per_s);
  void clear();

 private:
  bool enabled_;
  std::int64_t epoch_, epochs_, steps_;
};

}  // namespace ddp::train
