#pragma once
// A run's identity, kept in run.dir/run.json (written atomically by rank 0): its id, the hash of
// its resolved configuration, its status and the history of the job segments that trained it
// (each start and end, world size, where it resumed from, configuration changes, why it ended).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddp::train {

struct RunSegment {
  std::int64_t number = 0;  // 1-based
  std::string start, end;   // UTC, ISO 8601; end "" while running
  std::int64_t world_size = 1;
  std::string config_hash;
  std::string resumed_from;  // the snapshot file, "" when the segment started from scratch
  std::int64_t start_epoch = 0, start_step = 0;
  std::vector<std::string> config_changes;  // "optim.lr: 0.01 -> 0.02"
  // "running" | "complete" | "stopped by SIGUSR1" | "failed: <message>" | "ended without a word
  // (killed, or its node failed)"
  std::string exit = "running";
  std::int64_t epochs_done = 0;  // completed epochs of the run when the segment ended
};

struct RunRecord {
  std::string run_id;
  std::string status = "running";  // running | stopped | complete | failed
  std::string config_hash;         // of the latest segment's configuration
  std::int64_t epochs = 0;         // the latest segment's train.epochs
  std::int64_t epochs_done = 0;
  std::string init_from;  // train.init: the weights file the run started from ("" for none)
  std::vector<RunSegment> segments;
};

inline constexpr const char* kRunRecordFile = "run.json";
inline constexpr const char* kResolvedConfigFile = "config.toml";

std::string to_json(const RunRecord& r);
// Throws DataError naming `source` when the text is not a run record.
RunRecord parse_run_record(const std::string& json, const std::string& source);

// dir/run.json, or nullopt when there is none; DataError when it exists but cannot be read.
std::optional<RunRecord> read_run_record(const std::filesystem::path& dir);
// Atomic (temporary file, fsync, rename): a reader sees the old record or the new one.
void write_run_record(const std::filesystem::path& dir, const RunRecord& r);

// 1 to 64 of [A-Za-z0-9._-]: it names files, archive folders and a header line.
bool is_valid_run_id(const std::string& id);

// "20261124-101500-3f2a9c1d": the start time (UTC) and 32 random bits.
std::string new_run_id();
// "2026-11-24T10:15:00Z"
std::string utc_now();
// 64-bit FNV-1a of the configuration without its invocation keys, as 16 hex digits.
std::string config_hash(const std::string& resolved_toml);

}  // namespace ddp::train
