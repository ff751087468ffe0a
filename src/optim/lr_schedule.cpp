#include "ddp/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ddp/error.hpp"

namespace ddp::optim {
namespace {

// Cosine interpolation from `start` (pct = 0) to `end` (pct = 1), as torch's OneCycleLR does.
double cos_anneal(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleOptions& cfg, double base_lr, std::int64_t steps_per_epoch,
                       std::int64_t epochs)
    : cfg_(cfg),
      base_(base_lr),
      steps_per_epoch_(std::max<std::int64_t>(1, steps_per_epoch)),
      total_(std::max<std::int64_t>(1, steps_per_epoch * epochs)) {
  const auto& n = cfg_.name;
  if (n != "constant" && n != "step" && n != "cosine" && n != "onecycle")
    throw ConfigError("schedule.name = '" + n +
                      "': unknown schedule (constant, step, cosine, onecycle)");
}

double LrSchedule::at(std::int64_t step) const {
  const double t = static_cast<double>(std::min(step, total_));
  if (cfg_.name == "onecycle") {
    // torch.optim.lr_scheduler.OneCycleLR with anneal_strategy='cos', three_phase=False.
    const double initial = base_ / cfg_.div_factor;
    const double final_lr = initial / cfg_.final_div_factor;
    const double up = cfg_.pct_start * static_cast<double>(total_) - 1.0;
    const double down = static_cast<double>(total_) - up - 1.0;
    if (t <= up) return cos_anneal(initial, base_, up > 0 ? t / up : 1.0);
    return cos_anneal(base_, final_lr, down > 0 ? std::min(1.0, (t - up) / down) : 1.0);
  }
  double lr = base_;
  if (cfg_.name == "step") {
    const auto epoch = step / steps_per_epoch_;
    lr = base_ * std::pow(cfg_.gamma,
                          static_cast<double>(epoch / std::max<std::int64_t>(1, cfg_.step_size)));
  } else if (cfg_.name == "cosine") {
    lr = cos_anneal(base_, cfg_.min_lr, t / static_cast<double>(total_));
  }
  const double warm = cfg_.warmup_epochs * static_cast<double>(steps_per_epoch_);
  if (warm > 0 && t < warm) {
    const double f = cfg_.warmup_start_factor;
    lr *= f + (1.0 - f) * t / warm;
  }
  return lr;
}

}  // namespace ddp::optim
