#pragma once
// Learning-rate schedules as pure functions of the global step (so a resumed run continues
// exactly).
#include <cstdint>

#include "ddp/optim/options.hpp"

namespace ddp::optim {

class LrSchedule {
 public:
  LrSchedule(const ScheduleOptions& cfg, double base_lr, std::int64_t steps_per_epoch,
             std::int64_t epochs);
  // Learning rate for the optimizer step with 0-based index `step`.
  double at(std::int64_t step) const;

 private:
  ScheduleOptions cfg_;
  double base_;
  std::int64_t steps_per_epoch_, total_;
};

}  // namespace ddp::optim
