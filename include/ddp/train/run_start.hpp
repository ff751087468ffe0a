#pragma once
// How a training invocation starts in its run directory, decided once by rank 0 and shared with
// every rank: a fresh run, the continuation of the run the directory holds (from which snapshot,
// with which configuration changes), or nothing to do because that run is complete. Starting
// never mixes two runs' files; a configuration change that makes the snapshot meaningless is an
// error listing each key.
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/error.hpp"
#include "ddp/train/options.hpp"
#include "ddp/train/run_record.hpp"

namespace ddp::train {

struct RunStart {
  enum class Action { fresh, resume, nothing_to_do };
  Action action = Action::fresh;
  // What to train with: the caller's configuration with train.resume set to the snapshot's path
  // ("" for a fresh start) and train.global_batch kept at the run's when a resume does not
  // override it explicitly.
  Setup config;
  std::string run_id;
  std::filesystem::path snapshot;    // Action::resume
  std::vector<std::string> changes;  // configuration changes since the snapshot (rank 0)
  std::optional<RunRecord> record;   // the run directory's run.json, if any (rank 0)
  // Rank 0's exclusive lock on run.dir, held while this lives: a second job in the same directory
  // is refused instead of mixing its files into the run.
  std::shared_ptr<void> lock;
};

// Thrown by plan_run_start on the ranks other than 0 when rank 0 could not start the run (rank 0
// throws its own error, which says why): every rank knows, so the job can end without MPI_Abort.
class RunStartFailedOnRank0 : public Error {
 public:
  using Error::Error;
};

// Collective over comm. Rank 0 reads run.dir (run.json, the snapshots) and decides; an error
// there (another run's files without --resume auto / --run.overwrite, a forbidden change, an
// unreadable snapshot named with --resume) is thrown on rank 0 and reported on the others as
// "rank 0 could not start the run" (RunStartFailedOnRank0). Prints its decisions to `out`.
RunStart plan_run_start(const Setup& cfg, comm::Communicator& comm, std::ostream& out);

// The files of a run in dir (run.json, config.toml, metrics.jsonl, snapshot_*.h5), sorted.
std::vector<std::filesystem::path> run_files(const std::filesystem::path& dir);

}  // namespace ddp::train
