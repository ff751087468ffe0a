#pragma once
// An epoch's training figures: the loss as the steps go, checked for NaN/inf, and at the end the
// epoch's totals (every rank's, plus what earlier job segments trained of a resumed epoch) as its
// metrics row.
#include <cstdint>
#include <string>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/comm/communicator.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/loss.hpp"
#include "ddp/train/metrics.hpp"

namespace ddp::train {

// "training diverged: the loss is not finite (NaN or inf) in epoch E, WHERE; ..." with what to do.
// epoch: 0-based.
Error diverged_error(std::int64_t epoch, const std::string& where);

// The summed training loss and correct count of this rank's samples, read from the loss when the
// loop asks (reading waits for a GPU: the CPU reads after every step, a GPU only where a line
// needs it and at the epoch's end).
class EpochLoss {
 public:
  // epoch: 0-based; first_step: the step the epoch (re)starts from; world: the ranks.
  EpochLoss(nn::SoftmaxCrossEntropy& loss, std::int64_t epoch, std::int64_t first_step, int world,
            int rank);
  // Adds the sums up to step `step` (global step `global_step`). NaN/inf weights would go on into
  // every later step and snapshot: the first time the sum is not finite, one rank alone throws
  // diverged_error; on several ranks it says so on stderr and nonfinite() turns true, so that the
  // stop agreement makes every rank stop at the same step.
  void take(std::int64_t step, std::int64_t global_step);

  std::int64_t epoch() const { return epoch_; }
  double sum() const { return sum_; }
  std::int64_t correct() const { return correct_; }
  bool nonfinite() const { return nonfinite_at_ > 0; }

 private:
  nn::SoftmaxCrossEntropy& loss_;
  std::int64_t epoch_;
  int world_, rank_;
  double sum_ = 0.0;
  std::int64_t correct_ = 0;
  std::int64_t checked_step_;      // the loss was finite up to here
  std::int64_t nonfinite_at_ = 0;  // the step whose check found it not finite (0: none)
};

// The epoch's totals, collective over comm: every rank's loss sum, correct count and samples
// (`samples`: this rank's), added to `carry` (what earlier job segments trained of the epoch), with
// this segment's `steps` and its training and gradient-waiting time. Every rank throws
// diverged_error alike when the summed loss is not finite (`end`: where the epoch ended).
ckpt::EpochProgress epoch_totals(comm::Communicator& comm, const EpochLoss& loss,
                                 std::int64_t samples, std::int64_t steps, double train_s,
                                 double wait_s, const ckpt::EpochProgress& carry,
                                 const std::string& end);

// The metrics row of epoch `epoch` (0-based) of `epochs` from its totals over every rank and
// segment; lr: of its last step. The evaluation and the ranks' speeds are the caller's to add.
EpochMetrics epoch_metrics(const ckpt::EpochProgress& totals, std::int64_t epoch,
                           std::int64_t epochs, std::int64_t segment, double lr);

}  // namespace ddp::train
