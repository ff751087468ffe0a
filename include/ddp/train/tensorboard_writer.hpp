#pragma once
// TensorBoard event files (run.tensorboard): rank 0 writes run.dir/tensorboard/
// events.out.tfevents.<unix time>.<host>, a new file per job segment, as TensorFlow's writers do.
//
// A file is a sequence of records (uint64 length, masked CRC-32C of the length, the serialized
// tensorboard.Event, masked CRC-32C of it; all little-endian); its first event carries the file
// version "brain.Event:2". Every scalar's step is the run's global step (optimizer steps), also
// for the per-epoch scalars, so that the curves of both kinds share one x axis.
//
// Resuming: a resumed segment writes only steps after its snapshot's global step, so what the
// earlier files hold up to the snapshot is never written twice. Steps a killed segment wrote
// after its last snapshot are trained (and written) again: the resumed file starts with a
// SessionLog START at the first step it trains, the marker with which TensorFlow's writers
// announce a restart and on which TensorBoard's loader drops the older file's data from that
// step on (purge_orphaned_data), so each step keeps the value of the run that went on.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ddp/train/metrics.hpp"

namespace ddp::train {

class TensorBoardWriter {
 public:
  // Creates dir (run.dir/tensorboard) and a new events file in it, named for this host.
  // first_step: the global step the segment starts from (0, or its snapshot's): the restart marker
  // goes at the step after it.
  TensorBoardWriter(const std::filesystem::path& dir, std::int64_t first_step);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event holding these (tag, value) scalars at `step`; flushed to the file at once.
  void scalars(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Every field of an epoch's metrics.jsonl row (epoch/<field>, and rank_images_per_s/rank_N per
  // rank) at the global step that ended the epoch.
  void epoch(std::int64_t global_step, const EpochMetrics& m);
  const std::filesystem::path& path() const { return path_; }

 private:
  void record(const std::string& data);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// The masked CRC-32C of TFRecord framing: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

}  // namespace ddp::train
