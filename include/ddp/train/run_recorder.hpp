#pragma once
// Rank 0 keeps run.dir/run.json current while a job segment trains: the segment is recorded when it
// starts (with the configuration it runs, in config.toml), after every epoch, and when it ends -
// complete, stopped by a signal, or failed with its message. A segment an earlier job left
// "running" ended without a word. Ranks other than 0 record nothing.
#include <cstdint>
#include <optional>
#include <string>

#include "ddp/train/options.hpp"
#include "ddp/train/run_record.hpp"
#include "ddp/train/run_start.hpp"

namespace ddp::train {

class RunRecorder {
 public:
  // active: rank 0. Records the segment that starts at (start_epoch, start_step) of the run
  // start.run_id on `world` ranks, and writes config.toml.
  RunRecorder(bool active, const RunStart& start, const Setup& cfg, int world,
              std::int64_t start_epoch, std::int64_t start_step);

  // This segment's number in the run (metrics rows carry it); 1 on ranks other than 0.
  std::int64_t segment() const { return segment_; }
  // `done` epochs of the run are complete.
  void epochs_done(std::int64_t done);
  // The segment ended: complete, or stopped (by this rank's stop signal, or another rank's).
  void ended(bool stopped, int stop_signal);
  // The segment failed with `what` (best effort: the training error is the one to report).
  void failed(const std::string& what) noexcept;

 private:
  void write();
  std::string dir_;
  std::optional<RunRecord> record_;  // rank 0
  std::int64_t segment_ = 1;
};

}  // namespace ddp::train
