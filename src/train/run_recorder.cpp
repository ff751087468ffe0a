#include "ddp/train/run_recorder.hpp"

#include <cstring>
#include <exception>
#include <filesystem>

#include "ddp/ckpt/snapshot.hpp"

namespace ddp::train {

RunRecorder::RunRecorder(bool active, const RunStart& start, const Setup& cfg, int world,
                         std::int64_t start_epoch, std::int64_t start_step)
    : dir_(cfg.run.dir) {
  if (!active) return;
  RunRecord& record = record_.emplace(start.record.value_or(RunRecord{}));
  for (auto& s : record.segments)
    if (s.exit == "running") s.exit = "ended without a word (killed, or its node failed)";
  record.run_id = start.run_id;
  record.status = "running";
  record.config_hash = config_hash(cfg.resolved_toml);
  record.epochs = cfg.train.epochs;
  record.epochs_done = start_epoch;
  // A fresh start records the file it starts from; a resume keeps what the run started from.
  if (start.snapshot.empty()) record.init_from = cfg.train.init;
  RunSegment seg;
  seg.number = static_cast<std::int64_t>(record.segments.size()) + 1;
  seg.start = utc_now();
  seg.world_size = world;
  seg.config_hash = record.config_hash;
  seg.resumed_from = start.snapshot.string();
  seg.start_epoch = start_epoch;
  seg.start_step = start_step;
  seg.config_changes = start.changes;
  seg.epochs_done = start_epoch;
  record.segments.push_back(seg);
  segment_ = seg.number;
  ckpt::write_file_atomically(std::filesystem::path(dir_) / kResolvedConfigFile, cfg.resolved_toml);
  write();
}

void RunRecorder::write() {
  if (record_) write_run_record(dir_, *record_);
}

void RunRecorder::epochs_done(std::int64_t done) {
  if (!record_) return;
  record_->epochs_done = done;
  record_->segments.back().epochs_done = done;
  write();
}

void RunRecorder::ended(bool stopped, int stop_signal) {
  if (!record_) return;
  record_->status = stopped ? "stopped" : "complete";
  record_->segments.back().exit =
      stopped ? (stop_signal != 0 ? std::string("stopped by ") + strsignal(stop_signal)
                                  : std::string("stopped: another rank got a stop signal"))
              : "complete";
  record_->segments.back().end = utc_now();
  write();
}

void RunRecorder::failed(const std::string& what) noexcept {
  if (!record_) return;
  try {
    record_->status = "failed";
    record_->segments.back().exit = "failed: " + what;
    record_->segments.back().end = utc_now();
    write();
  } catch (const std::exception&) {
    // The training error is the one to report.
  }
}

}  // namespace ddp::train
