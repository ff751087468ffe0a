#include "ddp/train/epoch_figures.hpp"

#include <cmath>
#include <cstdio>
#include <span>

namespace ddp::train {

Error diverged_error(std::int64_t epoch, const std::string& where) {
  return Error("training diverged: the loss is not finite (NaN or inf) in epoch " +
               std::to_string(epoch + 1) + ", " + where +
               "; no snapshot of these weights is written, the newest snapshot in run.dir "
               "holds the last finite ones. Lower optim.lr (or add warm-up) and resume from it");
}

EpochLoss::EpochLoss(nn::SoftmaxCrossEntropy& loss, std::int64_t epoch, std::int64_t first_step,
                     int world, int rank)
    : loss_(loss), epoch_(epoch), world_(world), rank_(rank), checked_step_(first_step) {}

void EpochLoss::take(std::int64_t step, std::int64_t global_step) {
  const auto r = loss_.take();
  sum_ += r.loss_sum;
  correct_ += r.correct;
  if (!std::isfinite(sum_) && nonfinite_at_ == 0) {
    nonfinite_at_ = step;
    const std::string where =
        step == checked_step_ + 1
            ? "step " + std::to_string(step)
            : "steps " + std::to_string(checked_step_ + 1) + ".." + std::to_string(step);
    if (world_ == 1)
      throw diverged_error(epoch_, where + " (global step " + std::to_string(global_step) + ")");
    std::fprintf(stderr, "ddp_train: rank %d: the loss is not finite in epoch %lld, %s\n", rank_,
                 static_cast<long long>(epoch_ + 1), where.c_str());
  }
  checked_step_ = step;
}

ckpt::EpochProgress epoch_totals(comm::Communicator& comm, const EpochLoss& loss,
                                 std::int64_t samples, std::int64_t steps, double train_s,
                                 double wait_s, const ckpt::EpochProgress& carry,
                                 const std::string& end) {
  double sums[1] = {loss.sum()};
  std::int64_t counts[2] = {loss.correct(), samples};
  if (comm.size() > 1) {
    comm.allreduce_sum(std::span<double>(sums, 1));
    comm.allreduce_sum(std::span<std::int64_t>(counts, 2));
  }
  // The sums are every rank's: all ranks stop here together when one rank's loss was not finite.
  if (!std::isfinite(sums[0])) throw diverged_error(loss.epoch(), "by its end (" + end + ")");
  return {carry.loss_sum + sums[0], carry.correct + counts[0], carry.samples + counts[1],
          carry.steps + steps,      carry.train_s + train_s,   carry.comm_wait_s + wait_s};
}

EpochMetrics epoch_metrics(const ckpt::EpochProgress& totals, std::int64_t epoch,
                           std::int64_t epochs, std::int64_t segment, double lr) {
  EpochMetrics m;
  m.epoch = epoch + 1;
  m.epochs = epochs;
  m.segment = segment;
  m.steps = totals.steps;
  const auto samples = static_cast<double>(totals.samples);
  m.train_loss = totals.samples > 0 ? totals.loss_sum / samples : 0.0;
  m.train_acc = totals.samples > 0 ? static_cast<double>(totals.correct) / samples : 0.0;
  m.lr = lr;
  m.epoch_s = totals.train_s;
  m.comm_wait_s = totals.comm_wait_s;
  m.images_per_s = totals.train_s > 0 ? samples / totals.train_s : 0.0;
  return m;
}

}  // namespace ddp::train
