#pragma once
// HDF5 snapshots of a training run: the model's parameters and buffers, the optimizer state, the
// training position, the seed, the resolved configuration and the metrics so far. They are
// rank-independent (every replica holds the same state), so a snapshot written by 3 ranks resumes
// on 1 or 8. The file layout is documented in docs/snapshot_format.md.
#include <compare>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"

namespace ddp::ckpt {

inline constexpr std::int64_t kFormatVersion = 1;
inline constexpr const char* kSnapshotKind = "snapshot";
inline constexpr const char* kWeightsKind = "weights";

// Where training stands. Ordered lexicographically: a later position compares greater.
struct TrainingPosition {
  std::int64_t epoch = 0;          // epochs fully completed
  std::int64_t step_in_epoch = 0;  // steps of the next epoch already done (mid-epoch), else 0
  std::int64_t samples_seen = 0;   // global samples trained on so far
  std::int64_t global_step = 0;    // optimizer steps so far
  friend auto operator<=>(const TrainingPosition&, const TrainingPosition&) = default;
};

struct EpochProgress {
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::int64_t samples = 0;
  std::int64_t steps = 0;
  double train_s = 0.0;
  double comm_wait_s = 0.0;
};

struct SnapshotMeta {
  TrainingPosition position;
  std::uint64_t seed = 0;
  std::int64_t world_size = 1;  // of the run that wrote it; informational, resuming may differ
  std::string config_toml;      // the resolved configuration
  std::string metrics_jsonl;    // metrics.jsonl so far
  std::string program_version;  // "0.1.0"
  // Dynamic loss scaling (fp16) when the run used it: the scale and the good steps since it last
  // changed, so a resumed run continues with them; 0 when it did not (or an older file).
  double loss_scale = 0.0;
  std::int64_t loss_scale_good_steps = 0;
  // The run this snapshot belongs to (run.json's run_id; "" in files written before runs had an
  // identity): a run directory's pruning and `--resume auto` only ever use their own run's files.
  std::string run_id;
  // Samples per optimizer step over all ranks: the run's global batch, kept on resume (0: older
  // file, derive it from the configuration).
  std::int64_t global_batch = 0;
  // Training time of the run up to this position, over all the job segments that led to it.
  double run_train_s = 0.0;
  // A mid-epoch snapshot's totals of the epoch so far (global sums), so that the segment that
  // finishes the epoch reports it whole: loss sum, correct predictions, samples, steps, seconds of
  // training and of waiting for gradients.
  EpochProgress epoch_progress;
  // Each rank's share of every global batch when the snapshot was written: its slice of the global
  // batch (train.rank_shares), one per rank of world_size; empty in files written before.
  std::vector<std::int64_t> rank_shares;
  std::int64_t format_version = kFormatVersion;  // as read; writing always writes kFormatVersion
  std::string init_from;  // the weights file the run started from (train.init), "" for none
  // train.reproducible: the chunk size the run trained with (its sums depend on it), 0 when it
  // was not reproducible (or an older file).
  std::int64_t chunk = 0;
  // What the file is: kSnapshotKind, a run's snapshot (everything to continue it), or
  // kWeightsKind, a weights file (scripts/torch_to_snapshot.py): parameters and batch-norm
  // statistics only, with no optimizer state, training position or configuration; train.init and
  // eval take it, a resume refuses it.
  std::string kind = kSnapshotKind;
  std::string imported_from;  // a weights file: the file it was made from ("resnet18.pth")
  // The moving average of the weights (train.ema): updates made so far; 0 when the run kept none
  // or it had not started (then the file has no /ema).
  std::int64_t ema_updates = 0;
};

// Everything a snapshot holds besides its tensors. Each member is one row of the field table
// (src/ckpt/snapshot_fields.cpp), which the HDF5 writer and reader, the codec, inspect and the
// resume broadcast all go through: a new field is a member here and a row there.
struct SnapshotState {
  SnapshotMeta meta;                 // the attributes and texts of /meta
  std::string optimizer_name;        // /optimizer: "sgd" | "adam" | "adamw"
  std::int64_t optimizer_steps = 0;  // /optimizer: optimizer steps taken
};

// Writes `file` atomically: builds it in memory, writes `<dir>/.<name>.tmp.<pid>`, fsync(file),
// rename, fsync(dir), so a file with the final name is always complete. A failure (ENOSPC, EACCES,
// ...) throws SystemError naming `file` and the reason, removes the temporary file and leaves any
// previous snapshot intact. Throws ConfigError for a layer name HDF5 cannot hold (empty, ".",
// containing '/'). Reads the host mirrors of the model and optimizer state after pulling them
// from the backend, so a GPU run's state is written like a CPU run's. optimizer_name: "sgd" |
// "adam" | "adamw", recorded for inspect and for the caller to compare on resume.
// A second copy of the model's tensors, laid out as its flat parameter and buffer host mirrors:
// the moving average of the weights (train/weight_average.hpp), written under /ema.
struct AveragedWeights {
  std::span<const float> params, buffers;
};
void write_snapshot(const std::filesystem::path& file, const nn::Model& model,
                    optim::Optimizer& opt, const std::string& optimizer_name,
                    const SnapshotMeta& meta, const AveragedWeights* ema = nullptr);

// A snapshot fully read into memory: its state and its tensors.
struct Snapshot : SnapshotState {
  std::filesystem::path source;  // the file it was read from (for messages)
  // "conv1.weight" -> shape, model order (each layer's parameters, then its buffers).
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  std::map<std::string, std::vector<float>> model;  // parameters and buffers by name
  // state name ("momentum", "exp_avg", ...) -> parameter name -> values
  std::map<std::string, std::map<std::string, std::vector<float>>> optimizer;
  // /ema: the moving average's parameters and buffers by name (empty when the file has none).
  std::map<std::string, std::vector<float>> ema;
};

// Throws DataError naming the file on anything wrong: missing, not HDF5, truncated, a checksum
// mismatch, a missing group/dataset/attribute, another format version.
Snapshot read_snapshot(const std::filesystem::path& file);
// Only /meta, for checks before loading tensors (the file is still read and verified in full).
SnapshotMeta read_meta(const std::filesystem::path& file);

// Copies the snapshot into the model's parameters and buffers and the optimizer's state and step
// count (their host mirrors, then pushed to the backend: the same file resumes on CPUs and GPUs).
// All or nothing: when the architecture differs, throws ConfigError listing every tensor whose name
// or shape differs (missing, unexpected, shape A vs B) and changes nothing; likewise when the
// optimizer keeps different state (e.g. an sgd snapshot into adam).
void restore(const Snapshot& s, nn::Model& model, optim::Optimizer& opt);
// The snapshot's moving average (/ema) into spans laid out as model's flat parameter and buffer
// mirrors. ConfigError naming every tensor of the model that /ema lacks or holds in another size;
// nothing is written then.
void restore_average(const Snapshot& s, const nn::Model& model, std::span<float> params,
                     std::span<float> buffers);

// "snapshot_e0003.h5": after 3 completed epochs.
std::string snapshot_name(std::int64_t epoch);
// "snapshot_e0003_s000120.h5": 3 completed epochs and 120 steps of the 4th (mid-epoch).
std::string snapshot_name(std::int64_t epoch, std::int64_t step);

// The newest complete, readable snapshot in dir (files named like snapshot_name; ordered by the
// training position stored in each file, not by name or mtime), or nullopt when there is none.
// With a run_id, only that run's snapshots count (others are skipped without a word); "" takes
// any. The chosen file has been read in full and verified. Every truncated, corrupt or unreadable
// candidate is skipped with warn("...names the file and why").
std::optional<std::filesystem::path> find_latest(
    const std::filesystem::path& dir, const std::function<void(const std::string&)>& warn,
    const std::string& run_id = "");

// Deletes run `run_id`'s older snapshots in dir so that its newest `keep` complete ones remain
// (keep <= 0: keeps all); `newest` is the position of the snapshot just written, and nothing at
// or after it is removed. Only ever removes files whose header names run_id (never another run's
// or an older program's files) and whose length and checksum verify (a corrupt file is left for
// a human to look at). Returns the files removed.
std::vector<std::filesystem::path> prune(const std::filesystem::path& dir, int keep,
                                         const std::string& run_id, const TrainingPosition& newest);

// Writes `bytes` to `file` atomically (temporary file, fsync, rename, fsync of the directory), as
// snapshots are: a reader sees the old content or the new, never a mix. Throws SystemError naming
// the file and the reason (ENOSPC, ...), leaving the old file intact and no temporary file. Only a
// new name or a regular file is replaced (keeping its permissions; through a symbolic link, the
// link's target): a device node, a FIFO or /dev/stdout is written into as it is, never replaced,
// and a directory or socket is refused. Every output path of the subcommands comes here.
void write_file_atomically(const std::filesystem::path& file, const std::string& bytes);

// Removes temporary files a killed writer left behind (".snapshot_*.h5.tmp.<pid>"); returns how
// many. Call on rank 0 before training, when no other process writes into dir.
int remove_stale_temp_files(const std::filesystem::path& dir);

// What a snapshot's 512-byte header says (position and run id), read without the rest of the
// file; nullopt for a file without a readable header or whose length differs from it.
struct HeaderInfo {
  TrainingPosition position;
  std::string run_id;
};
std::optional<HeaderInfo> peek_header(const std::filesystem::path& file);

// Human-readable summary: position, seed, world size, config digest (FNV-1a of the config text),
// format and program version, optimizer; then every /meta and /optimizer field as stored, tensor
// names and shapes, the metrics so far.
std::string inspect(const std::filesystem::path& file);

// Checks that dir exists or can be created and that a file can be created in it (creates and
// removes a probe file); throws SystemError naming dir and the reason. Call before training.
void ensure_writable_dir(const std::filesystem::path& dir);

}  // namespace ddp::ckpt
