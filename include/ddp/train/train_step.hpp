#pragma once
// One training step: a global batch's slice in, every rank's weights updated alike. It reads top
// to bottom as llm.c's step does:
//   forward, loss and backward of each micro-batch (the gradient buckets' all-reduces start during
//   the last backward), the wait for the all-reduced gradients, the learning rate, then unscaling
//   with the overflow check and the optimizer.
// The parts it works on (model, loss, gradient sync, optimizer, schedule) belong to the trainer;
// the step owns what only it uses: the loss scaler, the loss-gradient buffer, the per-step timers.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "ddp/backend/backend.hpp"
#include "ddp/data/loader.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/lr_schedule.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/sync/gradient_sync.hpp"
#include "ddp/train/batch_feed.hpp"
#include "ddp/train/device_step_timer.hpp"
#include "ddp/train/loss_scaler.hpp"
#include "ddp/train/micro_batches.hpp"
#include "ddp/train/rank_speed.hpp"
#include "ddp/train/trace.hpp"

namespace ddp::train {

// What a step works on (the trainer's).
struct StepParts {
  backend::Backend& be;
  nn::Model& model;
  nn::SoftmaxCrossEntropy& loss;  // with train.label_smoothing
  sync::GradientSync& sync;
  optim::Optimizer& opt;
  const optim::LrSchedule& schedule;
};

class TrainStep {
 public:
  // scaler: dynamic loss scaling, or disabled. seed: train.seed (dropout masks). rank: this
  // rank's. batch_stats_synced: sync batch norm over several ranks (a micro-batch without samples
  // still joins its collectives). Reads DDP_FAULT_INF_GRAD=RANK:STEP (test-only fault injection:
  // that rank's loss gradient gets an inf at that global step); ConfigError when it is malformed.
  TrainStep(StepParts parts, LossScaler scaler, std::uint64_t seed, int rank,
            bool batch_stats_synced);
  ~TrainStep();

  // Buffers for micro-batches of up to micro_batch samples and slices of up to rank_batch (grown,
  // never shrunk).
  void reserve(std::int64_t micro_batch, std::int64_t rank_batch);
  // Every rank's step phases into `trace` (null: none).
  void set_trace(Trace* trace) { trace_ = trace; }

  // The step with global number `global_step` over this rank's slice `batch` of a global batch, cut
  // into micro-batches by `plan`. `feed` stages the next batch while the device computes. Returns
  // the learning rate applied. The summed loss and correct count accumulate in the loss (take()).
  double run(const data::Batch& batch, const MicroBatchPlan& plan, BatchFeed& feed,
             std::int64_t global_step);

  // On a GPU with loss scaling: the overflow flags not yet read, read back into the loss scaler
  // and the optimizer's step count (before a snapshot, at an epoch's end).
  void settle_overflow() { settle_overflow(0); }
  // Time spent so far waiting for gradient all-reduces (overlapped and blocking): the host's wait
  // on the CPU, the device's on a GPU (of the steps collected so far).
  double grad_wait_s() const;
  // On a GPU: the device-timed steps the device has passed into the rank-speed meter and the wait
  // total (all of them, waiting for the device, with wait_for_all).
  void collect_step_times(bool wait_for_all);
  // This rank's speed over the steps since the previous call (rank_speed.hpp), `train_s` the
  // epoch's wall-clock time.
  RankSpeed take_epoch(double train_s) { return step_meter_.take_epoch(train_s); }

  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }

 private:
  // How the optimizer applies the all-reduced gradients, decided once.
  enum class Update {
    plain,       // no loss scaling: the gradients as they are
    check_now,   // unscale and read the overflow flag before stepping (the CPU reads it at no
                 // cost; Adam's bias correction must know the applied steps when it is enqueued)
    check_late,  // a GPU without that need: the device skips an overflowing step itself and the
                 // scaler learns of it a step later, so the host never waits for the step it
                 // has just enqueued
  };

  // Where a step's timing starts: the gradient wait so far, the host clock (and the device's).
  struct Timing {
    double wait_before = 0.0;
    std::chrono::steady_clock::time_point start;
  };
  Timing start_timing();
  // The step's bucket all-reduces into the trace, its compute and wait into the rank-speed meter.
  void end_timing(const Timing& t, std::int64_t samples, std::int64_t global_step);
  // Forward, loss and backward of every micro-batch; the last backward starts the buckets.
  void forward_backward(const data::Batch& batch, const MicroBatchPlan& plan,
                        std::int64_t global_step);
  // The optimizer step on the unscaled gradients (skipped where they overflowed).
  void update(double lr, std::int64_t global_step);
  // The overflow flags of the steps enqueued so far but the newest `keep`.
  void settle_overflow(std::size_t keep);

  StepParts p_;
  LossScaler scaler_;
  Update update_ = Update::plain;
  std::uint64_t seed_;
  int rank_;
  bool batch_stats_synced_;
  Trace* trace_ = nullptr;
  Tensor dlogits_;
  std::vector<std::int64_t> sample_ids_;
  // GPU: the overflow-flag slots not yet read, oldest first, with the scale of their step.
  std::deque<std::pair<int, double>> overflow_pending_;
  int fault_inf_rank_ = -1;
  std::int64_t fault_inf_step_ = -1;
  // On a GPU: each step's compute and gradient wait, timed on the device; their wait total.
  std::unique_ptr<DeviceStepTimer> step_timer_;
  double device_wait_s_ = 0.0;
  StepMeter step_meter_;  // this rank's step times
};

}  // namespace ddp::train
