#pragma once
// Snapshots of a training run: rank 0 writes the model, the optimizer state and where the run
// stands (RunState) into run.dir, atomically, and prunes the older ones; a resume reads them back
// on rank 0 and hands them to every rank (the run directory need not be shared).
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/train/batch_plan.hpp"
#include "ddp/train/loss_scaler.hpp"
#include "ddp/train/options.hpp"
#include "ddp/train/trace.hpp"
#include "ddp/train/weight_average.hpp"

namespace ddp::train {

// Where a run stands beyond its weights and optimizer state: what a snapshot keeps of the loop.
struct RunState {
  std::string run_id;             // the run this trainer continues (snapshots carry it)
  std::int64_t global_step = 0;   // optimizer steps of the run
  std::int64_t samples_seen = 0;  // global samples trained
  std::int64_t start_epoch = 0, start_step = 0;  // where this segment starts (a resume's position)
  std::string history;                           // metrics.jsonl lines so far
  std::string init_from;     // train.init: the weights file the run started from (snapshots say it)
  double run_train_s = 0.0;  // the run's training time before this segment (from the snapshot)
  std::chrono::steady_clock::time_point segment_t0 = std::chrono::steady_clock::now();
  ckpt::EpochProgress epoch_carry;  // the resumed epoch's totals before this segment
  ckpt::EpochProgress progress;     // the current epoch's totals (saved by a mid-epoch stop)

  // The run's training time so far, over all its segments.
  double run_time_s() const;
};

class Checkpointer {
 public:
  // Works on the trainer's model, optimizer, loss scaler and run state (all outlive it).
  Checkpointer(const Setup& cfg, comm::Communicator& comm, std::ostream& out, nn::Model& model,
               optim::Optimizer& opt, LossScaler& scaler, RunState& state);

  // Rank 0 writes a snapshot of the current state at `epoch` (epochs done) and `step_in_epoch`
  // (steps of the next one done; 0: none) and prunes old ones; refuses weights that are not
  // finite. shares: every rank's slice of `global_batch` the next epoch trains with.
  void save(std::int64_t epoch, std::int64_t step_in_epoch, const std::vector<std::int64_t>& shares,
            std::int64_t global_batch, Trace* trace);

  // Loads the snapshot cfg.train.resume names ("auto": the newest in run.dir; "" does nothing)
  // into the model, optimizer, loss scaler and run state on every rank. Returns the snapshot's
  // rank shares when train.rank_shares = auto keeps them (slices of plan's global batch, for the
  // next epoch), else nothing. ConfigError when a mid-epoch position does not fit
  // steps_per_epoch (another global batch).
  std::vector<std::int64_t> resume(const BatchPlan& plan, std::int64_t steps_per_epoch);

  // The run's moving average of the weights (train.ema; it outlives the checkpointer): written to
  // and resumed from /ema.
  void set_average(WeightAverage* ema) { ema_ = ema; }

 private:
  // Rank 0 finds and reads the snapshot into the model's and optimizer's host mirrors; its state
  // reaches every rank encoded through the snapshot field table (ckpt::broadcast_resume_state),
  // then the tensors (sync::broadcast_state). nullopt: no snapshot to resume from.
  std::optional<ckpt::SnapshotState> read_and_broadcast();

  const Setup& cfg_;
  comm::Communicator& comm_;
  std::ostream& out_;
  nn::Model& model_;
  optim::Optimizer& opt_;
  LossScaler& scaler_;
  RunState& state_;
  WeightAverage* ema_ = nullptr;
};

}  // namespace ddp::train
